"""The planned run: which request a process sends, in what order, and when.

:class:`RunPlan` is built once from a :class:`~pytest_llmperf.specs.run.RunSpec`
(and once per worker share, :meth:`RunPlan.for_share`); everything below it
(the share run, its strategies, the workers) takes the plan, never the spec. This
is the one module of ``loadgen/`` that reads a spec: the generator has it derive the
spec a run runs (:func:`effective_spec`: overrides and ``--llm-scale``;
:func:`sized_spec`: the session's tokenizer) and passes specs through unread.

Everything here is decided before the clock starts and is a pure function of
the spec (seeds included), so a run can be repeated request for request and
split across worker processes without changing its meaning:

- the open loop's planned send times (:mod:`~pytest_llmperf.loadgen.plan.arrivals`
  for rates, stages and ramps; the file's own timestamps for a trace),
  cumulative offsets from the run's start (never "previous send + delay", so
  one late send cannot shift the ones after it), and the stage each falls in;
- which requests are abandoned mid-stream (``cancel=``), drawn per run
  position from the load's seed;
- :func:`sample_order_for`: which workload sample the n-th request sends;
- :class:`ScheduleShare` and :meth:`RunPlan.planned`: position ``i`` of the run
  belongs to worker ``i % count``; every worker walks the same schedule and
  sample order and keeps its own positions, so the union of the shares is
  exactly the planned run. A worker gets the plan of its share as a value
  (:meth:`RunPlan.worker_share`, then :meth:`RunPlan.for_worker`), built before
  it starts: nothing patches a plan (the common start instant ``t0`` is no part
  of it: the share run is handed it when it issues);
- :meth:`RunPlan.warm_connections`: how many connections to open before ``t0``;
- a closed loop's slots and, staged, its slots per stage (a worker's share of them);
- the multi-turn conversations or agentic conversation trees the workload runs, if any
  (found once, before the clock), and with them the
  :class:`~pytest_llmperf.loadgen.plan.strategy.IssueStrategy` that issues the plan
  (chosen here, once).

Issuing the plan is :mod:`~pytest_llmperf.loadgen.issue.local` and its strategies
(:mod:`~pytest_llmperf.loadgen.issue.strategies`).
"""

from __future__ import annotations

import itertools
import random
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from pytest_llmperf.client.cancel import CancelAt
from pytest_llmperf.loadgen.plan.arrivals import StagedSchedule, arrival_offsets_ns
from pytest_llmperf.loadgen.plan.sample_order import SampleOrder
from pytest_llmperf.loadgen.plan.strategy import IssueStrategy, choose_strategy
from pytest_llmperf.specs.load import LoadSpec, SampleOrderMode
from pytest_llmperf.specs.run import RunSpec
from pytest_llmperf.workloads.agent_script import AgentSource, agents_of
from pytest_llmperf.workloads.base import Workload
from pytest_llmperf.workloads.conversations import ConversationSource, conversations_of
from pytest_llmperf.workloads.tokenizer import Tokenizer, bind_api, resolve_tokenizer

__all__ = [
    "WARM_CONNECTIONS_MAX",
    "IssueStrategy",
    "PlanSource",
    "PlannedRequest",
    "RunPlan",
    "ScheduleShare",
    "effective_spec",
    "sample_order_for",
    "sized_spec",
]

WARM_CONNECTIONS_MAX = 256  # connections opened before the clock starts


@dataclass(frozen=True)
class ScheduleShare:
    """The part of the planned schedule one process issues.

    Position ``i`` of the run (warm-up included) belongs to worker
    ``i % count``; every worker walks the same seeded schedule and sample
    order, so the union of the shares is exactly the planned run.
    """

    index: int = 0
    count: int = 1
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


