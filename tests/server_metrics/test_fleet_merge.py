"""A fleet's numbers from its pages' own summaries: the arithmetic of fleet_merge.py.

Each page is real Prometheus text (vLLM's, written by ``prometheus_client`` as vLLM
writes it: prom_pages.py), read by the real parser and summarised on its own under
the one-process rule; the fleet is then put together from the summaries.
"""

from __future__ import annotations

from prom_pages import VllmPage
from prometheus_client import CollectorRegistry, Gauge, Histogram, generate_latest

from pytest_llmperf.server_metrics.exposition import Scrape, parse_scrape
from pytest_llmperf.server_metrics.fleet import FleetMetrics, PageMetrics
from pytest_llmperf.server_metrics.fleet_merge import fleet_metrics, merge_pages
from pytest_llmperf.server_metrics.summarise import summarise_window
from pytest_llmperf.server_metrics.summary import ServerFamily, ServerMetrics
from pytest_llmperf.specs.fleet_names import PageRole

REPLICA, ROUTER = PageRole.REPLICA, PageRole.ROUTER
PREFILL, DECODE = PageRole.PREFILL, PageRole.DECODE


def scrape(text: str, t: float) -> Scrape:
    got = parse_scrape(text, int(t * 1e9))
    assert isinstance(got, Scrape), got
    return got


def window(name: str, before: str, mid: str, after: str) -> ServerMetrics:
    """One page's summary of a window: scrapes at 0 s, 1 s (the sample) and 2 s."""
    a, m, b = scrape(before, 0), scrape(mid, 1), scrape(after, 2)
    family = ServerFamily.VLLM if "vllm:" in before else ServerFamily.UNKNOWN
    return summarise_window(f"http://{name}/metrics", family, a, b, [m], 0)


def replica(
    started: float, ttfts: list[float], hits: int, queries: int, running: int, kv: float
) -> ServerMetrics:
    page = VllmPage(started=started)
    before = page.text()
    for ttft in ttfts:
        page.request(queue_s=ttft / 3, prefill_s=2 * ttft / 3, decode_s=1.0)
    page.prefix_queries.labels(page.model, "0").inc(queries)
    page.prefix_hits.labels(page.model, "0").inc(hits)
    page.running.labels(page.model, "0").set(running)
    page.kv.labels(page.model, "0").set(kv)
    mid = page.text()
    return window(f"w{started:g}", before, mid, page.text())


ROUTER_PAGE = "# TYPE router_requests_total counter\nrouter_requests_total {n}\n"


def two_replicas_and_a_router() -> FleetMetrics:
    zero = replica(1000.0, [0.3, 0.3, 0.3], hits=80, queries=100, running=2, kv=0.5)
    one = replica(2000.0, [0.95], hits=0, queries=300, running=4, kv=0.9)
    router = window(
        "r", ROUTER_PAGE.format(n=10), ROUTER_PAGE.format(n=12), ROUTER_PAGE.format(n=14)
    )
    return fleet_metrics(
        [
            PageMetrics(ROUTER, "r:9000", router),
            PageMetrics(REPLICA, "0", zero),
            PageMetrics(REPLICA, "1", one),
        ]
    )


def test_counters_add_ratios_recompute_histograms_merge_gauges_by_unit() -> None:
    fleet = two_replicas_and_a_router()
    whole = fleet.whole
    assert whole is not None and whole.missing is None
    assert whole.metrics["server.requests"] == {"value": 4.0}  # 3 + 1: the router's not added
    assert whole.metrics["server.prompt_tokens"] == {"value": 400.0}
    # hits over lookups summed (80 / 400), not the mean of the pages' rates (0.8 and 0.0)
    assert whole.metrics["server.prefix_cache_hit_rate"] == {"value": 0.2}
    assert fleet.prefix_hit_rate == 0.2
    ttft = whole.metrics["server.ttft"]
    # 0.3 s ×3 in the (0.25, 0.5] bucket, 0.95 s in (0.75, 1.0]: bucket by bucket
    assert ttft["count"] == 4 and ttft["p50"] == 500.0 and ttft["p50_lo"] == 250.0
    assert ttft["p99"] == 1000.0 and ttft["max"] == 1000.0
    assert ttft["mean"] == 462.5  # exact: the pages' sums, (3 × 300 + 950) / 4
    assert whole.percentile("server.ttft", 75) == 500.0
    assert whole.percentile("server.ttft", 76) == 1000.0
    # counts: the sum of the pages' means; fractions: the mean of means, the max of maxima
    assert whole.metrics["server.running"] == {"max": 6.0, "mean": 6.0, "min": 6.0}
    assert whole.metrics["server.kv_cache_usage"] == {"max": 0.9, "mean": 0.7, "min": 0.5}
    assert whole.series["server.running"] == [[1.0, 6.0]]
    assert fleet.requests == {"0": 3.0, "1": 1.0}
    assert set(fleet.roles) == {"router", "replica"}
    assert fleet.roles["replica"].metrics == whole.metrics
    assert fleet.roles["router"].raw == {} and fleet.roles["router"].missing is None
    assert fleet.pages[0].metrics.raw == {"router_requests_total": 4.0}  # its own, kept
    assert not fleet.notes


