"""A watched server's own words in a test's failure: its exit, and its log's last lines.

Read from the runs' report dicts (``runs[].server_process``, written by
:mod:`~pytest_llmperf.loadgen.server_watch`): a run whose server exited fails its test
whatever its SLOs, with the exit's one line ("server exited with signal 9 (SIGKILL) at
12.3 s into run0") and the log's last lines; a test whose runs had failed requests
against a managed server carries the log's tail in its failure text and its report
(the JSON test entry's ``server_log``, JUnit's ``system-err``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

__all__ = ["exit_failure", "log_block", "server_log"]


def _sides(runs: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """Each run, and after it its A/B reference's run (``run["reference"]["reference"]
    ["run"]``), whose server the gate may have started too (``--llm-reference-cmd``)."""
    out: list[Mapping[str, Any]] = []
    for run in runs:
        out.append(run)
        other = ((run.get("reference") or {}).get("reference") or {}).get("run")
        if isinstance(other, Mapping):
            out.append(other)
    return out


def _exits(runs: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    return [
        exit
        for run in _sides(runs)
        if isinstance(exit := (run.get("server_process") or {}).get("exit"), dict)
    ]


def server_log(
    runs: Sequence[Mapping[str, Any]], live_tail: Callable[[str], str | None]
) -> dict[str, str] | None:
    """The test's ``server_log`` (``{"path", "tail"}``): the log of the server that exited
    (its tail as kept at the exit), else of the managed server whose runs had failed
    requests (``live_tail(path)``: its tail now, None when unknown); None when no run of
    a managed server exited or failed a request."""
    sides = _sides(runs)
    for run in sides:
        process = run.get("server_process") or {}
        if isinstance(exit := process.get("exit"), dict):
            return {"path": str(process.get("log") or ""), "tail": str(exit.get("log_tail") or "")}
    for run in sides:
        process = run.get("server_process") or {}
        if process and (run.get("counts") or {}).get("failed"):
            path = str(process.get("log") or "")
            return {"path": path, "tail": live_tail(path) or ""}
    return None


def log_block(log: Mapping[str, str]) -> str:
    """``the server's log (PATH), last lines:`` and the lines (or that it said nothing)."""
    tail = log.get("tail") or ""
    head = f"the server's log ({log.get('path') or 'no file'}), last lines:"
    return f"{head}\n{tail.rstrip()}" if tail.strip() else f"{head} (empty)"


def exit_failure(runs: Sequence[Mapping[str, Any]], log: Mapping[str, str] | None) -> str:
    """The failure of a test whose server exited during a run: one line per exit, then the
    log's last lines; ``""`` when no run's server exited."""
    exits = _exits(runs)
    if not exits:
        return ""
    lines = [str(e.get("message") or "server exited") for e in exits]
    return "\n".join(lines) + (f"\n{log_block(log)}" if log is not None else "")
