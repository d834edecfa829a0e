"""What the issuing loops outside :mod:`~pytest_llmperf.loadgen.issue` use of its ``Issuer``.

The session loops (:mod:`~pytest_llmperf.loadgen.sessions`) and the closed
loop's clock (:mod:`~pytest_llmperf.loadgen.closed_loop`) share the issuer's
bookkeeping: records, delivery, the drain's in-flight map, the concurrency
gate and the pacer. They see it through this protocol, so ``issue`` can
import them without a cycle.
"""

from __future__ import annotations

import asyncio
from typing import Any, Protocol

from pytest_llmperf.client.cancel import CancelAt
from pytest_llmperf.client.endpoint import Endpoint
from pytest_llmperf.client.records import RequestRecord
from pytest_llmperf.client.stream_client import StreamClient
from pytest_llmperf.loadgen.concurrency_cap import SlotGate
from pytest_llmperf.loadgen.delivery import Delivery
from pytest_llmperf.loadgen.pacing import Pacer
from pytest_llmperf.loadgen.plan import PlannedRequest, ScheduleShare
from pytest_llmperf.loadgen.result import StopReason
from pytest_llmperf.specs.run import RunSpec
from pytest_llmperf.workloads.base import Sample

__all__ = ["IssuerParts"]


class _StageSends(Protocol):
    @property
    def stage_sends(self) -> list[int]: ...


class IssuerParts(Protocol):
    """What the session loops use of :class:`pytest_llmperf.loadgen.issue.Issuer`: its
    bookkeeping (records, delivery, the drain's in-flight map, the gate, the pacer)."""

    spec: RunSpec
    share: ScheduleShare
    delivery: Delivery
    stop_reason: StopReason | None
    _t0: int
    _pacer: Pacer
    _stopping: asyncio.Event
    _gate: SlotGate | None
    _inflight: dict[asyncio.Task[Any], RequestRecord]
    _stage_bounds: list[int]
    _closed_loop_over: asyncio.Future[None] | None

    @property
    def stats(self) -> _StageSends: ...

    def _new_record(self, item: PlannedRequest, sample: Sample, t_sched: int) -> RequestRecord: ...

    async def _send_capped(
        self,
        gate: SlotGate,
        http: StreamClient,
        endpoint: Endpoint,
        sample: Sample,
        record: RequestRecord,
        cancel: CancelAt | None,
    ) -> RequestRecord: ...

    def _finished(self, task: asyncio.Task[RequestRecord]) -> None: ...

    def _end_closed_loop(self, error: BaseException | None = None) -> None: ...
