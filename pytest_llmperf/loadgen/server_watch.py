"""The server the gate started, over one run: its resources sampled, its exit watched.

A run against a managed server (:class:`~pytest_llmperf.managed_server.ManagedServer`,
``LoadRun(..., server=...)``) gets a :class:`ServerWatch` from its start to its end:

- a :class:`~pytest_llmperf.managed_server.ResourceSampler` on the server's process tree,
  on a thread of its own (never on the request path), whose summary is the run's
  ``server_process["resources"]``;
- a crash watch on the run's loop: ``server.poll()`` (cheap: never blocks) every
  :data:`POLL_S`, and at once where the kernel tells (a pidfd, Linux 5.3+, readable the
  moment the process exits). An exit calls the run's ``on_exit`` once, with the exit
  and its one-line message ("server exited with signal 9 (SIGKILL) at 12.3 s into
  run0"): the run stops issuing and ends its drain at once
  (``StopReason.SERVER_EXITED``), so a dead server makes no stream of connect errors.

:meth:`ServerWatch.stop` gives the run's ``server_process`` block (the JSON report's
``runs[].server_process``: name, cmd, pid, log, restart, startup, resources, exit with the
log's last lines). Nothing here may break a run: a sampler that cannot start is said in
the block, and a watch that cannot open a pidfd polls.
"""

from __future__ import annotations

import asyncio
import os
import select
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:  # handed in by the plugin (or a library caller); never started here
    from pytest_llmperf.managed_server import ResourceSampler, ServerExit

__all__ = [
    "EXITING_WAIT_S",
    "EXIT_RECORD_WAIT_S",
    "LOG_TAIL_LINES",
    "POLL_S",
    "ServerWatch",
    "WatchedServer",
    "merged_server_process",
]

POLL_S = 0.1  # how often the run's loop asks whether the server has exited
# once the kernel says it exited: how long the loop may wait for the server's record of
# how (its waiter thread reads the exit status, the log's tail, the OOM counter)
EXIT_RECORD_WAIT_S = 0.25
# a failed request found the server exiting (PF_EXITING): how long its exit may take to
# become a record (a many-threaded server's threads end one by one)
EXITING_WAIT_S = 1.0
LOG_TAIL_LINES = 30  # the log's last lines kept with an exit (and in a failed test's text)


class WatchedServer(Protocol):
    """What a run reads of its server: a
    :class:`~pytest_llmperf.managed_server.ManagedServer`, or under xdist a worker's view
    of the controller's (the plugin's ``SharedServer``). Where it also has
    ``wait(timeout)`` (a ManagedServer), an exit the kernel told of is recorded at once."""

    @property
    def pid(self) -> int: ...

    @property
    def log_path(self) -> Path: ...

    def poll(self) -> ServerExit | None: ...

    def log_tail(self, lines: int = 30) -> str: ...

    def describe(self) -> dict[str, Any]: ...


