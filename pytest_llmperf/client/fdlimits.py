"""File descriptors for many concurrent streams: raise the soft limit, or say why not.

Every open stream holds a socket, and a socket is a file descriptor. Many
systems start processes with a soft ``RLIMIT_NOFILE`` of 1024 while allowing
far more (the hard limit), so a 10,000-stream run would fail half-way with
``EMFILE`` errors that look like server failures. Before a client opens its
pool, :func:`ensure_descriptors` raises the soft limit as far as needed (an
unprivileged process may go up to the hard limit) and, when even the hard
limit is too low, stops the run before any load with a message that says
what to change. On platforms without ``resource`` (Windows) it does nothing.
"""

from __future__ import annotations

from pytest_llmperf.errors import LlmPerfUsageError

__all__ = [
    "HEADROOM",
    "OPEN_LOOP_MAX_CONNECTIONS",
    "connection_budget",
    "descriptor_limits",
    "ensure_descriptors",
    "raise_nofile_limit",
]

# Beyond one socket per stream: the interpreter, pytest, log files, the event
# log, DNS, pipes to a simulator child, a few connections being replaced.
HEADROOM = 256
# An open-loop run has no concurrency to size its pool by: the pool may grow to
# this, or to what the descriptor limit allows, whichever is lower.
OPEN_LOOP_MAX_CONNECTIONS = 65536

try:
    import resource

    _HAS_RESOURCE = True
except ImportError:  # pragma: no cover - Windows
    _HAS_RESOURCE = False


def descriptor_limits() -> tuple[int, int] | None:
    """``(soft, hard)`` ``RLIMIT_NOFILE`` (``RLIM_INFINITY`` as a large int), or None."""
    if not _HAS_RESOURCE:
        return None
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    infinity = resource.RLIM_INFINITY
    return (soft if soft != infinity else 1 << 30, hard if hard != infinity else 1 << 30)


def raise_nofile_limit(wanted: int) -> tuple[int, int] | None:
    """Raise the soft limit to ``wanted`` (at most the hard limit); the limits after.

    Never lowers it. Returns None where limits do not exist.
    """
    limits = descriptor_limits()
    if limits is None:
        return None
    soft, hard = limits
    if soft >= wanted:
        return limits
    target = min(wanted, hard)
    try:
        hard_raw = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
        resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard_raw))
    except (ValueError, OSError):  # e.g. macOS caps at OPEN_MAX below the hard limit
        return limits
    return descriptor_limits()


def ensure_descriptors(streams: int, *, what: str = "concurrent streams") -> int:
    """Make room for ``streams`` open sockets; returns the soft limit now in force.

    Raises :class:`LlmPerfUsageError` naming the numbers and the fix when the
    OS will not allow that many.
    """
    needed = streams + HEADROOM
    limits = raise_nofile_limit(needed)
    if limits is None:
        return needed
    soft, hard = limits
    if soft < needed:
        raise LlmPerfUsageError(
            f"{streams} {what} need about {needed} file descriptors, but this process may "
            f"open only {soft} (RLIMIT_NOFILE soft {soft}, hard {hard}). Raise the limit "
            f"(`ulimit -n {needed}` in the shell that starts pytest; LimitNOFILE= for a "
            "systemd service; nofile in /etc/security/limits.conf; --ulimit nofile= for "
            "docker) or lower the concurrency."
        )
    return soft


def connection_budget(cap: int = OPEN_LOOP_MAX_CONNECTIONS) -> int:
    """How many sockets an open-loop pool may hold: the soft limit (raised as far as
    allowed, up to ``cap`` + headroom) minus headroom, and at least 64.

    An open-loop load must never wait for a free connection in the client: that
    wait would count against the server's TTFT (latency is measured from the
    planned send time). So its pool is sized by what the OS allows, not by a
    guess; past that, a request waits in the client for a free connection, and
    since open-loop latency counts from the planned send, the wait shows in its
    ``schedule_lag`` and TTFT (the self-check flags a run where it matters).
    """
    limits = raise_nofile_limit(cap + HEADROOM)
    if limits is None:
        return cap
    return max(64, min(cap, limits[0] - HEADROOM))
