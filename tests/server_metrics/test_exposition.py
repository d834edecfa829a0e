"""Reading /metrics pages as the servers write them, and refusing what is not one."""

from __future__ import annotations

import math
import random

import pytest
from prom_pages import LLAMACPP_PAGE, VllmPage
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

from pytest_llmperf.server_metrics.exposition import Scrape, ScrapeFailure, flatten, parse_scrape
from pytest_llmperf.server_metrics.families import detect_family, family_of, metric_names
from pytest_llmperf.server_metrics.summary import ServerFamily


def scrape(text: str | bytes, **kw: object) -> Scrape:
    got = parse_scrape(text, 123, **kw)  # type: ignore[arg-type]
    assert isinstance(got, Scrape), got
    return got


def test_a_vllm_page_per_label_set_and_summed_over_engines() -> None:
    page = VllmPage(engines=2, started=1712345678.5)
    page.request("0", queue_s=0.1, prefill_s=0.02, decode_s=0.9, prompt=100, output=10)
    page.request("1", queue_s=0.4, prefill_s=0.05, decode_s=2.0, prompt=50, output=5)
    page.request("1", queue_s=0.0, prefill_s=0.01, decode_s=0.0, output=1, finished="abort")
    page.kv.labels(page.model, "0").set(0.25)
    page.kv.labels(page.model, "1").set(0.75)
    page.running.labels(page.model, "0").set(3)
    page.running.labels(page.model, "1").set(4)
    s = scrape(page.text())
    assert family_of(s) is ServerFamily.VLLM
    assert s.at_ns == 123 and s.process_start == (1712345678.5,)
    assert s.identity == {("engine", "0"), ("engine", "1")}
    assert s.counter("vllm:generation_tokens_total") == 16
    assert s.counter("vllm:generation_tokens") == 16  # with or without _total
    series = s.counter_series("vllm:prompt_tokens_total")
    assert series is not None and sorted(series.values()) == [100, 50 + 100]
    success = s.counter("vllm:request_success_total")
    assert success == 3
    assert s.counter("vllm:request_success_total", without=[("finished_reason", "abort")]) == 2
    assert s.gauge("vllm:kv_cache_usage_perc", "mean") == 0.5
    assert s.gauge("vllm:num_requests_running") == 7
    queue = s.histogram("vllm:request_queue_time_seconds")
    assert queue is not None and queue.count == 3 and queue.sum == pytest.approx(0.5)
    assert queue.bounds[0] == 0.3 and math.isinf(queue.bounds[-1])
    assert queue.cumulative[0] == 2 and queue.cumulative[1] == 3  # 0.1, 0.0 <= 0.3 < 0.4
    assert not any(n.endswith("_created") for n in s.names)  # creation times are not data
    assert "vllm:cache_config_info" in s.gauges


def test_keeping_only_the_mapped_metrics_changes_no_number() -> None:
    page = VllmPage(engines=2)
    rng = random.Random(3)
    for i in range(50):
        page.request(
            str(i % 2), queue_s=rng.random(), prefill_s=rng.random(), decode_s=rng.random()
        )
    text = page.text()
    full = scrape(text)
    keep = metric_names(ServerFamily.VLLM)
    kept = scrape(text, keep=keep)
    assert kept.names <= keep | {n + "_total" for n in keep}
    assert "vllm:iteration_tokens_total" not in kept.names  # not mapped: not parsed
    assert kept.process_start == full.process_start and kept.identity == full.identity
    for name in kept.names:
        assert kept.counters.get(name) == full.counters.get(name)
        assert kept.gauges.get(name) == full.gauges.get(name)
        assert kept.histograms.get(name) == full.histograms.get(name)
    assert full.only(keep).names == kept.names


def test_a_llamacpp_page() -> None:
    text = LLAMACPP_PAGE.format(prompt=120, cached=80, predicted=64, processing=2, deferred=1)
    s = scrape(text)
    assert family_of(s) is ServerFamily.LLAMACPP
    assert s.counter("llamacpp:prompt_tokens_total") == 120
    assert s.counter("llamacpp:prompt_tokens_cached_total") == 80
    assert s.counter("llamacpp:tokens_predicted_total") == 64
    # a counter without _total: the parser names it with one, both spellings find it
    assert s.counter("llamacpp:n_tokens_max") == 37
    assert s.gauge("llamacpp:requests_processing") == 2
    assert s.gauge("llamacpp:requests_deferred") == 1
    assert not s.histograms and s.process_start == () and s.identity == frozenset()