class ServerWatch:
    """``server`` over the run labelled ``label``: :meth:`start` at the run's start (its
    monotonic ``t0_ns``), :meth:`stop` at its end. ``on_exit`` is called once, on the run's
    loop, with the exit and its message, when the server exits while the run is on.

    The watch is callbacks on the loop, no task: a timer every :data:`POLL_S` and the
    pidfd's reader. The reader runs in the same turn of the loop as the reads that see the
    server's sockets close, before any request task resumes, so a closed loop's slot whose
    request just failed finds the run stopped and sends no other; :meth:`check` (the run
    calls it on each failed request) covers the instant between the sockets' close and
    the exit's notice.
    """

    def __init__(
        self, server: WatchedServer, label: str, on_exit: Callable[[ServerExit, str], None]
    ) -> None:
        self.server = server
        self.label = label
        self.on_exit = on_exit
        self.exit: ServerExit | None = None
        self.t0_ns = 0
        self._sampler: ResourceSampler | None = None
        self._sampler_note = ""
        self._watching = False
        self._loop: asyncio.AbstractEventLoop | None = None
        self._timer: asyncio.TimerHandle | None = None
        self._pidfd: int | None = None
        # psutil's import and NVML's one-time start, here and not in start(): a run's
        # client CPU (the generator's self-check) is counted from its start
        from pytest_llmperf.managed_server import ResourceSampler
        from pytest_llmperf.managed_server.gpu import gpu_note

        self._sampler_type = ResourceSampler
        gpu_note()

    def start(self, t0_ns: int) -> None:
        """Start sampling and watching; a server found dead already stops the run now."""
        self.t0_ns = t0_ns
        try:
            sampler = self._sampler_type(self.server.pid)
            sampler.start()
            self._sampler = sampler
        except Exception as exc:  # the run goes on unsampled, and says why
            self._sampler_note = f"not sampled: {type(exc).__name__}: {exc}"
        self._watching = True
        if self.check():
            return
        self._loop = loop = asyncio.get_running_loop()
        self._pidfd = _pidfd(self.server.pid)
        if self._pidfd is not None:
            loop.add_reader(self._pidfd, self._on_pidfd)
        self._timer = loop.call_later(POLL_S, self._tick)

    def check(self, *, gone: bool = False, failed: bool = False) -> bool:
        """Has the server exited? If so (the first time, while the run is on), tell the
        run. Cheap: ``server.poll()`` never blocks. ``gone``: the kernel said it exited
        (its pidfd), so wait the moment the server's own waiter takes to record how.

        ``failed``: a request just failed. A dying process closes its sockets before the
        kernel reports it dead (its threads end one by one; a busy machine stretches
        that to tens of ms), and in that window a closed loop's slots would send again and
        be refused. So where the kernel says the process is exiting (its ``PF_EXITING``
        flag), wait for the exit (at most :data:`EXITING_WAIT_S`) before the run goes on:
        the loop stops only for a server that is dying, never for a live one."""
        if self.exit is not None or not self._watching:
            return self.exit is not None
        found = self.server.poll()
        wait: Callable[[float], ServerExit | None] | None = getattr(self.server, "wait", None)
        if found is None and wait is not None and (gone or self._pidfd_readable()):
            found = wait(EXIT_RECORD_WAIT_S)
        if found is None and failed and _exiting(self.server.pid):
            found = self._await_exit(wait)
        if found is None:
            return False
        self.exit = found = _with_status(found, self.server.pid)
        self._unwatch()
        self.on_exit(found, self._message(found))
        return True

    def _await_exit(self, wait: Callable[[float], ServerExit | None] | None) -> ServerExit | None:
        """The exit of a server the kernel says is exiting, waited for on this thread."""
        if wait is not None:
            return wait(EXITING_WAIT_S)
        deadline = time.monotonic() + EXITING_WAIT_S
        while time.monotonic() < deadline:  # a view without a waiter: poll, briefly
            time.sleep(0.005)
            if (found := self.server.poll()) is not None:
                return found
        return None

    def _message(self, exit: ServerExit) -> str:
        """The exit in one line: "server exited with signal 9 (SIGKILL) at 12.3 s into
        run0", "... before run1 began" (a server found dead at the run's start), "server
        exited at ..." (how is unknown here)."""
        text = exit.describe(self.label, self.t0_ns)
        if exit.at_ns < self.t0_ns:
            text = f"{exit.describe()} before {self.label or 'the run'} began"
        if exit.code is None and exit.signal is None:
            text = text.replace(" with code None", "", 1)
        return text

    async def stop(self, output_tokens: int) -> dict[str, Any]:
        """End the watch (one last look: an exit in the run's last instant counts) and the
        sampling; the run's ``server_process`` block."""
        self._unwatch()
        self._watching = False
        if self.exit is None and (found := self.server.poll()) is not None:
            self.exit = _with_status(found, self.server.pid)
        resources: dict[str, Any] | None = None
        if self._sampler is not None:
            # the last sample and the thread's join, off the loop
            resources = await asyncio.to_thread(self._sampler.stop, output_tokens)
            self._sampler = None
        elif self._sampler_note:
            resources = {"note": self._sampler_note}
        return self.block(resources)

    def block(self, resources: dict[str, Any] | None) -> dict[str, Any]:
        """The run's ``server_process``: which server, its startup, the run's resources and
        its exit (None while it lives)."""
        server = self.server
        described = server.describe()  # name, cmd (redacted), restart, startup, ...
        startup = described.get("startup") or {}
        exit = None
        if self.exit is not None:
            # code, signal, signal_name, oom, at_s, message, log_tail (redacted)
            exit = self.exit.to_dict(self.label, self.t0_ns, server.log_tail(LOG_TAIL_LINES))
            exit["message"] = self._message(self.exit)
        return {
            "name": described.get("name"),
            "cmd": described.get("cmd"),
            "pid": server.pid,
            "log": str(server.log_path),
            "restart": described.get("restart"),
            "startup": {
                "ready_s": startup.get("ready_s", described.get("ready_s")),
                "first_token_s": startup.get("first_token_s", described.get("first_token_s")),
            },
            "resources": resources,
            "exit": exit,
        }

    # -- the watch's callbacks -------------------------------------------------------

    def _tick(self) -> None:
        self._timer = None
        if not self.check() and self._watching and self._loop is not None:
            self._timer = self._loop.call_later(POLL_S, self._tick)

    def _on_pidfd(self) -> None:
        # readable once the process exited, and stays so: one look (the exit's record, a
        # few ms behind the kernel), then the timer alone
        self._close_pidfd()
        self.check(gone=True)

    def _pidfd_readable(self) -> bool:
        """The kernel's word, asked without waiting (a failed request's look)."""
        if self._pidfd is None:
            return False
        readable, _, _ = select.select([self._pidfd], [], [], 0)
        return bool(readable)

    def _close_pidfd(self) -> None:
        if self._pidfd is not None:
            if self._loop is not None:
                self._loop.remove_reader(self._pidfd)
            os.close(self._pidfd)
            self._pidfd = None

    def _unwatch(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self._close_pidfd()


def _with_status(exit: ServerExit, pid: int) -> ServerExit:
    """``exit`` with the code or signal the kernel keeps for a zombie (``/proc/PID/stat``'s
    52nd field, its wait status), where this process is not the one that reaps it (an
    xdist worker watching the controller's server); as it was where that cannot be read."""
    if exit.code is not None or exit.signal is not None:
        return exit
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        fields = stat[stat.rindex(")") + 2 :].split()
        if fields[0] != "Z":
            return exit
        status = int(fields[49])  # field 52 of the whole line: the 50th after "(comm)"
    except (OSError, ValueError, IndexError):
        return exit
    from pytest_llmperf.managed_server import ServerExit  # (a plain one: its own words)

    if os.WIFSIGNALED(status):
        return ServerExit(code=None, signal=os.WTERMSIG(status), oom=exit.oom, at_ns=exit.at_ns)
    if os.WIFEXITED(status):
        return ServerExit(code=os.WEXITSTATUS(status), signal=None, oom=exit.oom, at_ns=exit.at_ns)
    return exit


_PF_EXITING = 0x4  # include/linux/sched.h: the task is in do_exit()


def _exiting(pid: int) -> bool:
    """The kernel's word that ``pid`` is on its way out (``/proc/PID/stat``'s flags have
    ``PF_EXITING``, or it is a zombie already); False where that cannot be read."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        fields = stat[stat.rindex(")") + 2 :].split()
        return fields[0] in ("Z", "X") or bool(int(fields[6]) & _PF_EXITING)
    except (OSError, ValueError, IndexError):
        return False


def _pidfd(pid: int) -> int | None:
    """A descriptor readable when ``pid`` exits (Linux 5.3+), or None (then the timer)."""
    opener = getattr(os, "pidfd_open", None)
    if opener is None:
        return None
    try:
        fd: int = opener(pid)
    except OSError:  # gone already (poll() says so), or not allowed
        return None
    return fd


def merged_server_process(
    blocks: Sequence[dict[str, Any] | None], output_tokens: int
) -> dict[str, Any] | None:
    """One ``server_process`` of a side's A/B blocks (methodology/reference.py), in order:
    the first block's server, its first exit; RSS from the first block's start to the last
    one's end (growth over the whole comparison), its maximum, CPU summed (per output
    token over ``output_tokens``, the blocks' total), samples summed, GPU's maximum."""
    present = [b for b in blocks if b]
    if not present:
        return None
    merged = dict(present[0])
    merged["exit"] = next((b["exit"] for b in present if b.get("exit")), None)
    sampled = [r for b in present if (r := b.get("resources")) and "samples" in r]
    if not sampled:
        return merged

    def values(key: str) -> list[float]:
        return [float(r[key]) for r in sampled if r.get(key) is not None]

    start, end = values("rss_start_mb"), values("rss_end_mb")
    cpu = values("cpu_s")
    gpu = values("gpu_mem_max_mb")
    merged["resources"] = {
        "rss_start_mb": start[0] if start else None,
        "rss_end_mb": end[-1] if end else None,
        "rss_max_mb": max(values("rss_max_mb"), default=None),
        "rss_growth_mb": round(end[-1] - start[0], 3) if start and end else None,
        "cpu_s": round(sum(cpu), 6) if cpu else None,
        "cpu_ms_per_output_token": (
            round(sum(cpu) * 1000 / output_tokens, 6) if cpu and output_tokens > 0 else None
        ),
        "samples": sum(int(r.get("samples") or 0) for r in sampled),
        "gpu_mem_max_mb": max(gpu, default=None),
        "gpu_note": sampled[0].get("gpu_note"),
    }
    return merged
