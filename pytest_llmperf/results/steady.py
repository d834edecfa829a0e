"""A run's steady-state window: which requests make its throughput figures.

``llm_load(..., steady=...)`` (:mod:`pytest_llmperf.specs.steady`) declares it; the
load generator opens it (:meth:`SteadyWindow.open_at`) at the instant the run reaches
its level (or ``skip_s`` after its first tracked send) and the run's accumulator
(:class:`~pytest_llmperf.results.accumulator.MetricsAccumulator`) hands it every
tracked record: a request *started* (``t_sched``) at or after the window's start and,
with ``until_s``, before its end is *in*; one started before is *out, ramp*; one
started at or after ``until_s``, *out, drain*. The records in make a breakdown of their
own (the accumulator's ``steady_part``), whose output tokens and completions over the
window's length are the run's ``output_throughput``, ``input_throughput`` and
``request_throughput``, and whose good share is its ``goodput``
(docs/measurement.md, "Steady-state window").

The window ends at the last request issued in it (``until_s``: that instant, when the
run went on past it), so the drain after the last send, when the requests in flight
dwindle, is in no denominator. Its start is decided by the issuing side before any
request started after it can end, so a record that ends before the window is open was
started before it: deciding at the record's end is exact.

With worker processes each share opens its own window (a closed loop's share reaches
its own slots); merged, the run's window runs from the earliest start to the latest
end. A window that never opened, or that holds no request, or no time, is *empty*:
its throughput is no number (NaN; ``None`` in the JSON) and an SLO on it is
inconclusive, never a zero that passes or fails.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum
from typing import Any

__all__ = ["STEADY_RATE_METRICS", "SteadyState", "SteadyWindow"]

# The rate metrics a steady window decides by default (latency ones: opt-in).
STEADY_RATE_METRICS: tuple[str, ...] = (
    "request_throughput",
    "output_throughput",
    "input_throughput",
    "goodput",
)


class SteadyState(StrEnum):
    """What became of a run's window (``runs[].steady.state``)."""

    OPEN = "open"  # it holds requests and time: its figures are the run's
    NEVER_OPENED = "never_opened"  # the run never reached its level (or skip_s)
    EMPTY = "empty"  # it opened, but no request started in it, or it lasted no time


class SteadyWindow:
    """One run's (or one share's) window: its bounds on the monotonic clock (ns) and how
    many tracked requests started before it, in it and after it.

    ``mode`` and ``latency`` are the declared ``steady=``'s (``"auto"`` or
    ``"explicit"``; whether latency figures are windowed too); ``until_ns`` is set with
    the start where ``until_s`` was declared.
    """

    __slots__ = ("after", "before", "inside", "last_in_ns", "latency", "mode", "start_ns",
                 "until_ns")  # fmt: skip

    def __init__(self, mode: str = "auto", *, latency: bool = False) -> None:
        self.mode = mode
        self.latency = latency
        self.start_ns: int | None = None
        self.until_ns: int | None = None
        self.last_in_ns: int | None = None  # the latest start of a request in the window
        self.before = 0  # tracked requests started before the window (the ramp)
        self.inside = 0
        self.after = 0  # ... started at or after until_s (the drain)

    # -- the issuing side ----------------------------------------------------------

    def open_at(self, start_ns: int, until_ns: int | None = None) -> None:
        """The window starts at ``start_ns`` (and ends at ``until_ns``); once only."""
        if self.start_ns is None:
            self.start_ns = start_ns
            self.until_ns = until_ns

    # -- the accumulator's side ----------------------------------------------------

    def admits(self, t_sched: int) -> bool:
        """Whether a tracked request planned at ``t_sched`` is in the window (counted)."""
        start = self.start_ns
        if start is None or t_sched < start:
            self.before += 1
            return False
        until = self.until_ns
        if until is not None and t_sched >= until:
            self.after += 1
            return False
        self.inside += 1
        last = self.last_in_ns
        if last is None or t_sched > last:
            self.last_in_ns = t_sched
        return True

    # -- reading -------------------------------------------------------------------

    @property
    def end_ns(self) -> int | None:
        """The last request issued in the window, or ``until_s`` where the run went past it."""
        if self.until_ns is not None and self.after:
            return self.until_ns
        return self.last_in_ns

    @property
    def duration_s(self) -> float:
        start, end = self.start_ns, self.end_ns
        if start is None or end is None:
            return 0.0
        return max(0, end - start) / 1e9

    @property
    def state(self) -> SteadyState:
        if self.start_ns is None:
            return SteadyState.NEVER_OPENED
        if not self.inside or self.duration_s <= 0:
            return SteadyState.EMPTY
        return SteadyState.OPEN

    def why_empty(self) -> str:
        """Why the window has no figures (for an inconclusive verdict); "" when it has."""
        state = self.state
        if state is SteadyState.NEVER_OPENED:
            if self.mode == "auto":
                return (
                    "no steady window: the run never reached its load level (its concurrency "
                    "in flight, or its highest planned rate) before it stopped issuing"
                )
            return "no steady window: the run stopped issuing before steady skip_s"
        if state is SteadyState.EMPTY:
            return (
                f"no steady window: it holds {self.inside} request(s) over "
                f"{self.duration_s:g} s (the run issued its last request as it reached its "
                "level; run longer)"
            )
        return ""

    def describe(self, origin_ns: int | None) -> dict[str, Any]:
        """The report's ``runs[].steady``: bounds as seconds from ``origin_ns`` (the run's
        first tracked send: 0 on the time plot), requests in and out, the state."""

        def offset(ns: int | None) -> float | None:
            if ns is None or origin_ns is None:
                return None
            return round((ns - origin_ns) / 1e9, 6)

        return {
            "mode": self.mode,
            "latency": self.latency,
            "state": self.state.value,
            "start_s": offset(self.start_ns),
            "end_s": offset(self.end_ns),
            "duration_s": round(self.duration_s, 6),
            "requests_in": self.inside,
            "requests_out": self.before + self.after,
            "out_ramp": self.before,
            "out_drain": self.after,
            **({"why": why} if (why := self.why_empty()) else {}),
        }

    # -- merging and states ----------------------------------------------------------

    def merge(self, other: SteadyWindow) -> None:
        """Add another share's window: earliest start, latest ends, counts summed."""
        self.latency = self.latency or other.latency
        for attr, pick in (("start_ns", min), ("until_ns", max), ("last_in_ns", max)):
            mine, theirs = getattr(self, attr), getattr(other, attr)
            if theirs is not None:
                setattr(self, attr, theirs if mine is None else pick(mine, theirs))
        self.before += other.before
        self.inside += other.inside
        self.after += other.after

    def to_state(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in self.__slots__}

    @classmethod
    def from_state(cls, state: Mapping[str, Any]) -> SteadyWindow:
        window = cls(str(state.get("mode", "auto")), latency=bool(state.get("latency")))
        for name in ("start_ns", "until_ns", "last_in_ns"):
            value = state.get(name)
            setattr(window, name, None if value is None else int(value))
        for name in ("before", "inside", "after"):
            setattr(window, name, int(state.get(name) or 0))
        return window
