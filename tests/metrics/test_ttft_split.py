"""The TTFT split and the ``server.*`` names from the server's own per-request timings.

Hand-built records: each one's parts (client queue, server queue, engine,
remainder) add up to its TTFT by definition; these tests pin the definitions,
the population (only requests whose server said its engine time), the
merge/state round trips that carry them from worker processes, and the event
log that replays them.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_llmperf.client.records import ErrorKind, RequestRecord
from pytest_llmperf.results.accumulator import MetricsAccumulator, ttft_parts_ns
from pytest_llmperf.results.event_log import analyse_event_log, read_records
from pytest_llmperf.results.recorder import EventRecorder
from pytest_llmperf.results.server_per_request import server_metrics_from_requests, ttft_split
from pytest_llmperf.server_metrics.summary import ServerFamily

MS = 1_000_000
BASE = 10_000 * MS  # monotonic clocks never read 0


def timed(
    i: int,
    *,
    lag_ms: float = 1.0,
    ttft_ms: float = 40.0,
    queue_ms: float | None = 5.0,
    engine_ms: float | None = 30.0,
    decode_ms: float | None = 90.0,
    itl_ms: float | None = 10.0,
    stage: int = -1,
) -> RequestRecord:
    r = RequestRecord(index=i, t_sched=BASE + i * 100 * MS, stage=stage)
    r.t_send = r.t_sched + round(lag_ms * MS)
    r.t_first = r.t_sched + round(ttft_ms * MS)
    r.gaps_ns = [10 * MS] * 9
    r.t_last = r.t_end = r.t_first + 90 * MS
    r.token_events = 10
    r.usage_completion_tokens = 10
    r.server_queue_ms = queue_ms
    r.server_ttft_ms = engine_ms
    r.server_decode_ms = decode_ms
    r.server_mean_itl_ms = itl_ms
    return r


def test_the_parts_add_up_to_each_requests_ttft() -> None:
    r = timed(0, lag_ms=1.5, ttft_ms=40.0, queue_ms=5.25, engine_ms=30.0)
    parts = ttft_parts_ns(r)
    assert parts == (1_500_000, 5_250_000, 30_000_000, 3_250_000)
    assert sum(parts) == r.t_first - r.t_sched


def test_llamacpp_without_queue_time_puts_the_wait_in_the_remainder() -> None:
    parts = ttft_parts_ns(timed(0, queue_ms=None, engine_ms=30.0))
    assert parts == (1 * MS, 0, 30 * MS, 9 * MS)


def test_no_engine_time_no_split() -> None:
    assert ttft_parts_ns(timed(0, engine_ms=None)) is None
    assert ttft_parts_ns(RequestRecord(index=0, t_sched=BASE)) is None


def test_a_run_without_server_timings_pays_nothing_and_says_nothing() -> None:
    acc = MetricsAccumulator()
    acc.add(timed(0, queue_ms=None, engine_ms=None, decode_ms=None, itl_ms=None))
    assert acc.server_histograms == {}
    assert "server_timing" not in acc.to_state()
    assert ttft_split(acc) is None
    assert server_metrics_from_requests(acc) is None


def test_split_and_server_names_over_a_run() -> None:
    acc = MetricsAccumulator()
    for i in range(10):
        acc.add(timed(i, queue_ms=float(i), ttft_ms=40.0 + i, engine_ms=30.0))
    failed = timed(99)
    failed.fail(ErrorKind.HTTP, "boom")
    acc.add(failed)  # a failed request enters no latency histogram, server ones included
    split = ttft_split(acc)
    assert split is not None
    assert split["count"] == 10 and split["server_queue_reported"] == 10
    assert split["remainder_negative"] == 0
    assert split["engine"] == {"p50": 30.0, "p90": 30.0, "p99": 30.0, "mean": 30.0}
    assert split["client_queue"]["mean"] == 1.0
    assert split["server_queue"]["mean"] == pytest.approx(4.5)
    assert split["remainder"]["mean"] == pytest.approx(9.0)  # 40+i - 1 - i - 30
    means = sum(split[k]["mean"] for k in ("client_queue", "server_queue", "engine", "remainder"))
    assert means == pytest.approx(split["ttft"]["mean"])  # the means add up too
    server = server_metrics_from_requests(acc)
    assert server is not None
    assert server.source == "responses" and server.family is ServerFamily.VLLM
    assert server.stat("server.prefill_time", "p50") == 30.0
    assert server.stat("server.queue_time", "max") == 9.0
    assert server.stat("server.ttft", "mean") == pytest.approx(34.5)  # queue + engine
    assert server.stat("server.decode_time", "p99") == 90.0
    assert server.stat("server.itl", "p50") == 10.0
    assert server.samples("server.queue_time") == 10
    for name in ("server.queue_time", "server.prefill_time", "server.ttft"):
        assert set(server.metrics[name]) >= {"p50", "p90", "p95", "p99", "p99.9", "mean", "max"}
        assert server.metrics[name]["bucket_ms"] > 0
    # any percentile from the HDR buckets, as from a scrape's (bucket-bounded, within 0.1%)
    assert server.percentile("server.queue_time", 75) == pytest.approx(7.0, rel=1e-3)


def test_llamacpp_fills_what_it_has() -> None:
    acc = MetricsAccumulator()
    for i in range(4):
        r = timed(i, queue_ms=None)
        r.server_spec_accepted, r.server_spec_draft = 3, 4
        acc.add(r)
    split = ttft_split(acc)
    assert split is not None and split["server_queue"] is None
    assert split["server_queue_reported"] == 0
    server = server_metrics_from_requests(acc)
    assert server is not None and server.family is ServerFamily.LLAMACPP
    assert "server.queue_time" not in server.metrics
    assert "server.ttft" not in server.metrics  # no queue time: no TTFT to speak of
    assert server.stat("server.prefill_time", "p50") == 30.0
    assert server.stat("server.spec_decode_acceptance", None) == 0.75


def test_clocks_that_disagree_are_counted_not_hidden() -> None:
    acc = MetricsAccumulator()
    acc.add(timed(0, ttft_ms=20.0, queue_ms=5.0, engine_ms=30.0))  # parts overrun the TTFT
    split = ttft_split(acc)
    assert split is not None
    assert split["remainder_negative"] == 1
    assert split["remainder"]["p50"] == 0.0  # recorded as 0


def test_merge_and_state_carry_them_like_every_histogram() -> None:
    # what worker processes (and Ray actors) send: to_state(), merged by the parent
    parts = [MetricsAccumulator(), MetricsAccumulator(), MetricsAccumulator()]
    whole = MetricsAccumulator()
    for i in range(30):
        r = timed(i, queue_ms=i / 3, ttft_ms=40.0 + i, stage=i % 2)
        r.server_spec_accepted, r.server_spec_draft = i, 2 * i
        whole.add(r)
        parts[i % 3].add(r)
    parts[2] = MetricsAccumulator()  # a worker whose requests had no server timings
    parts[2].add(timed(0, queue_ms=None, engine_ms=None, decode_ms=None, itl_ms=None))
    merged = MetricsAccumulator()
    for part in parts:
        merged.merge(MetricsAccumulator.from_state(part.to_state()))
    expect = MetricsAccumulator()
    for part in parts[:2]:
        expect.merge(part)
    assert ttft_split(merged) == ttft_split(expect)
    assert merged.server_spec_draft == expect.server_spec_draft > 0
    roundtrip = MetricsAccumulator.from_state(whole.to_state())
    assert ttft_split(roundtrip) == ttft_split(whole)
    assert server_metrics_from_requests(roundtrip) == server_metrics_from_requests(whole)
    # stages get them as every histogram
    for k in (0, 1):
        assert ttft_split(roundtrip.stages[k]) == ttft_split(whole.stages[k])
        assert ttft_split(whole.stages[k])["count"] == 15  # type: ignore[index]


def test_event_log_round_trip(tmp_path: Path) -> None:
    path = tmp_path / "run.sqlite"
    live = MetricsAccumulator()
    with EventRecorder(path) as rec:
        for i in range(12):
            r = timed(i, queue_ms=0.1 * i + 0.123456789, ttft_ms=40.0 + i)
            if i % 3 == 0:
                r.server_queue_ms = None  # some fields absent
                r.server_spec_accepted, r.server_spec_draft = 2, 3
            if i == 5:
                r.server_ttft_ms = r.server_decode_ms = r.server_mean_itl_ms = None
                r.server_queue_ms = None
            live.add(r)
            rec.record(r)
    replay = analyse_event_log(path)
    assert ttft_split(replay) == ttft_split(live)
    assert server_metrics_from_requests(replay) == server_metrics_from_requests(live)
    records = list(read_records(path))
    assert records[1].server_queue_ms == 0.1 + 0.123456789  # floats exactly
    assert records[0].server_queue_ms is None and records[0].server_spec_draft == 3
    assert records[5].server_ttft_ms is None
