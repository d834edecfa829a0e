"""Live progress as text: one status line that fits a terminal, or a plain line for a CI log.

A :class:`~pytest_llmperf.results.progress.ProgressSnapshot` becomes

- :func:`status_line`: at most ``width - 1`` columns (the last column would
  wrap on some terminals, and a wrapped line cannot be rewritten with a
  carriage return); the test's name is shortened first (its tail is kept),
  then the least useful fields go;
- :func:`plain_line`: everything, for logs, always with ``req/s`` (or, for a
  run issued by worker processes, a word on why there is none).

Example (80 columns)::

    test_chat.py::test_poisson  measure 212/500  24.9 req/s  9 in flight  0 err  8s ETA 11s
"""

from __future__ import annotations

from pytest_llmperf.results.progress import Phase, ProgressSnapshot

__all__ = ["format_seconds", "plain_line", "status_line"]

_PREFIX = "llmperf "


def format_seconds(seconds: float) -> str:
    """``7s``, ``3m05s``, ``1h02m``: short enough for a status line, exact enough to plan by."""
    s = max(0, round(seconds))
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    return f"{s // 3600}h{s % 3600 // 60:02d}m"


def _run_name(test: str, label: str) -> str:
    """The test's name, and the run's label unless it is a plain ``runN`` (one run: noise)."""
    plain = label.startswith("run") and label[3:].isdigit()
    if not label or plain:
        return test
    return f"{test} [{label}]" if test else f"[{label}]"


def _where(snap: ProgressSnapshot) -> str:
    """The phase (and stage) with its counts: ``measure 212/500``, ``stage 2/3 40``."""
    if snap.phase is Phase.REMOTE:
        return f"running on {snap.workers} worker{'s' if snap.workers != 1 else ''}"
    if snap.phase is Phase.STARTING:
        return "starting"
    word = str(snap.phase)
    if snap.stages and snap.phase is Phase.MEASURE and snap.stage:
        word = f"stage {snap.stage}/{snap.stages}"
    count = f"{snap.done}/{snap.planned}" if snap.planned is not None else f"{snap.done} done"
    return f"{word} {count}"


def _rate(snap: ProgressSnapshot) -> str:
    rate = snap.rate or 0.0
    return f"{rate:.1f} req/s" if rate < 1000 else f"{rate:.0f} req/s"


def _output_fields(snap: ProgressSnapshot) -> list[str]:
    """Completed requests whose output is no good, beside the errors, once there are
    some: ``3 invalid`` (failed their schema or tool check), ``2 blank`` (no visible text)."""
    return [
        *([f"{snap.invalid} invalid"] if snap.invalid else []),
        *([f"{snap.blank} blank"] if snap.blank else []),
    ]


def _clock(snap: ProgressSnapshot) -> str:
    """Elapsed time, and the ETA when one is known."""
    text = format_seconds(snap.elapsed_s)
    if snap.eta_s is not None:
        text += f" ETA {format_seconds(snap.eta_s)}"
    return text


def status_line(snap: ProgressSnapshot, width: int, *, test: str = "") -> str:
    """One line of at most ``width - 1`` columns for a terminal's updating status.

    The name shrinks first: the node id, the test's name without its file, a
    procedure's run label alone (``[sweep rate=8]``), the tail of the name;
    then, if it still does not fit, the least useful fields (in flight,
    errors, invalid outputs, blank replies, the clock) go one by one; invalid outputs and
    blank replies show once there are some.
    """
    limit = max(20, width - 1)
    fields = [_where(snap)]
    if snap.phase is not Phase.REMOTE:
        fields += [_rate(snap), f"{snap.in_flight} in flight", f"{snap.errors} err"]
        fields += _output_fields(snap)
    fields.append(_clock(snap))
    optional = fields[2:] if snap.phase is not Phase.REMOTE else []
    while True:
        body = "  ".join(fields)
        line = _named(body, test, snap.label, limit)
        if line is not None or not optional:
            return (line or f"{_PREFIX}{body}")[:limit]
        fields.remove(optional.pop(0))


def _named(body: str, test: str, label: str, limit: int) -> str | None:
    """``body`` after the longest form of the test's name that fits, or None."""
    short = _run_name(test.rpartition("::")[2], label)
    alone = _run_name("", label)
    for name in (_run_name(test, label), short, *([alone] if alone else [])):
        for prefix in (_PREFIX, ""):
            line = f"{prefix}{name}  {body}" if name else f"{prefix}{body}"
            if len(line) <= limit:
                return line
    room = limit - len(body) - 2
    return f"...{short[-(room - 3) :]}  {body}" if short and room >= 12 else None


def plain_line(snap: ProgressSnapshot, *, test: str = "") -> str:
    """A line for a log (CI): every field, with ``req/s``."""
    name = _run_name(test, snap.label)
    parts = [_where(snap)]
    if snap.phase is Phase.REMOTE:
        parts.append(f"req/s at the end (issued by {snap.workers} workers)")
    else:
        parts += [_rate(snap), f"{snap.in_flight} in flight", f"{snap.errors} errors"]
        parts += _output_fields(snap)
    parts.append(f"elapsed {format_seconds(snap.elapsed_s)}")
    if snap.eta_s is not None:
        parts.append(f"ETA {format_seconds(snap.eta_s)}")
    return f"llmperf progress: {name + ': ' if name else ''}" + ", ".join(parts)
