"""The planned run: which request a process sends, in what order, and when.

Everything here is decided before the clock starts and is a pure function of
the :class:`~pytest_llmperf.specs.run.RunSpec` (seeds included), so a run can
be repeated request for request and split across worker processes without
changing its meaning:

- :func:`arrival_offsets_ns`: an open loop's planned send times, cumulative
  offsets from the run's start (never "previous send + delay", so one late
  send cannot shift the ones after it);
- :func:`sample_order_for`: which workload sample the n-th request sends;
- :class:`ScheduleShare` and :func:`plan_requests`: position ``i`` of the run
  belongs to worker ``i % count``; every worker walks the same schedule and
  sample order and keeps its own positions, so the union of the shares is
  exactly the planned run;
- :func:`warm_connections`: how many connections to open before ``t0``.

Issuing the plan is :mod:`~pytest_llmperf.loadgen.issue`.
"""

from __future__ import annotations

import itertools
import random
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from pytest_llmperf.loadgen.sample_order import SampleOrder
from pytest_llmperf.specs.load import LoadSpec
from pytest_llmperf.specs.run import RunSpec

__all__ = [
    "WARM_CONNECTIONS_MAX",
    "PlannedRequest",
    "ScheduleShare",
    "arrival_offsets_ns",
    "plan_requests",
    "sample_order_for",
    "warm_connections",
]

WARM_CONNECTIONS_MAX = 256  # connections opened before the clock starts


@dataclass(frozen=True)
class ScheduleShare:
    """The part of the planned schedule one process issues.

    Position ``i`` of the run (warm-up included) belongs to worker
    ``i % count``; every worker walks the same seeded schedule and sample
    order, so the union of the shares is exactly the planned run. ``t0_ns``
    is the common start on the system-wide monotonic clock.
    """

    index: int = 0
    count: int = 1
    t0_ns: int | None = None
    concurrency: int | None = None  # this worker's share of a closed loop's slots


@dataclass(frozen=True, slots=True)
class PlannedRequest:
    """One request of the plan: its run position, sample, planned offset (open loop only)."""

    position: int
    sample_index: int
    offset_ns: int | None
    tracked: bool


def arrival_offsets_ns(spec: LoadSpec) -> Iterator[int]:
    """Planned send offsets from the run start, cumulative and without end.

    The first request is due at 0. Poisson gaps are exponential with mean
    1/rate from ``random.Random(seed)``; constant gaps are exactly 1/rate,
    computed as ``i / rate`` rather than summed so rounding never drifts.
    """
    if spec.rate is None:
        raise ValueError(f"{spec.pattern} has no arrival schedule")
    if spec.pattern == "constant":
        i = 0
        while True:
            yield round(i * 1e9 / spec.rate)
            i += 1
    rng = random.Random(spec.seed)
    offset = 0.0
    while True:
        yield round(offset * 1e9)
        offset += rng.expovariate(spec.rate)


def sample_order_for(spec: RunSpec) -> SampleOrder:
    """The order ``spec``'s run walks its workload's samples in (warm-up included)."""
    return SampleOrder.for_workload(
        spec.load.sample_order,
        spec.load.seed,
        spec.workload.size,
        pool=(spec.requests or 0) + spec.warmup or None,
    )


def plan_requests(spec: RunSpec, share: ScheduleShare) -> Iterator[PlannedRequest]:
    """This process's share of the planned requests, in order.

    Walks every position of the run (so each worker sees the same schedule
    and sample order) and yields those of its share. An open loop with a
    ``duration`` ends at the first tracked request planned past it; a closed
    loop's duration is measured on the clock while issuing.
    """
    warmup = spec.warmup
    total = warmup + spec.requests if spec.requests else None
    positions: Iterable[int] = range(total) if total is not None else itertools.count()
    order = iter(sample_order_for(spec))
    open_loop = spec.load.open_loop
    offsets: Iterator[int | None] = (
        arrival_offsets_ns(spec.load) if open_loop else itertools.repeat(None)
    )
    duration_ns = spec.duration * 1e9 if spec.duration is not None else None
    perf_start: int | None = None
    for position in positions:
        index = next(order)
        offset = next(offsets)
        tracked = position >= warmup
        if open_loop and duration_ns is not None and tracked:
            assert offset is not None
            if perf_start is None:
                perf_start = offset
            if offset - perf_start >= duration_ns:
                return
        if position % share.count == share.index:
            yield PlannedRequest(position, index, offset, tracked)


def warm_connections(spec: RunSpec, concurrency: int) -> int:
    """Connections to open before the clock starts: ~50 ms of arrivals for an open loop.

    An open loop counts latency from the plan, so a connect (measured: 15-25 ms
    for a burst of 32 on a 2-core machine) that a warm client would not have
    paid lands in schedule_lag and TTFT as if the server had been slow. A
    closed loop counts from ``t_send``, the socket write, which comes after
    the connect: one connection (name resolution, TLS set-up) is enough.
    """
    if spec.load.open_loop and spec.load.rate:
        return max(1, min(WARM_CONNECTIONS_MAX, int(spec.load.rate * 0.05)))
    return 1
