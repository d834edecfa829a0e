"""SIGTERM (a CI job's timeout, ``docker stop``, ``kill``) handled like Ctrl-C.

By default SIGTERM ends Python at once: no drain, no partial report, and the
measurements of a long run are lost exactly when a job overran its budget and
someone needs to see why. While a session runs, :func:`terminate_as_interrupt`
makes SIGTERM do what Ctrl-C does (the load generator stops issuing, drains
briefly, the session writes its reports marked interrupted); a second SIGTERM
is a second Ctrl-C (stop draining now). A SIGTERM handler somebody else
installed is left alone.

:class:`InterruptHooks` records what pytest says of a session cut short: an
interrupt (the reports are marked interrupted), pytest's own stop (only why it
stopped is kept), an xdist worker lost mid-test.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable
from types import FrameType
from typing import Any

import pytest

from pytest_llmperf.plugin.state import SessionState
from pytest_llmperf.plugin.stops import stopped_mid_session

__all__ = ["InterruptHooks", "terminate_as_interrupt"]


def _forward_to_sigint(signum: int, frame: FrameType | None) -> None:
    handler = signal.getsignal(signal.SIGINT)
    if callable(handler):
        handler(signal.SIGINT, frame)  # the loop's or the load generator's Ctrl-C handler
    else:  # SIGINT ignored (a background job) or default: still stop, as Ctrl-C would
        raise KeyboardInterrupt


def terminate_as_interrupt() -> Callable[[], None]:
    """Install the SIGTERM forwarder; returns a function that puts the old handler back."""
    if threading.current_thread() is not threading.main_thread():
        return lambda: None
    previous = signal.getsignal(signal.SIGTERM)
    if previous not in (signal.SIG_DFL, None):
        return lambda: None
    try:
        signal.signal(signal.SIGTERM, _forward_to_sigint)
    except (ValueError, OSError):  # pragma: no cover - not the main interpreter
        return lambda: None

    def restore() -> None:
        if signal.getsignal(signal.SIGTERM) is _forward_to_sigint:
            signal.signal(signal.SIGTERM, previous)

    return restore


class InterruptHooks:
    """A session cut short: interrupted, stopped by pytest, or a worker lost."""

    def __init__(self, state: SessionState) -> None:
        self.state = state

    def pytest_keyboard_interrupt(self, excinfo: pytest.ExceptionInfo[BaseException]) -> None:
        """Ctrl-C, SIGTERM (:func:`terminate_as_interrupt`) or a KeyboardInterrupt in a test:
        the session is interrupted. pytest calls this hook too when it stops the session
        itself (``Session.Interrupted``: errors during collection, a plugin's stop) or on
        ``pytest.exit`` (a usage error found mid-session): nobody interrupted the runs, so
        the session is not marked interrupted, and only why it stopped is kept."""
        error = excinfo.value
        # (xdist ends a session that a worker stopped, its server gone, with an interrupt)
        stopped = isinstance(error, pytest.Session.Interrupted | pytest.exit.Exception)
        if stopped or stopped_mid_session(self.state):
            self.state.stopped = _stop_reason(error)
        else:
            self.state.data.interrupted = True

    @pytest.hookimpl(optionalhook=True)
    def pytest_handlecrashitem(self, crashitem: str, report: Any, sched: Any) -> None:
        """pytest-xdist: the worker running ``crashitem`` died (its test fails, xdist says
        so); the session's reports name it (JSON ``session.worker_lost``)."""
        node = getattr(report, "node", None)
        worker = getattr(getattr(node, "gateway", None), "id", None)
        self.state.worker_lost.append({"nodeid": crashitem, "worker": str(worker or "?")})


def _stop_reason(error: BaseException) -> str:
    """Why pytest stopped the session, its first line: ``1 error during collection``,
    ``stopping after 1 failures`` (xdist), a ``pytest.exit`` reason."""
    msg = getattr(error, "msg", None)  # pytest.exit's reason
    text = str(msg if msg is not None else error).strip()
    return text.splitlines()[0] if text else type(error).__name__
