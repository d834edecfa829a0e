"""A run's numbers from cumulative scrapes: bucket percentiles, counters, gauges, one process."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import pytest
from prom_pages import TIME_TO_FIRST_TOKEN_BUCKETS, VllmPage

from pytest_llmperf.server_metrics.deltas import (
    PERCENTILES,
    gauge_stats,
    histogram_delta,
    latency_stats,
    not_one_process,
)
from pytest_llmperf.server_metrics.exposition import Scrape, parse_scrape
from pytest_llmperf.server_metrics.sampler import Attempt, ServerMetricsRecording
from pytest_llmperf.server_metrics.source import ServerMetricsSource
from pytest_llmperf.server_metrics.summarise import NOT_ONE_PROCESS_HINT, summarise_window
from pytest_llmperf.server_metrics.summary import ServerFamily, ServerMetrics

URL = "http://127.0.0.1:8000/metrics"
S = 1_000_000_000  # ns per second


def at(page: VllmPage, t_s: float) -> Scrape:
    got = parse_scrape(page.text(), int(t_s * S))
    assert isinstance(got, Scrape)
    return got


def summary(
    start: Scrape, end: Scrape, inside: Sequence[Scrape] = (), t0: float = 0.0
) -> ServerMetrics:
    return summarise_window(URL, ServerFamily.VLLM, start, end, list(inside), int(t0 * S))


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_bucket_percentiles_bound_numpy_nearest_rank(seed: int) -> None:
    rng = np.random.default_rng(seed)
    page = VllmPage()
    for v in rng.lognormal(-3, 1.0, 300):  # what the server saw before the run
        page.ttft.labels(page.model, "0").observe(float(v))
    before = at(page, 0)
    run = rng.lognormal(-2.5, 0.8, 1000 + seed)  # the run's own TTFTs, seconds
    for v in run:
        page.ttft.labels(page.model, "0").observe(float(v))
    got = summary(before, at(page, 10)).metrics["server.ttft"]
    assert got["count"] == len(run)
    assert got["mean"] == pytest.approx(run.mean() * 1000, abs=6e-4)  # ms, to the µs
    bounds_ms = [b * 1000 for b in TIME_TO_FIRST_TOKEN_BUCKETS]
    for stat, q in PERCENTILES:
        exact = float(np.percentile(run, q, method="inverted_cdf")) * 1000  # nearest rank
        # reported at the upper bound of the bucket holding the exact value, lower bound beside
        assert got[f"{stat}_lo"] < exact <= got[stat], (stat, exact, got)
        assert any(math.isclose(got[stat], b) for b in bounds_ms)
    assert got["max_lo"] < run.max() * 1000 <= got["max"]
    p50_bucket = got["p50"] - got["p50_lo"]
    assert got["bucket_ms"] == pytest.approx(p50_bucket)


def test_buckets_rows_and_the_summary_percentile_agree() -> None:
    page = VllmPage()
    before = at(page, 0)
    for v in (0.003, 0.003, 0.03, 0.09, 0.2, 3.0):
        page.ttft.labels(page.model, "0").observe(v)
    out = summary(before, at(page, 1))
    rows = out.buckets["server.ttft"]
    assert sum(c for _, c in rows) == 6 and math.isinf(rows[-1][0])
    assert [u for u, c in rows if c] == [5.0, 40.0, 100.0, 250.0, 5000.0]
    for stat, q in PERCENTILES:
        assert out.percentile("server.ttft", q) == out.metrics["server.ttft"][stat]
    again = ServerMetrics.from_dict(out.to_dict())
    assert again.buckets == out.buckets and again.metrics == out.metrics


def test_a_percentile_in_the_open_top_bucket_is_left_out_and_said() -> None:
    page = VllmPage()
    before = at(page, 0)
    for v in [0.5] * 90 + [9000.0] * 10:  # 10% beyond vLLM's last e2e bucket (7680 s)
        page.e2e.labels(page.model, "0").observe(v)
    out = summary(before, at(page, 1))
    e2e = out.metrics["server.e2e"]
    assert e2e["p50"] == 500.0 and "p99" not in e2e and "max" not in e2e
    assert any("server.e2e" in n and "beyond the last finite bucket" in n for n in out.notes)


def test_counters_ratios_and_gauges_over_a_window() -> None:
    page = VllmPage()
    page.request(queue_s=0.1, prefill_s=0.1, decode_s=0.1, prompt=10, output=3)
    page.preemptions.labels(page.model, "0").inc(5)
    page.prefix_queries.labels(page.model, "0").inc(1000)
    page.prefix_hits.labels(page.model, "0").inc(900)
    start = at(page, 1.0)
    samples = []
    for i, kv in enumerate((0.2, 0.6, 0.4)):
        page.request(queue_s=0.1, prefill_s=0.1, decode_s=0.1, prompt=100, output=20)
        page.kv.labels(page.model, "0").set(kv)
        page.running.labels(page.model, "0").set(i + 1)
        samples.append(at(page, 2.0 + i))
    page.request(queue_s=0.0, prefill_s=0.0, decode_s=0.0, output=1, finished="abort")
    page.preemptions.labels(page.model, "0").inc(2)
    page.prefix_queries.labels(page.model, "0").inc(400)
    page.prefix_hits.labels(page.model, "0").inc(100)
    page.draft_tokens.labels(page.model, "0").inc(50)
    page.accepted.labels(page.model, "0").inc(40)
    out = summary(start, at(page, 6.0), samples, t0=1.5)
    m = out.metrics
    assert out.missing is None and out.family is ServerFamily.VLLM and out.scrapes == 5
    assert m["server.requests"] == {"value": 3.0}  # the aborted one is not a completed request
    assert m["server.prompt_tokens"] == {"value": 300 + 100.0}
    assert m["server.generation_tokens"] == {"value": 61.0}
    assert m["server.preemptions"] == {"value": 2.0}
    assert m["server.prefix_cache_hit_rate"] == {"value": 0.25}
    assert m["server.spec_decode_acceptance"] == {"value": 0.8}
    assert m["server.kv_cache_usage"] == {"max": 0.6, "mean": 0.4, "min": 0.2}
    assert out.series["server.kv_cache_usage"] == [[0.5, 0.2], [1.5, 0.6], [2.5, 0.4]]
    assert m["server.running"]["max"] == 3 and m["server.waiting"]["max"] == 0
    assert m["server.queue_time"]["count"] == 4


def test_a_ratio_with_nothing_to_divide_is_absent_and_said() -> None:
    page = VllmPage()
    assert "server.prefix_cache_hit_rate" not in summary(at(page, 0), at(page, 1)).metrics
    page.prefix_queries.labels(page.model, "0").inc(100)  # lookups before, none in the window
    start = at(page, 2)
    out = summary(start, at(page, 3))
    assert "server.prefix_cache_hit_rate" not in out.metrics
    assert out.notes == [
        "server.prefix_cache_hit_rate: no prefix-cache lookups during the window "
        "(vllm:prefix_cache_queries_total)"
    ]
    assert out.stat("server.prefix_cache_hit_rate", None) is None  # an SLO: inconclusive


def test_a_router_alternating_two_workers_gives_no_numbers() -> None:
    a = VllmPage(started=1000.0)
    b = VllmPage(started=2000.0)
    for _ in range(40):
        a.request(queue_s=0.1, prefill_s=0.1, decode_s=0.1, output=230)
    for _ in range(10):
        b.request(queue_s=0.1, prefill_s=0.1, decode_s=0.1, output=128)
    pages = [at(p, t) for t, p in enumerate((a, b, a, b, a))]
    out = summary(pages[0], pages[-1], pages[1:-1])
    assert not out.metrics and not out.series and out.scrapes == 0
    assert out.missing is not None
    assert out.missing.startswith("the server's metrics are not one process's (")
    assert "process_start_time_seconds changed" in out.missing
    assert out.missing.endswith(NOT_ONE_PROCESS_HINT)
    assert "--llm-server-metrics=URL" in out.missing


def test_without_process_start_a_counter_going_back_tells_two_processes() -> None:
    a = VllmPage()
    b = VllmPage()
    for _ in range(9461 // 10):
        a.generation_tokens.labels(a.model, "0").inc(10)
    b.generation_tokens.labels(b.model, "0").inc(1282)

    def bare(page: VllmPage, t: float) -> Scrape:
        text = "\n".join(ln for ln in page.text().splitlines() if "process_start" not in ln)
        got = parse_scrape(text + "\n", int(t * S))
        assert isinstance(got, Scrape) and got.process_start == ()
        return got

    why = not_one_process([bare(a, 0), bare(b, 1)])
    assert why == "vllm:generation_tokens_total went backwards, from 9460 to 1282"
    assert not_one_process([bare(a, 0), bare(a, 1)]) is None  # one process: fine


def test_a_changed_process_label_tells_two_processes() -> None:
    one, two = VllmPage(engines=1), VllmPage(engines=2)
    why = not_one_process([at(one, 0), at(two, 1)])
    assert why is not None and why.startswith("label engine was 0, then 0,1")


def test_histogram_delta_counts_only_the_window() -> None:
    page = VllmPage()
    page.request(queue_s=0.1, prefill_s=0.1, decode_s=0.1)
    a = at(page, 0)
    page.request(queue_s=0.6, prefill_s=0.1, decode_s=0.1)
    d = histogram_delta(a, at(page, 1), "vllm:request_queue_time_seconds")
    assert d is not None and d.count == 1 and d.sum == pytest.approx(0.6)
    stats, note = latency_stats(d)
    assert stats["p50"] == 800.0 and stats["p50_lo"] == 500.0 and stats["bucket_ms"] == 300.0
    assert note == ""


def recording(attempts: list[Attempt], started: float, stopped: float) -> ServerMetricsRecording:
    source = ServerMetricsSource(URL, 1.0, ServerFamily.VLLM)
    return ServerMetricsRecording(source, attempts, int(started * S), int(stopped * S))


def test_a_stage_window_uses_the_scrapes_around_it() -> None:
    page = VllmPage()
    attempts = [Attempt("start", int(0.0 * S), at(page, 0.0))]
    for t in (1.0, 2.0, 3.0, 4.0):
        page.request(queue_s=0.1, prefill_s=0.1, decode_s=0.1, output=10)
        page.kv.labels(page.model, "0").set(t / 10)
        attempts.append(Attempt("sample", int(t * S), at(page, t)))
    page.request(queue_s=0.1, prefill_s=0.1, decode_s=0.1, output=10)
    attempts.append(Attempt("end", int(5.0 * S), at(page, 5.0)))
    rec = recording(attempts, 0.0, 4.9)
    whole = rec.summary(0)
    assert whole.metrics["server.generation_tokens"] == {"value": 50.0}
    assert whole.metrics["server.kv_cache_usage"]["max"] == 0.4 and whole.scrapes == 6
    stage = rec.summary(
        0, (int(1.5 * S), int(3.0 * S))
    )  # last at/before 1.5: 1.0; first at/after 3.0: 3.0
    assert stage.metrics["server.generation_tokens"] == {"value": 20.0}
    assert stage.metrics["server.kv_cache_usage"] == {"max": 0.3, "mean": 0.25, "min": 0.2}
    assert stage.series["server.kv_cache_usage"] == [[2.0, 0.2], [3.0, 0.3]]


def test_the_first_failure_is_why_a_boundary_is_missing() -> None:
    page = VllmPage()
    attempts = [
        Attempt("start", 0, failure="GET http://h:1/metrics: 404 Not Found"),
        Attempt("sample", S, at(page, 1.0)),
        Attempt("sample", 2 * S, failure="GET http://h:1/metrics: never answered"),
        Attempt("end", 3 * S, at(page, 3.0)),
    ]
    out = recording(attempts, 0.0, 2.9).summary(0)
    assert out.missing == "GET http://h:1/metrics: 404 Not Found"
    assert "server.requests" not in out.metrics  # no start: no deltas
    assert "server.kv_cache_usage" in out.metrics  # the samples still show the gauges
    # a failed sample between good boundaries is a note, not missing
    attempts[0] = Attempt("start", 0, at(page, 0.0))
    ok = recording(attempts, 0.0, 2.9).summary(0)
    assert ok.missing is None and "server.requests" in ok.metrics
    failed = [n for n in ok.notes if "scrapes failed" in n]
    assert failed == ["1 of 4 scrapes failed (first: GET http://h:1/metrics: never answered)"]


@pytest.mark.parametrize(
    "values",
    [
        [0.0039081582804103565] * 3,  # vLLM's KV usage with one block held: seen in CI
        [0.1] * 10,  # a sum of tenths is not ten tenths
        [0.3, 0.1, 0.7, 0.7, 0.2],
    ],
)
def test_a_gauges_mean_lies_between_its_min_and_max(values: list[float]) -> None:
    stats, series = gauge_stats([(i * S, v) for i, v in enumerate(values)], 0)
    assert stats["min"] <= stats["mean"] <= stats["max"], stats
    assert stats["mean"] == pytest.approx(sum(values) / len(values), abs=1e-6)
    assert [v for _, v in series] == values
