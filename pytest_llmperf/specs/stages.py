"""Load stages and ramps as a test declares them: ``llm_load(..., stages=[...])`` or ``ramp={...}``.

A staged run changes its load level on the clock, as production traffic
does through a day: ``stages=[{"rate": 10, "duration": 60}, {"rate": 40,
"duration": 60}]`` for an open loop, ``{"concurrency": 4, "duration": 30}``
for a closed one. A ramp, ``ramp={"from": 1, "to": 50, "duration": 120,
"shape": "linear"|"exponential", "steps": 10}``, changes the level
continuously (open loop: the arrival rate itself follows the curve) and is
reported as ``steps`` equal windows, so every window is a stage with results
of its own. Each stage may carry SLOs of its own (``"slo": "ttft.p99 <
300ms"`` or a list), judged on that stage only, beside the test's SLOs that
every stage must meet.

This module parses and validates, at collection; the schedule is drawn by
:mod:`pytest_llmperf.loadgen.plan.arrivals` and a closed loop's slots follow the
stages in :mod:`pytest_llmperf.loadgen.issue.closed_loop`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from pytest_llmperf.errors import LlmPerfUsageError
from pytest_llmperf.specs.slo import Slo, parse_slo

__all__ = ["DEFAULT_RAMP_STEPS", "MAX_STAGES", "RampShape", "Stage", "parse_ramp", "parse_stages"]

DEFAULT_RAMP_STEPS = 10
MAX_STAGES = 1000


class RampShape(StrEnum):
    """How a ramp's level moves from ``from`` to ``to`` (a ``StrEnum``: plain names)."""

    LINEAR = "linear"  # level(t) = from + (to - from) * t / duration
    EXPONENTIAL = "exponential"  # level(t) = from * (to / from) ** (t / duration)


@dataclass(frozen=True)
class Stage:
    """One stage: ``duration_s`` seconds at a rate (open loop) or a concurrency (closed loop).

    An open-loop stage's rate moves from ``rate`` to ``rate_end`` along
    ``shape`` (equal for a flat stage). ``slos`` are judged on this stage only.
    """

    duration_s: float
    rate: float | None = None
    rate_end: float | None = None
    concurrency: int | None = None
    shape: RampShape = RampShape.LINEAR
    slos: tuple[Slo, ...] = ()

    @property
    def end_rate(self) -> float | None:
        return self.rate if self.rate_end is None else self.rate_end

    @property
    def mean_rate(self) -> float | None:
        """Planned requests per second averaged over the stage."""
        r0, r1 = self.rate, self.end_rate
        if r0 is None or r1 is None:
            return None
        if r0 == r1:
            return r0
        if self.shape is RampShape.EXPONENTIAL:
            return (r1 - r0) / math.log(r1 / r0)
        return (r0 + r1) / 2

    def describe(self) -> dict[str, Any]:
        out: dict[str, Any] = {"duration_s": self.duration_s}
        if self.concurrency is not None:
            out["concurrency"] = self.concurrency
        else:
            out["rate"] = self.rate
            if self.rate_end is not None and self.rate_end != self.rate:
                out["rate_end"] = self.rate_end
                out["shape"] = self.shape.value
        if self.slos:
            out["slo"] = [slo.expr for slo in self.slos]
        return out


def _number(
    where: str, key: str, value: Any, *, minimum: float = 0.0, strict: bool = True
) -> float:
    ok = not isinstance(value, bool) and isinstance(value, (int, float)) and math.isfinite(value)
    if not ok or (value <= minimum if strict else value < minimum):
        bound = f"> {minimum:g}" if strict else f">= {minimum:g}"
        raise LlmPerfUsageError(f"{where}: {key} must be a number {bound}, got {value!r}")
    return float(value)


