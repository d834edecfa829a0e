"""The steady-state window a test declares: ``llm_load(..., steady="auto" | {...})``.

A run that ramps up (``ramp=``, rising ``stages=``, a closed loop's slots filling) and
drains at its end (the last requests finishing with nothing sent after them) measures
a server that was not at its load level the whole time. Its throughput over the whole
run is then an average over the ramp, the level and the drain: a 30 s ramp halves the
figure of a one-minute run. ``steady=`` names the part of the run that was at the level
(docs/measurement.md, "Steady-state window"):

- ``"auto"``: from the first instant the run is at its level (a closed loop: the first
  moment its ``concurrency`` requests are in flight; an open loop: the first instant its
  planned rate reaches its highest level) to the last request issued;
- ``{"skip_s": a, "until_s": b}``: from ``a`` seconds after the run's first tracked
  send to ``b`` seconds after it (``until_s`` left out: to the last request issued);
- either with ``"latency": True`` (a dict: ``{"latency": True}`` alone is ``"auto"``):
  latency figures and verdicts are over the window too (by default they are over every
  request: only the throughput figures change).

Requests *started* (``t_sched``) outside the window stay in the counts, the time plot
and (by default) the latency figures; they are out of ``request_throughput``,
``output_throughput``, ``input_throughput`` and ``goodput``. The window itself is the
results' (:mod:`pytest_llmperf.results.steady`); this module only parses.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from pytest_llmperf.errors import LlmPerfUsageError

__all__ = ["STEADY_KEYS", "SteadyMode", "SteadySpec"]

STEADY_KEYS = ("skip_s", "until_s", "latency")


class SteadyMode(StrEnum):
    """How the window's start is found (a ``StrEnum``: the plain names)."""

    AUTO = "auto"  # when the run reaches its level
    EXPLICIT = "explicit"  # skip_s= seconds after the run's first tracked send


@dataclass(frozen=True)
class SteadySpec:
    """A validated ``steady=``: its mode, explicit bounds (seconds from the run's first
    tracked send) and whether latency figures are windowed too."""

    mode: SteadyMode = SteadyMode.AUTO
    skip_s: float | None = None
    until_s: float | None = None
    latency: bool = False

    @classmethod
    def parse(cls, where: str, value: Any) -> SteadySpec:
        example = "'auto' or {'skip_s': 30, 'until_s': 90} (optionally with 'latency': True)"
        if value == SteadyMode.AUTO.value:
            return cls()
        if not isinstance(value, Mapping):
            raise LlmPerfUsageError(f"{where}: steady must be {example}, got {value!r}")
        unknown = sorted(set(value) - set(STEADY_KEYS))
        if unknown:
            raise LlmPerfUsageError(
                f"{where}: steady does not take {', '.join(map(repr, unknown))} "
                f"(takes {', '.join(map(repr, STEADY_KEYS))})"
            )
        latency = value.get("latency", False)
        if not isinstance(latency, bool):
            raise LlmPerfUsageError(
                f"{where}: steady latency must be True or False, got {latency!r}"
            )
        skip, until = value.get("skip_s"), value.get("until_s")
        for key, number in (("skip_s", skip), ("until_s", until)):
            if number is not None and (
                isinstance(number, bool) or not isinstance(number, (int, float)) or number < 0
            ):
                raise LlmPerfUsageError(
                    f"{where}: steady {key} must be seconds >= 0 from the run's first send, "
                    f"got {number!r}"
                )
        if skip is None and until is None:
            return cls(latency=latency)
        skip = 0.0 if skip is None else float(skip)
        if until is not None and not until > skip:
            raise LlmPerfUsageError(
                f"{where}: steady until_s must be after skip_s, got skip_s={skip!r}, "
                f"until_s={until!r}"
            )
        return cls(
            SteadyMode.EXPLICIT, skip, None if until is None else float(until), latency=latency
        )

    @property
    def skip_ns(self) -> int:
        return round((self.skip_s or 0.0) * 1e9)

    @property
    def until_ns(self) -> int | None:
        return None if self.until_s is None else round(self.until_s * 1e9)

    def describe(self) -> str | dict[str, Any]:
        """The report's ``load.steady``: ``"auto"`` or the dict as declared."""
        if self.mode is SteadyMode.AUTO and not self.latency:
            return SteadyMode.AUTO.value
        out: dict[str, Any] = {}
        if self.mode is SteadyMode.EXPLICIT:
            out["skip_s"] = self.skip_s
            if self.until_s is not None:
                out["until_s"] = self.until_s
        if self.latency:
            out["latency"] = True
        return out
