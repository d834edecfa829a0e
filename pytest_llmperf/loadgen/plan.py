"""The planned run: which request a process sends, in what order, and when.

Everything here is decided before the clock starts and is a pure function of
the :class:`~pytest_llmperf.specs.run.RunSpec` (seeds included), so a run can
be repeated request for request and split across worker processes without
changing its meaning:

- the open loop's planned send times (:mod:`~pytest_llmperf.loadgen.arrivals`
  for rates, stages and ramps; the file's own timestamps for a trace),
  cumulative offsets from the run's start (never "previous send + delay", so
  one late send cannot shift the ones after it), and the stage each falls in;
- which requests are abandoned mid-stream (``cancel=``), drawn per run
  position from the load's seed;
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
from typing import Any

from pytest_llmperf.client.cancel import CancelAt
from pytest_llmperf.loadgen.arrivals import StagedSchedule, arrival_offsets_ns
from pytest_llmperf.loadgen.sample_order import SampleOrder
from pytest_llmperf.specs.load import SampleOrderMode
from pytest_llmperf.specs.run import RunSpec

__all__ = [
    "WARM_CONNECTIONS_MAX",
    "PlannedRequest",
    "ScheduleShare",
    "cancel_points",
    "open_loop_offsets",
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
    stage_concurrency: tuple[int, ...] | None = None  # ... per stage, for a staged closed loop


@dataclass(frozen=True, slots=True)
class PlannedRequest:
    """One request of the plan: its run position, sample, planned offset (open loop only),
    the stage it was planned in (-1: no stages, or warm-up) and when to abandon it (if so)."""

    position: int
    sample_index: int
    offset_ns: int | None
    tracked: bool
    stage: int = -1
    cancel: CancelAt | None = None


def open_loop_offsets(spec: RunSpec) -> Iterator[tuple[int, int]]:
    """``(offset_ns, stage)`` of every planned open-loop request, warm-up included."""
    load = spec.load
    if load.trace is not None:
        trace: Any = getattr(spec.workload, "trace", None)
        if trace is None:
            raise ValueError("a trace load needs the trace workload")
        return ((offset, -1) for offset in trace.offsets_ns(load.trace.time_scale))
    if load.stages:
        return StagedSchedule(load, spec.warmup).arrivals()
    return ((offset, -1) for offset in arrival_offsets_ns(load))


def cancel_points(spec: RunSpec) -> Iterator[CancelAt | None]:
    """Per run position: where that request is abandoned, or None (most requests)."""
    cancel = spec.load.cancel
    if cancel is None:
        return itertools.repeat(None)
    at = CancelAt(after_tokens=cancel.after_tokens, after_ms=cancel.after_ms)
    rng = random.Random(f"{spec.load.seed}:cancel")
    share = cancel.share
    return (at if rng.random() < share else None for _ in itertools.count())


def sample_order_for(spec: RunSpec) -> SampleOrder:
    """The order ``spec``'s run walks its workload's samples in (warm-up included).

    A trace is replayed row by row: its samples go in the file's order.
    """
    if spec.load.trace is not None:
        return SampleOrder.for_workload(
            SampleOrderMode.SEQUENTIAL, spec.load.seed, spec.workload.size
        )
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
    ``duration`` ends at the first tracked request planned past it, a trace
    or staged schedule also where it ends; a closed loop's duration is
    measured on the clock while issuing.
    """
    warmup = spec.warmup
    total = warmup + spec.requests if spec.requests else None
    positions: Iterable[int] = range(total) if total is not None else itertools.count()
    order = iter(sample_order_for(spec))
    open_loop = spec.load.open_loop
    offsets: Iterator[tuple[int | None, int]] = (
        open_loop_offsets(spec) if open_loop else itertools.repeat((None, -1))
    )
    cancels = cancel_points(spec)
    duration_ns = spec.duration * 1e9 if spec.duration is not None else None
    perf_start: int | None = None
    for position in positions:
        planned = next(offsets, None)
        if planned is None:  # a trace's last row, a staged schedule's end
            return
        offset, stage = planned
        index = next(order)
        cancel = next(cancels)
        tracked = position >= warmup
        if open_loop and duration_ns is not None and tracked:
            assert offset is not None
            if perf_start is None:
                perf_start = offset
            if offset - perf_start >= duration_ns:
                return
        if position % share.count == share.index:
            yield PlannedRequest(position, index, offset, tracked, stage, cancel)


def warm_connections(spec: RunSpec, concurrency: int) -> int:
    """Connections to open before the clock starts: ~50 ms of arrivals for an open loop.

    An open loop counts latency from the plan, so a connect (measured: 15-25 ms
    for a burst of 32 on a 2-core machine) that a warm client would not have
    paid lands in schedule_lag and TTFT as if the server had been slow. A
    closed loop counts from ``t_send``, the socket write, which comes after
    the connect: one connection (name resolution, TLS set-up) is enough.
    """
    load = spec.load
    rate = load.peak_rate
    if load.trace is not None:
        trace: Any = getattr(spec.workload, "trace", None)
        span = getattr(trace, "span_s", 0.0) * load.trace.time_scale
        rate = spec.workload.size / span if span and spec.workload.size else None
    if load.open_loop and rate:
        want = max(1, min(WARM_CONNECTIONS_MAX, int(rate * 0.05)))
        return min(want, load.max_concurrency) if load.max_concurrency else want
    return 1