def _count(where: str, key: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise LlmPerfUsageError(f"{where}: {key} must be an integer >= 1, got {value!r}")
    return value


def _slos(where: str, value: Any) -> tuple[Slo, ...]:
    texts = [value] if isinstance(value, str) else value
    if not isinstance(texts, (list, tuple)) or not all(isinstance(t, str) for t in texts):
        raise LlmPerfUsageError(
            f"{where}: slo must be an SLO string or a list of them, got {value!r}"
        )
    out: list[Slo] = []
    for text in texts:
        try:
            slo = parse_slo(text)
        except LlmPerfUsageError as exc:
            raise LlmPerfUsageError(f"{where}: {exc.message}") from None
        if slo.in_fleet_scope:  # a stage keeps no replica breakdown nor pages of its own
            raise LlmPerfUsageError(
                f"{where}: slo {text!r} is judged on whole runs (replica.*, fleet.*, "
                "<pool>.*), not on one stage: give it to llm_slo(...)"
            )
        out.append(slo)
    return tuple(out)


def parse_stages(pattern: str, stages: Any, *, open_loop: bool) -> tuple[Stage, ...]:
    """Check ``llm_load(pattern, stages=[...])``; errors name the stage, key and value."""
    name = f"llm_load({pattern!r}) stages"
    if not isinstance(stages, Sequence) or isinstance(stages, (str, bytes)) or not stages:
        raise LlmPerfUsageError(f"{name} must be a non-empty list of dicts, got {stages!r}")
    if len(stages) > MAX_STAGES:
        raise LlmPerfUsageError(f"{name}: at most {MAX_STAGES} stages, got {len(stages)}")
    level = "rate" if open_loop else "concurrency"
    out: list[Stage] = []
    for i, stage in enumerate(stages):
        where = f"{name}[{i}]"
        if not isinstance(stage, Mapping):
            raise LlmPerfUsageError(
                f"{where} must be a dict like {{{level!r}: ..., 'duration': seconds}}, "
                f"got {stage!r}"
            )
        unknown = sorted(set(stage) - {level, "duration", "slo"})
        if unknown:
            raise LlmPerfUsageError(
                f"{where} does not take {', '.join(map(repr, unknown))} "
                f"(takes {level!r}, 'duration', 'slo')"
            )
        if level not in stage or "duration" not in stage:
            raise LlmPerfUsageError(f"{where} needs {level!r} and 'duration', got {dict(stage)!r}")
        duration = _number(where, "duration", stage["duration"])
        slos = _slos(where, stage["slo"]) if "slo" in stage else ()
        if open_loop:
            out.append(Stage(duration, rate=_number(where, "rate", stage["rate"]), slos=slos))
        else:
            c = _count(where, "concurrency", stage["concurrency"])
            out.append(Stage(duration, concurrency=c, slos=slos))
    return tuple(out)


def parse_ramp(pattern: str, ramp: Any, *, open_loop: bool) -> tuple[Stage, ...]:
    """Check ``llm_load(pattern, ramp={...})`` and cut it into its reporting windows."""
    where = f"llm_load({pattern!r}) ramp"
    if not isinstance(ramp, Mapping):
        raise LlmPerfUsageError(
            f"{where} must be a dict like {{'from': 1, 'to': 50, 'duration': 120}}, got {ramp!r}"
        )
    unknown = sorted(set(ramp) - {"from", "to", "duration", "shape", "steps", "slo"})
    if unknown:
        raise LlmPerfUsageError(
            f"{where} does not take {', '.join(map(repr, unknown))} "
            "(takes 'from', 'to', 'duration', 'shape', 'steps', 'slo')"
        )
    missing = [k for k in ("from", "to", "duration") if k not in ramp]
    if missing:
        raise LlmPerfUsageError(
            f"{where} needs {', '.join(map(repr, missing))}, got {dict(ramp)!r}"
        )
    shape_name = ramp.get("shape", "linear")
    if shape_name not in tuple(RampShape):
        raise LlmPerfUsageError(
            f"{where}: unknown shape {shape_name!r}; use one of {', '.join(RampShape)}"
        )
    shape = RampShape(shape_name)
    duration = _number(where, "duration", ramp["duration"])
    slos = _slos(where, ramp["slo"]) if "slo" in ramp else ()
    if open_loop:
        # linear may start from 0 (k6's ramping-arrival-rate does); exponential may not
        strict = shape is RampShape.EXPONENTIAL
        start = _number(where, "from", ramp["from"], strict=strict)
        end = _number(where, "to", ramp["to"], strict=strict)
        if start == end == 0:
            raise LlmPerfUsageError(f"{where}: from and to are both 0: no request would be sent")
    else:
        start, end = _count(where, "from", ramp["from"]), _count(where, "to", ramp["to"])
    steps = _count(where, "steps", ramp.get("steps", DEFAULT_RAMP_STEPS))
    if steps > MAX_STAGES:
        raise LlmPerfUsageError(f"{where}: steps must be <= {MAX_STAGES}, got {steps}")

    def level(k: float) -> float:  # the ramp's level at the start of window k (k = steps: end)
        if shape is RampShape.EXPONENTIAL:
            return float(start * (end / start) ** (k / steps))
        return start + (end - start) * k / steps

    window = duration / steps
    if open_loop:
        return tuple(
            Stage(window, rate=level(k), rate_end=level(k + 1), shape=shape, slos=slos)
            for k in range(steps)
        )
    # a closed loop holds whole requests in flight: each window at the level of its middle
    return tuple(
        Stage(window, concurrency=max(1, round(level(k + 0.5))), slos=slos) for k in range(steps)
    )
