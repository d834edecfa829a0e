"""Open-loop arrival schedules: when each request is planned, as offsets from the run's start.

Every schedule is cumulative (request ``n`` is due at an offset computed from
the start, never "previous send + delay"), so one late send cannot shift the
ones after it.

- A single ``rate``: constant gaps are exactly ``1/rate`` (computed as ``i /
  rate``, so rounding never drifts); Poisson gaps are exponential with mean
  ``1/rate``; with ``burstiness=k`` gaps are gamma-distributed with shape
  ``k`` and the same mean (k = 1 is Poisson; k < 1 clusters requests into
  bursts separated by lulls, as vLLM's ``--burstiness`` does).
- Stages and ramps: the rate is a function of time, ``r(t)``. Arrivals are
  drawn as a unit-rate process in *operational time* ``Λ(t) = ∫₀ᵗ r`` and
  mapped back through ``Λ⁻¹`` (the time-change theorem): gaps of 1 for
  ``constant``, exponential(1) for Poisson, gamma(k, 1/k) with burstiness,
  so a stage at 40 req/s gets four times the arrivals of one at 10, and a
  linear or exponential ramp sends at its instantaneous rate. A request
  belongs to the stage its planned time falls in.

Warm-up requests of a staged run go first, at the first stage's starting
rate, from a stream of their own; the stages begin one gap after them
(``StagedSchedule.origin_ns``).
"""

from __future__ import annotations

import bisect
import math
import random
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

from pytest_llmperf.specs.load import LoadPattern, LoadSpec
from pytest_llmperf.specs.stages import RampShape, Stage

__all__ = ["StagedSchedule", "arrival_offsets_ns", "stage_windows_s", "unit_gaps"]


def unit_gaps(
    pattern: LoadPattern, burstiness: float | None, rng: random.Random
) -> Callable[[], float]:
    """A source of inter-arrival gaps with mean 1 (scale by ``1/rate`` for seconds)."""
    if burstiness is not None:
        shape = burstiness
        return lambda: rng.gammavariate(shape, 1.0 / shape)
    if pattern is LoadPattern.CONSTANT:
        return lambda: 1.0
    return lambda: rng.expovariate(1.0)


def arrival_offsets_ns(spec: LoadSpec) -> Iterator[int]:
    """Planned send offsets (ns) of a single-rate open loop, cumulative and without end.

    The first request is due at 0. Without ``burstiness`` the draws are those
    the project has always made (constant: ``i / rate``; Poisson:
    ``random.Random(seed).expovariate(rate)``), so seeded schedules repeat
    across versions.
    """
    rate = spec.rate
    if rate is None:
        raise ValueError(f"{spec.pattern} has no single-rate arrival schedule")
    if spec.burstiness is None and spec.pattern is LoadPattern.CONSTANT:
        i = 0
        while True:
            yield round(i * 1e9 / rate)
            i += 1
    rng = random.Random(spec.seed)
    if spec.burstiness is not None:
        shape, scale = spec.burstiness, 1.0 / (spec.burstiness * rate)
        offset = 0.0
        while True:
            yield round(offset * 1e9)
            offset += rng.gammavariate(shape, scale)
    offset = 0.0
    while True:
        yield round(offset * 1e9)
        offset += rng.expovariate(rate)


@dataclass(frozen=True)
class _Segment:
    """One stage on the clock: its start, length, and how many arrivals (Λ mass) it holds."""

    start_s: float
    stage: Stage
    mass_before: float
    mass: float

    def time_at(self, u: float) -> float:
        """Seconds into the segment at which its cumulative rate reaches ``u`` (Λ⁻¹)."""
        st = self.stage
        r0 = st.rate or 0.0
        r1 = st.end_rate or 0.0
        d = st.duration_s
        if u <= 0:
            return 0.0
        if r0 == r1:
            return u / r0
        if st.shape is RampShape.EXPONENTIAL:
            q = math.log(r1 / r0)
            return d * math.log1p(u * q / (r0 * d)) / q
        a = (r1 - r0) / d  # linear: r0 t + a t²/2 = u; the form without 1/a is stable at a ≈ 0
        return 2 * u / (r0 + math.sqrt(max(0.0, r0 * r0 + 2 * a * u)))


def _mass(stage: Stage) -> float:
    """Expected arrivals in a stage: the integral of its rate."""
    mean = stage.mean_rate or 0.0
    return mean * stage.duration_s


class StagedSchedule:
    """The schedule of a staged open loop: ``warmup`` untracked arrivals, then the stages.

    ``origin_ns`` is where the first stage starts (after the warm-up);
    ``bounds_ns[k]`` and ``bounds_ns[k + 1]`` delimit stage ``k`` on the
    run's clock; :meth:`arrivals` yields ``(offset_ns, stage)`` pairs, stage
    -1 for warm-up, and ends with the last stage.
    """

    def __init__(self, spec: LoadSpec, warmup: int = 0) -> None:
        if not spec.stages or not spec.open_loop:
            raise ValueError("a staged schedule needs an open-loop load with stages")
        self.spec = spec
        self.warmup = warmup
        segments: list[_Segment] = []
        start = mass = 0.0
        for stage in spec.stages:
            m = _mass(stage)
            segments.append(_Segment(start, stage, mass, m))
            start += stage.duration_s
            mass += m
        self._segments = segments
        self._total_mass = mass
        self._mass_starts = [s.mass_before for s in segments]
        first = spec.stages[0]
        self._warmup_rate = first.rate or first.mean_rate or 1.0
        warm_rng = random.Random(f"{spec.seed}:warmup")
        warm_gap = unit_gaps(spec.pattern, spec.burstiness, warm_rng)
        self._warmup_units = [warm_gap() for _ in range(warmup)]
        origin_s = sum(self._warmup_units) / self._warmup_rate
        self.origin_ns = round(origin_s * 1e9)
        self.bounds_ns = [self.origin_ns + round(s.start_s * 1e9) for s in segments]
        self.bounds_ns.append(self.origin_ns + round(start * 1e9))

    def stage_at(self, offset_ns: int) -> int:
        """The stage whose window holds ``offset_ns`` (-1 before, ``len(stages)`` after)."""
        return bisect.bisect_right(self.bounds_ns, offset_ns) - 1

    def arrivals(self) -> Iterator[tuple[int, int]]:
        offset = 0.0
        for units in self._warmup_units:
            yield round(offset * 1e9), -1
            offset += units / self._warmup_rate
        gap = unit_gaps(self.spec.pattern, self.spec.burstiness, random.Random(self.spec.seed))
        origin = self.origin_ns
        u = 0.0
        segments, starts = self._segments, self._mass_starts
        while u < self._total_mass:
            k = bisect.bisect_right(starts, u) - 1
            while k + 1 < len(segments) and segments[k].mass <= u - starts[k]:
                k += 1  # skip stages that hold no arrivals (rate 0)
            seg = segments[k]
            t = seg.start_s + seg.time_at(u - seg.mass_before)
            yield origin + round(t * 1e9), k
            u += gap()

    def planned_counts(self) -> list[int]:
        """How many tracked arrivals the drawn schedule puts in each stage."""
        counts = [0] * len(self._segments)
        for _, stage in self.arrivals():
            if stage >= 0:
                counts[stage] += 1
        return counts


def stage_windows_s(stages: Sequence[Stage]) -> list[tuple[float, float]]:
    """Each stage's ``(start, end)`` in seconds from the first stage's start."""
    out: list[tuple[float, float]] = []
    start = 0.0
    for stage in stages:
        out.append((start, start + stage.duration_s))
        start += stage.duration_s
    return out