def test_a_page_alone_merges_to_itself_and_its_json_is_unchanged() -> None:
    page = replica(1000.0, [0.3, 0.02, 4.0], hits=5, queries=10, running=1, kv=0.25)
    merged = merge_pages([PageMetrics(REPLICA, "0", page)], "fleet")
    assert merged.metrics == page.metrics
    assert merged.buckets == page.buckets
    assert "parts" not in page.to_dict()  # what the merge adds up stays out of a page's JSON
    back = FleetMetrics.from_dict(fleet_metrics([PageMetrics(REPLICA, "0", page)]).to_dict())
    assert back.pages[0].metrics.to_dict() == page.to_dict()


def histogram_page(started: float, buckets: tuple[float, ...], observed: list[float]) -> str:
    """A vLLM-named page whose TTFT histogram has ``buckets`` (not vLLM's own)."""
    r = CollectorRegistry()
    Gauge("process_start_time_seconds", "s", registry=r).set(started)
    h = Histogram(
        "vllm:time_to_first_token_seconds", "t", ["model_name", "engine"], buckets=buckets,
        registry=r,
    )  # fmt: skip
    for v in observed:
        h.labels("m", "0").observe(v)
    return generate_latest(r).decode()


def test_different_bucket_bounds_are_not_merged_and_a_note_says_so() -> None:
    a = window(
        "a",
        histogram_page(1.0, (0.1, 1.0), []),
        histogram_page(1.0, (0.1, 1.0), [0.05]),
        histogram_page(1.0, (0.1, 1.0), [0.05]),
    )
    b = window(
        "b",
        histogram_page(2.0, (0.2, 2.0), []),
        histogram_page(2.0, (0.2, 2.0), [0.5]),
        histogram_page(2.0, (0.2, 2.0), [0.5]),
    )
    fleet = fleet_metrics([PageMetrics(REPLICA, "a", a), PageMetrics(REPLICA, "b", b)])
    assert fleet.whole is not None
    assert "server.ttft" in a.metrics and "server.ttft" not in fleet.whole.metrics
    assert any("bucket bounds differ" in n and "replica a" in n for n in fleet.whole.notes)


def test_kv_transfer_merges_over_the_decode_pool_and_a_missing_page_still_counts_the_rest() -> None:
    pages = []
    for k, seconds in enumerate((0.02, 0.2)):
        page = VllmPage(started=100.0 + k, nixl=True)
        before = page.text()
        page.transfer(seconds)
        page.request(queue_s=0.001, prefill_s=0.001, decode_s=0.5)
        pages.append(
            PageMetrics(DECODE, f"d{k}", window(f"d{k}", before, page.text(), page.text()))
        )
    prefill = VllmPage(started=50.0)
    before = prefill.text()
    prefill.request(queue_s=0.01, prefill_s=0.2, decode_s=0.0, output=1)
    pages.append(PageMetrics(PREFILL, "p0", window("p0", before, prefill.text(), prefill.text())))
    gone = ServerMetrics(source="http://p1/metrics", missing="GET http://p1/metrics: 404")
    pages.append(PageMetrics(PREFILL, "p1", gone))
    fleet = fleet_metrics(pages)
    decode = fleet.roles["decode"].metrics["server.kv_transfer"]
    assert decode["count"] == 2 and decode["p50"] == 25.0 and decode["max"] == 200.0
    assert fleet.whole is not None
    assert fleet.whole.metrics["server.kv_transfer"] == decode  # only decode pages have it
    assert fleet.roles["prefill"].metrics["server.requests"] == {"value": 1.0}  # p0 alone
    # disaggregated: each name from the pages where its phase runs, a request counted once
    assert fleet.whole.metrics["server.requests"] == {"value": 2.0}  # the decode pages'
    assert fleet.whole.metrics["server.prompt_tokens"] == {"value": 100.0}  # the prefill's
    assert (
        fleet.whole.metrics["server.prefill_time"]
        == fleet.roles["prefill"].metrics["server.prefill_time"]
    )
    assert fleet.whole.metrics["server.e2e"] == fleet.roles["decode"].metrics["server.e2e"]
    assert fleet.whole.metrics["server.preemptions"] == {"value": 0.0}  # every page
    assert any(n.startswith("disaggregated: the whole takes each name") for n in fleet.notes)
    assert any(
        n.startswith("prefill p1: no numbers (GET http://p1/metrics: 404)") for n in fleet.notes
    )
    assert fleet.requests == {"d0": 1.0, "d1": 1.0, "p0": 1.0}


def test_a_fleet_whose_pages_all_failed_has_no_numbers_and_says_why() -> None:
    gone = ServerMetrics(source="http://w/metrics", missing="GET http://w/metrics: 404")
    fleet = fleet_metrics([PageMetrics(REPLICA, "w", gone)])
    assert fleet.whole is not None and not fleet.whole.metrics
    assert (
        fleet.whole.missing
        == "no page of the fleet had numbers (replica w: GET http://w/metrics: 404)"
    )
    assert fleet.prefix_hit_rate is None and fleet.requests == {}
