"""Calling the extension hooks of :mod:`pytest_llmperf.hooks` so that a broken one costs no report.

pytest turns an exception escaping a hook into an INTERNALERROR; at session
end that would lose the JSON and HTML reports of a whole load-test session
because of a bug in somebody's ``conftest.py``. So the plugin calls the
hooks here, and a failure becomes:

- in ``pytest_llmperf_run_finished``: an :class:`LlmPerfHookError` raised
  into the test (the run already counts, so it stays in the reports);
- in the session hooks: a :class:`HookFailure` the plugin prints, records in
  the report (``session.hook_errors``) and turns into a failed exit status,
  while the reports are written without the broken additions.

Every message names the hook, what it raised and where (the implementing
function's file and line), which pluggy's own traceback leaves to the reader.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import CodeType, TracebackType
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pluggy
    import pytest

    from pytest_llmperf.results.run_result import RunResult

__all__ = [
    "HookFailure",
    "LlmPerfHookError",
    "call_run_finished",
    "call_session_finished",
    "call_update_json",
]

_DROPPED = "the reports were written without the plugins' additions"
RUN_FINISHED = "pytest_llmperf_run_finished"
UPDATE_JSON = "pytest_llmperf_update_json"
SESSION_FINISHED = "pytest_llmperf_session_finished"


class LlmPerfHookError(Exception):
    """A ``pytest_llmperf_*`` hook implementation raised; the message says which and where."""


@dataclass(frozen=True)
class HookFailure:
    """What a session hook's failure looks like in the report and the terminal."""

    hook: str
    error: str  # "ValueError: boom"
    where: str  # "conftest.py:12 in pytest_llmperf_update_json", or "" when unknown
    consequence: str
    what: str = "raised"  # or "left the report unwritable as JSON:"

    def to_dict(self) -> dict[str, str]:
        """The entry in the JSON report's ``session.hook_errors``."""
        return {"hook": self.hook, "error": self.error, "where": self.where}

    def message(self) -> str:
        at = f" at {self.where}" if self.where else ""
        return f"pytest-llmperf: {self.hook} {self.what} {self.error}{at}; {self.consequence}"


def call_run_finished(item: pytest.Item, result: RunResult) -> None:
    """Call ``pytest_llmperf_run_finished`` for one run of ``item`` (conftests on its path)."""
    caller = getattr(item.ihook, RUN_FINISHED)
    try:
        caller(item=item, result=result)
    except Exception as exc:
        where = _where(caller, exc, item.config.rootpath)
        error = LlmPerfHookError(
            f"{RUN_FINISHED} raised {_describe(exc)}{f' at {where}' if where else ''} "
            f"after run {result.label!r} of {item.nodeid}; the run is kept in the reports"
        )
        if result.stop_reason == "SIGINT":
            # Ctrl-C ended this run; the hook's error must not keep the session going.
            error.__cause__ = exc
            raise KeyboardInterrupt from error
        raise error from exc


def call_update_json(
    config: pytest.Config, build: Callable[[], dict[str, Any]]
) -> tuple[dict[str, Any], HookFailure | None]:
    """The report from ``build()``, as ``pytest_llmperf_update_json`` implementations left it.

    When one raises, or the additions are not JSON, the report is built
    afresh (the plugins' additions dropped, the core intact) and carries the
    failure under ``session.hook_errors`` (always present, empty when all
    went well). With no implementation nothing is checked, so a session
    without extensions pays nothing.
    """
    report = build()
    report["session"]["hook_errors"] = []
    caller = getattr(config.hook, UPDATE_JSON)
    if not caller.get_hookimpls():
        return report, None
    failure: HookFailure | None = None
    try:
        caller(config=config, report=report)
    except Exception as exc:
        failure = _failure(UPDATE_JSON, exc, _where(caller, exc, config.rootpath), _DROPPED)
    else:
        try:
            json.dumps(report, allow_nan=False)
        except (TypeError, ValueError) as exc:
            unwritable = "left the report unwritable as JSON:"
            failure = HookFailure(UPDATE_JSON, _describe(exc), "", _DROPPED, unwritable)
    if failure is None:
        return report, None
    report = build()
    report["session"]["hook_errors"] = [failure.to_dict()]
    return report, failure


def call_session_finished(session: pytest.Session, report: dict[str, Any]) -> HookFailure | None:
    """Call ``pytest_llmperf_session_finished``; its failure, if any, for the plugin to show."""
    config = session.config
    caller = getattr(config.hook, SESSION_FINISHED)
    try:
        caller(session=session, report=report)
    except Exception as exc:
        where = _where(caller, exc, config.rootpath)
        return _failure(SESSION_FINISHED, exc, where, "the reports were written before it")
    return None


def _failure(hook: str, exc: BaseException, where: str, consequence: str) -> HookFailure:
    return HookFailure(hook, _describe(exc), where, consequence)


def _describe(exc: BaseException) -> str:
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def _where(caller: pluggy.HookCaller, exc: BaseException, root: Path) -> str:
    """``file:line in function`` of the hook implementation that raised (its last frame)."""
    codes: set[CodeType] = set()
    for impl in caller.get_hookimpls():
        code = getattr(impl.function, "__code__", None)
        if code is not None:
            codes.add(code)
    found: tuple[CodeType, int] | None = None
    tb: TracebackType | None = exc.__traceback__
    while tb is not None:
        if tb.tb_frame.f_code in codes:
            found = (tb.tb_frame.f_code, tb.tb_lineno)
        tb = tb.tb_next
    if found is None:
        return ""
    code, line = found
    path = Path(code.co_filename)
    try:
        shown = str(path.relative_to(root))
    except ValueError:
        shown = str(path)
    return f"{shown}:{line} in {code.co_name}"
