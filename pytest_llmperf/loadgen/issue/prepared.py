"""Open-loop requests made ready ahead of their instants, while the pacer has time to spare.

Between one send and the next the open loop must build the next request (its
sample, its JSON body and header bytes: tens of µs for a long prompt). When
two arrivals are planned close together (a Poisson schedule has gaps of tens
of µs every few hundred arrivals) that build lands between them and the
second is sent late by it. :class:`PreparedRequests` builds requests while the
next one to send is still far off, up to :data:`LOOKAHEAD` ahead, and never
when it is near: the work between two close sends is then only the first
one's write.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

from pytest_llmperf.client.endpoint import Endpoint
from pytest_llmperf.client.request import request_data
from pytest_llmperf.client.stream_client import StreamClient
from pytest_llmperf.workloads.base import Sample, Workload

if TYPE_CHECKING:  # handed in: the plan's requests, made by the planner
    from pytest_llmperf.loadgen.plan.planner import PlannedRequest

__all__ = ["LOOKAHEAD", "PREPARE_SPARE_NS", "Prepared", "PreparedRequests"]

LOOKAHEAD = 8  # requests built ahead at most (their bytes are held until sent)
# build another only while the next send is further off than this: far more than a build
# of a long prompt takes, and less than the pacer's early wake-up, so the build never
# delays the wake-up itself
PREPARE_SPARE_NS = 500_000


@dataclass(slots=True)
class Prepared:
    """One request ready to send at ``planned`` (monotonic ns)."""

    item: PlannedRequest
    planned: int
    sample: Sample
    data: bytes | None  # None: building it failed, and its send says why


class PreparedRequests:
    """The open loop's next requests, in plan order, built ahead while time allows."""

    def __init__(
        self,
        plan: Iterator[PlannedRequest],
        t0: int,
        workload: Workload,
        http: StreamClient,
        endpoint: Endpoint,
    ) -> None:
        self._plan = plan
        self._t0 = t0
        self._workload = workload
        self._http = http
        self._endpoint = endpoint
        self._ready: deque[Prepared] = deque()

    def next(self) -> Prepared | None:
        """The next request to send (None: the plan is done), and more built behind it
        while it is further off than :data:`PREPARE_SPARE_NS`."""
        ready = self._ready
        if not ready and not self._build():
            return None
        head = ready[0]
        while (
            len(ready) <= LOOKAHEAD
            and head.planned - time.monotonic_ns() > PREPARE_SPARE_NS
            and self._build()
        ):
            pass
        return ready.popleft()

    def _build(self) -> bool:
        item = next(self._plan, None)
        if item is None:
            return False
        assert item.offset_ns is not None
        sample = self._workload.sample(item.sample_index)
        try:
            data: bytes | None = request_data(self._http, self._endpoint, sample)
        except Exception:  # (a bad header, a payload bug): its send fails and says why
            data = None
        self._ready.append(Prepared(item, self._t0 + item.offset_ns, sample, data))
        return True
