"""When the client abandons a request on purpose: :class:`CancelAt`.

Production users stop reading answers (a closed tab, a "stop" button, a
timeout of their own); a load with such users frees server capacity early.
``send_request(..., cancel=CancelAt(...))`` models that: at the cancel point
it stops reading, records the request as ``cancelled`` (neither completed nor
failed) and closes the connection, so the server sees the disconnect and
can abort the generation (docs/measurement.md, "Cancelled requests").
"""

from __future__ import annotations

import math
from dataclasses import dataclass

__all__ = ["CancelAt"]


@dataclass(frozen=True, slots=True)
class CancelAt:
    """Abandon a request after ``after_tokens`` token events, or ``after_ms`` milliseconds
    after its send (``RequestRecord.t_send``), whichever comes first.

    At least one must be given. Token events are the record's ``token_events``
    (docs/measurement.md, "Token events"): the request is cancelled on the read
    that completes its ``after_tokens``-th token event, and events after it in
    that read are not counted, so a cancelled request has exactly
    ``after_tokens`` token events. A request whose stream ends (or fails)
    before its cancel point is an ordinary request.
    """

    after_tokens: int | None = None
    after_ms: float | None = None

    def __post_init__(self) -> None:
        tokens, ms = self.after_tokens, self.after_ms
        if tokens is None and ms is None:
            raise ValueError("CancelAt needs after_tokens, after_ms or both")
        if tokens is not None and (tokens.__class__ is not int or tokens < 1):
            raise ValueError(f"CancelAt.after_tokens must be an integer >= 1, got {tokens!r}")
        if ms is not None and (
            isinstance(ms, bool)
            or not isinstance(ms, int | float)
            or not math.isfinite(ms)
            or ms <= 0
        ):
            raise ValueError(f"CancelAt.after_ms must be a finite number > 0, got {ms!r}")