def test_an_sglang_page_and_a_tgi_page_are_told_apart() -> None:
    r = CollectorRegistry()
    labels = ["model_name", "tp_rank"]
    Gauge("sglang:num_running_reqs", "r", labels, registry=r).labels("m", "0").set(2)
    Gauge("sglang:token_usage", "u", labels, registry=r).labels("m", "0").set(0.4)
    Counter("sglang:prompt_tokens", "p", labels, registry=r).labels("m", "0").inc(10)
    h = Histogram("sglang:queue_time_seconds", "q", labels, buckets=[0.0, 0.1, 0.2], registry=r)
    h.labels("m", "0").observe(0.05)
    s = scrape(generate_latest(r))
    assert family_of(s) is ServerFamily.SGLANG
    q = s.histogram("sglang:queue_time_seconds")
    assert q is not None and q.bounds[:3] == (0.0, 0.1, 0.2) and q.cumulative[:3] == (0, 1, 1)
    # TGI writes through Rust's metrics-exporter-prometheus: counters without _total
    tgi = (
        "# TYPE tgi_request_success counter\ntgi_request_success 7\n"
        "# TYPE tgi_queue_size gauge\ntgi_queue_size 3\n"
        "# TYPE tgi_request_queue_duration histogram\n"
        'tgi_request_queue_duration_bucket{le="0.00015"} 1\n'
        'tgi_request_queue_duration_bucket{le="+Inf"} 2\n'
        "tgi_request_queue_duration_sum 0.5\ntgi_request_queue_duration_count 2\n"
    )
    t = scrape(tgi)
    assert family_of(t) is ServerFamily.TGI
    assert t.counter("tgi_request_success") == 7 and t.gauge("tgi_queue_size") == 3
    assert detect_family(["llmperf_sim_info", "vllm:num_requests_running"]) is ServerFamily.SIM
    assert detect_family(["foo_total", "bar"]) is ServerFamily.UNKNOWN


@pytest.mark.parametrize(
    ("body", "says"),
    [
        (b"", "an empty body"),
        (b"   \n\n", "an empty body"),
        (b"<!DOCTYPE html><html><body><h1>502 Bad Gateway</h1></body></html>", "HTML"),
        (b'{"detail": "Not Found"}', "JSON"),
        (b"\xff\xfe\x00\x01binary", "not UTF-8"),
        (b"metrics\x00\x01", "binary"),
        (b"Not Found\n", "not Prometheus text"),
        (b"hello world, this is not a metrics page\nat all\n", "not Prometheus text"),
        (b"# only a comment\n", "no samples"),
    ],
)
def test_what_is_not_prometheus_text_says_so(body: bytes, says: str) -> None:
    got = parse_scrape(body, 0)
    assert isinstance(got, ScrapeFailure) and says in got.reason
    assert got.reason.startswith("not Prometheus text")


def test_random_bytes_never_raise() -> None:
    rng = random.Random(7)
    good = VllmPage().text().encode()
    for _ in range(200):
        n = rng.randint(0, 400)
        blob = bytes(rng.randrange(256) for _ in range(n))
        cut = good[: rng.randint(0, len(good))] + blob  # a truncated page with junk after it
        for body in (blob, cut):
            assert isinstance(parse_scrape(body, 0), Scrape | ScrapeFailure)


def test_one_bad_line_on_a_good_page_is_dropped_not_the_page() -> None:
    page = VllmPage()
    page.request(queue_s=0.1, prefill_s=0.1, decode_s=0.1, output=4)
    s = scrape(page.text() + "this line is garbage\n")
    assert s.dropped_lines == 1 and s.counter("vllm:generation_tokens_total") == 4
    h = s.histogram("vllm:time_to_first_token_seconds")
    assert h is not None and h.count == 1


def test_flatten_is_the_old_flat_view() -> None:
    page = VllmPage()
    page.request(queue_s=0.1, prefill_s=0.1, decode_s=0.1, output=4)
    flat = flatten(scrape(page.text()))
    assert flat["vllm:generation_tokens_total"] == 4
    assert flat["vllm:time_to_first_token_seconds_count"] == 1
    assert flat["process_start_time_seconds"] == 1.7e9
