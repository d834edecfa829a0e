"""``--llm-server-metrics`` values, the simulator's page under the common names, and the
mapping table's sources (each names a metric its family's page really has)."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest
from prom_pages import LLAMACPP_PAGE, VllmPage

from pytest_llmperf.errors import LlmPerfUsageError
from pytest_llmperf.server_metrics.exposition import Scrape, parse_scrape
from pytest_llmperf.server_metrics.families import (
    MAPPINGS,
    SIM_IDENTITY,
    Counter,
    Ratio,
    family_of,
    mapping_rows,
    metric_names,
)
from pytest_llmperf.server_metrics.source import (
    MetricsOption,
    ServerMetricsSource,
    metrics_url,
    parse_option,
)
from pytest_llmperf.server_metrics.summarise import summarise_window
from pytest_llmperf.server_metrics.summary import COMMON_METRICS, ServerFamily
from pytest_llmperf.sim import SimServer
from pytest_llmperf.sim.prometheus import SIM_INFO


@pytest.mark.parametrize(
    ("value", "parsed"),
    [
        ("auto", MetricsOption("auto")),
        (None, MetricsOption("auto")),
        ("", MetricsOption("auto")),
        (" OFF ", MetricsOption("off")),
        ("2", MetricsOption("auto", 2.0)),
        ("0.5s", MetricsOption("auto", 0.5)),
        ("http://w1:8001/metrics", MetricsOption("url", url="http://w1:8001/metrics")),
        ("https://h/x/metrics", MetricsOption("url", url="https://h/x/metrics")),
    ],
)
def test_option_values(value: object, parsed: MetricsOption) -> None:
    assert parse_option(value) == parsed


@pytest.mark.parametrize(
    "value", ["sometimes", "0", "-1", "nan", "3600", "1e9", "ftp://h/m", "http://"]
)
def test_bad_option_values_are_usage_errors_naming_the_option(value: str) -> None:
    with pytest.raises(LlmPerfUsageError) as caught:
        parse_option(value)
    assert caught.value.where == "--llm-server-metrics" and repr(value) in str(caught.value)


def test_metrics_url_and_the_header_note() -> None:
    assert metrics_url("http://h:8000/v1") == "http://h:8000/metrics"
    assert metrics_url("https://h/serve/v1") == "https://h/serve/metrics"
    source = ServerMetricsSource("http://u:pw@h:8000/metrics", 1.0, ServerFamily.LLAMACPP)
    assert source.describe() == "llama.cpp at http://***@h:8000/metrics every 1 s"


def scrape(text: str, t: float) -> Scrape:
    got = parse_scrape(text, int(t * 1e9))
    assert isinstance(got, Scrape), got
    return got


@pytest.mark.asyncio
async def test_the_simulators_page_has_every_common_name_it_can_honestly_produce() -> None:
    """Everything but speculative decoding, which the simulator does not model."""
    async with (
        SimServer("tiny", speedup=20.0) as sim,
        httpx.AsyncClient(base_url=sim.url, timeout=30) as c,
    ):
        before = scrape((await c.get("/metrics")).text, 0)
        shared = " ".join(f"s{i}" for i in range(200))  # 12 full blocks of 16 shared
        for i in range(3):  # one after the other: the later ones hit the cache
            body = {"prompt": f"{shared} q{i}", "max_tokens": 20, "stream": True}
            async with c.stream("POST", "/v1/completions", json=body) as r:
                async for _ in r.aiter_lines():
                    pass
        page = (await c.get("/metrics")).text
        url = sim.url
    during, after = scrape(page, 1), scrape(page, 2)
    assert family_of(before) is ServerFamily.SIM and SIM_INFO == SIM_IDENTITY
    assert before.process_start and before.process_start == after.process_start
    out = summarise_window(url, ServerFamily.SIM, before, after, [during], 0)
    assert out.missing is None
    # no speculative decoding, and one engine: no KV transfer (a disaggregated profile has one)
    expected = set(COMMON_METRICS) - {"server.spec_decode_acceptance", "server.kv_transfer"}
    assert set(out.metrics) == expected
    assert out.metrics["server.requests"]["value"] == 3
    assert out.metrics["server.generation_tokens"]["value"] == 60
    assert 0.5 < out.metrics["server.prefix_cache_hit_rate"]["value"] < 1
    for name in ("server.queue_time", "server.prefill_time", "server.decode_time", "server.e2e"):
        assert out.metrics[name]["count"] == 3
    assert out.metrics["server.ttft"]["count"] == 3 and out.metrics["server.itl"]["count"] == 57


def test_a_vllm_page_and_a_llamacpp_page_under_the_common_names() -> None:
    page = VllmPage()
    start = scrape(page.text(), 0)
    page.request(queue_s=0.02, prefill_s=0.01, decode_s=0.5, prompt=64, output=8)
    vllm = summarise_window("u", ServerFamily.VLLM, start, scrape(page.text(), 1), [], 0)
    assert {"server.queue_time", "server.ttft", "server.requests"} <= set(vllm.metrics)
    a = scrape(
        LLAMACPP_PAGE.format(prompt=100, cached=0, predicted=10, processing=0, deferred=0), 0
    )
    mid = LLAMACPP_PAGE.format(prompt=150, cached=50, predicted=30, processing=2, deferred=3)
    b = scrape(
        LLAMACPP_PAGE.format(prompt=150, cached=150, predicted=40, processing=0, deferred=0), 2
    )
    out = summarise_window("u", ServerFamily.LLAMACPP, a, b, [scrape(mid, 1)], 0)
    assert out.metrics == {
        "server.running": {"max": 2.0, "mean": 2.0, "min": 2.0},
        "server.waiting": {"max": 3.0, "mean": 3.0, "min": 3.0},
        "server.prefix_cache_hit_rate": {"value": 0.75},  # 150 cached of 50 + 150 prompt tokens
        "server.prompt_tokens": {"value": 200.0},
        "server.generation_tokens": {"value": 30.0},
    }
    assert not out.notes  # no speculative decoding configured: absent, nothing to say


def test_an_unknown_servers_metrics_are_kept_by_their_own_names() -> None:
    one = scrape("# TYPE my_requests_total counter\nmy_requests_total 5\nmy_queue 2\n", 0)
    two = scrape("# TYPE my_requests_total counter\nmy_requests_total 12\nmy_queue 7\n", 2)
    mid = scrape("# TYPE my_requests_total counter\nmy_requests_total 9\nmy_queue 4\n", 1)
    out = summarise_window("u", ServerFamily.UNKNOWN, one, two, [mid], 0)
    assert out.metrics == {} and out.raw == {"my_requests_total": 7.0, "my_queue": 4.0}


def test_every_mapped_vllm_metric_is_on_a_vllm_page() -> None:
    """The table names metrics the page really has (spelled as vLLM writes them)."""
    names = scrape(VllmPage(nixl=True).text(), 0).names
    assert metric_names(ServerFamily.VLLM) <= names
    llamacpp = scrape(
        LLAMACPP_PAGE.format(prompt=1, cached=1, predicted=1, processing=0, deferred=0), 0
    )
    missing = metric_names(ServerFamily.LLAMACPP) - llamacpp.names
    assert missing == {"llamacpp:kv_cache_usage_ratio"}  # older builds only, said in the table


def test_the_mapping_covers_only_common_names_and_prints_as_a_table() -> None:
    for family, mapping in MAPPINGS.items():
        assert set(mapping) <= set(COMMON_METRICS), family
        for sources in mapping.values():
            for src in sources:
                if isinstance(src, Counter | Ratio):
                    names = src.metrics if isinstance(src, Counter) else src.numerator
                    assert all(n.endswith("_total") or family is ServerFamily.TGI for n in names)
    rows = dict(mapping_rows())
    assert list(rows) == list(COMMON_METRICS)
    assert rows["server.queue_time"][ServerFamily.VLLM] == (
        "histogram `vllm:request_queue_time_seconds` (bucket deltas, s → ms)"
    )
    assert ServerFamily.LLAMACPP not in rows["server.ttft"]  # no histograms in llama.cpp


def test_the_docs_table_is_the_mapping() -> None:
    """docs/server-metrics.md prints the mapping: each cell as :func:`mapping_rows` has it."""
    doc = (Path(__file__).parents[2] / "docs" / "server-metrics.md").read_text()
    for name, cells in mapping_rows():
        row = next(line for line in doc.splitlines() if line.startswith(f"| `{name}` |"))
        for cell in cells.values():
            assert f"| {cell} |" in row, (name, cell)
