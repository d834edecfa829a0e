"""SIGTERM (a CI job's timeout, ``docker stop``, ``kill``) handled like Ctrl-C.

By default SIGTERM ends Python at once: no drain, no partial report, and the
measurements of a long run are lost exactly when a job overran its budget and
someone needs to see why. While a session runs, :func:`terminate_as_interrupt`
makes SIGTERM do what Ctrl-C does (the load generator stops issuing, drains
briefly, the session writes its reports marked interrupted); a second SIGTERM
is a second Ctrl-C (stop draining now). A SIGTERM handler somebody else
installed is left alone.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable
from types import FrameType

__all__ = ["terminate_as_interrupt"]


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
