"""The open loop's requests built ahead while the next send is far off, never when it is near.

A build (sample, JSON body, header bytes) between two sends planned close together
makes the second late by it (benchmarks/README.md, issue 29: schedule_lag p99 at
500 req/s under ``pacing="precise"``), so :class:`PreparedRequests` builds while
time allows and hands the requests out in plan order, each with the bytes
``request_data`` gives it.
"""

from __future__ import annotations

import time

from pytest_llmperf.client.endpoint import Endpoint
from pytest_llmperf.client.request import request_data
from pytest_llmperf.client.stream_client import StreamClient
from pytest_llmperf.loadgen.issue.prepared import LOOKAHEAD, PreparedRequests
from pytest_llmperf.loadgen.plan.planner import PlannedRequest
from pytest_llmperf.workloads.base import Sample

ENDPOINT = Endpoint("http://127.0.0.1:9/v1", model="m")  # nothing is sent


class CountingWorkload:
    """Samples on demand, counting the builds."""

    def __init__(self, bad: int = -1) -> None:
        self.built: list[int] = []
        self.bad = bad  # this sample's header breaks its request's framing

    def sample(self, index: int) -> Sample:
        self.built.append(index)
        headers = {"X-Bad": "a\r\nb"} if index == self.bad else None
        return Sample(
            index=index, prompt=f"p{index}", input_tokens=1, max_tokens=2, headers=headers
        )


def plan(count: int, gap_ns: int) -> list[PlannedRequest]:
    return [PlannedRequest(k, 100 + k, k * gap_ns, tracked=True) for k in range(count)]


def test_every_request_comes_out_in_plan_order_with_its_bytes() -> None:
    workload = CountingWorkload()
    client = StreamClient(ENDPOINT)
    t0 = time.monotonic_ns()
    items = plan(20, 1_000)
    ready = PreparedRequests(iter(items), t0, workload, client, ENDPOINT)
    out = []
    while (request := ready.next()) is not None:
        out.append(request)
    assert [r.item for r in out] == items
    assert [r.planned for r in out] == [t0 + k * 1_000 for k in range(20)]
    assert [r.sample.index for r in out] == [100 + k for k in range(20)]
    for r in out:
        assert r.data == request_data(client, ENDPOINT, r.sample)
    assert ready.next() is None  # and stays done


def test_far_off_sends_are_built_ahead_and_near_ones_are_not() -> None:
    far = CountingWorkload()
    t0 = time.monotonic_ns() + 60 * 1_000_000_000  # the first send is a minute away
    ready = PreparedRequests(iter(plan(50, 1_000)), t0, far, StreamClient(ENDPOINT), ENDPOINT)
    first = ready.next()
    assert first is not None and first.sample.index == 100
    assert len(far.built) == LOOKAHEAD + 1  # the one handed out and LOOKAHEAD behind it

    near = CountingWorkload()
    t0 = time.monotonic_ns()  # due now: no time to build anything but the next
    ready = PreparedRequests(iter(plan(50, 1_000)), t0, near, StreamClient(ENDPOINT), ENDPOINT)
    assert ready.next() is not None and ready.next() is not None
    assert near.built == [100, 101]


def test_a_request_whose_bytes_cannot_be_built_is_still_handed_out() -> None:
    workload = CountingWorkload(bad=102)
    client = StreamClient(ENDPOINT)
    ready = PreparedRequests(iter(plan(4, 0)), time.monotonic_ns(), workload, client, ENDPOINT)
    out = [ready.next() for _ in range(4)]
    assert [r.sample.index for r in out if r is not None] == [100, 101, 102, 103]
    assert [r.data is None for r in out if r is not None] == [False, False, True, False]