@dataclass(frozen=True)
class RunPlan:
    """One run's plan, built once from its spec (:meth:`from_spec`) and once per share.

    Holds what the issuing side needs and nothing of the spec's parsing: the
    load pattern, the workload, the run's size (``warmup``, ``requests``,
    ``duration``), this process's ``share``, the sample order, the staged
    schedule (an open loop's stage bounds and arrivals come from one object),
    the cancel points, the conversations the workload runs (None: independent
    requests), its agentic conversation trees (``agents``; None: no agents), the
    strategy that issues it and the spec's arguments a worker rebuilds it from.
    """

    load: LoadSpec
    workload: Workload
    warmup: int
    requests: int | None
    duration: float | None
    extra_body: Mapping[str, Any]
    sample_order: SampleOrder
    schedule: StagedSchedule | None  # an open loop with stages: arrivals and stage bounds
    conversations: ConversationSource | None
    strategy: IssueStrategy  # how it is issued: chosen here, once
    worker_args: Mapping[str, Any] = field(repr=False)  # picklable: a worker's RunSpec(**args)
    describe_spec: Callable[[], dict[str, Any]] = field(repr=False)
    share: ScheduleShare = ScheduleShare()
    agents: AgentSource | None = None

    @classmethod
    def from_spec(cls, spec: RunSpec, share: ScheduleShare | None = None) -> RunPlan:
        """The plan of ``spec`` (``share``: one process's part of it)."""
        load = spec.load
        staged = bool(load.stages) and load.open_loop
        sample_order = sample_order_for(spec)
        agents = agents_of(spec.workload)
        # before the clock: a trace is scanned (an agentic workload's trees win)
        conversations = conversations_of(spec.workload) if agents is None else None
        return cls(
            load=load,
            workload=spec.workload,
            warmup=spec.warmup,
            requests=spec.requests,
            duration=spec.duration,
            extra_body=spec.extra_body,
            sample_order=sample_order,
            schedule=StagedSchedule(load, spec.warmup) if staged else None,
            conversations=conversations,
            strategy=choose_strategy(
                open_loop=load.open_loop,
                conversations=conversations is not None,
                timed_trace=load.trace is not None
                and (agents is not None or (conversations is not None and conversations.timed)),
                agents=agents is not None,
            ),
            worker_args={
                "workload_name": spec.workload_name,
                "workload_params": dict(spec.workload_params),
                "workload_seed": spec.workload_seed,
                "load": load,
                "requests": spec.requests,
                "duration": spec.duration,
                "warmup": spec.warmup,
            },
            describe_spec=spec.describe_workload,
            share=share or ScheduleShare(),
            agents=agents,
        )

    @classmethod
    def of(cls, source: PlanSource, share: ScheduleShare | None = None) -> RunPlan:
        """``source``'s plan: a spec planned now, or a plan (for ``share``, if given)."""
        if isinstance(source, RunPlan):
            return source.for_share(share) if share is not None else source
        return cls.from_spec(source, share)

    @classmethod
    def for_worker(cls, worker_args: Mapping[str, Any], share: ScheduleShare) -> RunPlan:
        """A worker's plan, rebuilt from :attr:`worker_args` (what crosses the process)."""
        return cls.from_spec(RunSpec(**worker_args), share)

    def for_share(self, share: ScheduleShare) -> RunPlan:
        """This plan, of which this process issues ``share``."""
        return replace(self, share=share)

    def whole_run(self) -> RunPlan:
        """This plan with every position in one share (a trace's rows, walked by every
        worker, which keeps those of its own conversations)."""
        return self.for_share(ScheduleShare())

    # -- what the issuing side reads ------------------------------------------------

    @property
    def open_loop(self) -> bool:
        return self.load.open_loop

    @property
    def concurrency(self) -> int:
        """A closed loop's slots in this process (0: an open loop)."""
        return self.share.concurrency or self.load.slots or 0

    @property
    def stage_levels(self) -> tuple[int, ...] | None:
        """A staged closed loop's slots per stage in this process (None: no such stages)."""
        levels = self.share.stage_concurrency
        if levels is None and self.load.stages and not self.load.open_loop:
            levels = tuple(st.concurrency or 1 for st in self.load.stages)
        return levels

    @property
    def stage_bounds_ns(self) -> list[int]:
        """Where each planned stage starts and ends (offsets from ``t0``; open loop only)."""
        return list(self.schedule.bounds_ns) if self.schedule is not None else []

    def offsets(self) -> Iterator[tuple[int, int]]:
        """``(offset_ns, stage)`` of every planned open-loop request, warm-up included."""
        load = self.load
        if load.trace is not None:
            trace: Any = getattr(self.workload, "trace", None)
            if trace is None:
                raise ValueError("a trace load needs the trace workload")
            return ((offset, -1) for offset in trace.offsets_ns(load.trace.time_scale))
        if self.schedule is not None:
            return self.schedule.arrivals()
        return ((offset, -1) for offset in arrival_offsets_ns(load))

    def cancel_points(self) -> Iterator[CancelAt | None]:
        """Per run position: where that request is abandoned, or None (most requests)."""
        cancel = self.load.cancel
        if cancel is None:
            return itertools.repeat(None)
        at = CancelAt(after_tokens=cancel.after_tokens, after_ms=cancel.after_ms)
        rng = random.Random(f"{self.load.seed}:cancel")
        share = cancel.share
        return (at if rng.random() < share else None for _ in itertools.count())

    def planned(self) -> Iterator[PlannedRequest]:
        """This process's share of the planned requests, in order.

        Walks every position of the run (so each worker sees the same schedule
        and sample order) and yields those of its share. An open loop with a
        ``duration`` ends at the first tracked request planned past it, a trace
        or staged schedule also where it ends; a closed loop's duration is
        measured on the clock while issuing.
        """
        share = self.share
        warmup = self.warmup
        total = warmup + self.requests if self.requests else None
        positions: Iterable[int] = range(total) if total is not None else itertools.count()
        order = iter(self.sample_order)
        open_loop = self.load.open_loop
        offsets: Iterator[tuple[int | None, int]] = (
            self.offsets() if open_loop else itertools.repeat((None, -1))
        )
        cancels = self.cancel_points()
        duration_ns = self.duration * 1e9 if self.duration is not None else None
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

    def placed(
        self, position: int, tracked: bool, stage: int = -1, cancel: CancelAt | None = None
    ) -> PlannedRequest:
        """A request placed while issuing, not ahead: an agent tree's call, whose place in
        the run is known only when it is about to go
        (:class:`~pytest_llmperf.loadgen.issue.call_budget.CallBudget`)."""
        return PlannedRequest(position, 0, None, tracked, stage, cancel)

    def warm_connections(self) -> int:
        """Connections to open before the clock starts: ~50 ms of arrivals for an open loop,
        a closed loop's first slots.

        An open loop counts latency from the plan, so a connect (measured: 15-25 ms
        for a burst of 32 on a 2-core machine) that a warm client would not have
        paid lands in schedule_lag and TTFT as if the server had been slow. A
        closed loop counts from ``t_send``, the socket write, which comes after
        the connect; but its slots all start at once, and hundreds of connects then
        take the client's CPU while the first answers arrive (each first token read
        late is a TTFT measured long): its slots (the first stage's, when staged)
        are connected before the clock too.
        """
        load = self.load
        rate = load.peak_rate
        if load.trace is not None:
            trace: Any = getattr(self.workload, "trace", None)
            span = getattr(trace, "span_s", 0.0) * load.trace.time_scale
            rate = self.workload.size / span if span and self.workload.size else None
        if load.open_loop and rate:
            want = max(1, min(WARM_CONNECTIONS_MAX, int(rate * 0.05)))
            return min(want, load.max_concurrency) if load.max_concurrency else want
        if not load.open_loop:
            levels = self.stage_levels
            return max(1, levels[0] if levels else self.concurrency)
        return 1

    def worker_share(self, index: int, count: int) -> ScheduleShare:
        """Worker ``index`` of ``count``: its positions, and its part of a closed loop's slots."""
        load = self.load

        def split(slots: int) -> int:
            return slots // count + (1 if index < slots % count else 0)

        closed = not load.open_loop
        return ScheduleShare(
            index,
            count,
            split(load.slots) if closed and load.slots is not None else None,
            tuple(split(st.concurrency or 1) for st in load.stages)
            if closed and load.stages
            else None,
        )

    def describe_workload(self) -> dict[str, Any]:
        """The spec's workload description and the order its samples go in."""
        out = self.describe_spec()
        if self.conversations is None and self.agents is None:
            out["sample_order"] = self.sample_order.describe()
        else:  # turns follow their conversations, not a sample order (docs/conversations.md)
            out["sample_order"] = {"mode": "sessions"}  # (the JSON report's word, kept)
        if self.agents is not None:  # how the trees go (docs/agentic.md, "When each call goes")
            out["issue"] = self.strategy.describe()
            out.setdefault("agents", self.agents.describe())
        return out


PlanSource = RunSpec | RunPlan  # what a run is built from: its spec, or a plan made already


# -- the spec a run is planned from (the generator passes specs through, never reads them) ---


def effective_spec(declared: RunSpec, overrides: Mapping[str, Any], scale: float) -> RunSpec:
    """What ``LoadGenerator.run(**overrides)`` runs: the declared spec with ``overrides``
    applied (:meth:`~pytest_llmperf.specs.run.RunSpec.with_overrides`), then its request
    counts and durations scaled by ``scale`` (``--llm-scale``)."""
    return declared.with_overrides(overrides).scaled(scale)


def sized_spec(spec: RunSpec, tokenizer: Tokenizer | None, api: str) -> RunSpec:
    """``spec`` with its workload sized by the session's ``tokenizer``, unless it names one.

    A tokenizer the test names is kept but made to account for the API's
    framing (chat template, BOS) as the session's does.
    """
    named = spec.workload_params.get("tokenizer")
    if named is None and tokenizer is None:
        return spec
    chosen = bind_api(resolve_tokenizer(named), api) if named is not None else tokenizer
    return replace(spec, workload_params={**spec.workload_params, "tokenizer": chosen})


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
