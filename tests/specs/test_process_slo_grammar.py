"""The server process's SLOs: ``startup.ready_s < 90s``, ``server.rss_growth_mb < 50``: one
value per run, no statistic, their own units, and clear errors."""

from __future__ import annotations

import pytest

from pytest_llmperf.errors import LlmPerfUsageError
from pytest_llmperf.specs.process_names import PROCESS_METRICS, process_value
from pytest_llmperf.specs.slo import parse_slo


@pytest.mark.parametrize(
    ("expr", "metric", "target", "unit"),
    [
        ("startup.ready_s < 90s", "startup.ready_s", 90.0, "s"),
        ("startup.ready_s < 90", "startup.ready_s", 90.0, "s"),
        ("startup.first_token_s <= 500ms", "startup.first_token_s", 0.5, "s"),
        ("server.rss_max_mb < 2GB", "server.rss_max_mb", 2048.0, "MB"),
        ("server.rss_growth_mb < 50", "server.rss_growth_mb", 50.0, "MB"),
        ("server.rss_growth_mb < 50MB", "server.rss_growth_mb", 50.0, "MB"),
        ("server.gpu_mem_max_mb < 70GB", "server.gpu_mem_max_mb", 71680.0, "MB"),
        ("server.cpu_s < 1500ms", "server.cpu_s", 1.5, "s"),
        ("server.cpu_ms_per_output_token < 2", "server.cpu_ms_per_output_token", 2.0, "ms"),
        ("server.cpu_ms_per_output_token < 500us", "server.cpu_ms_per_output_token", 0.5, "ms"),
    ],
)
def test_process_slos_parse_to_their_canonical_unit(
    expr: str, metric: str, target: float, unit: str
) -> None:
    slo = parse_slo(expr)
    assert (slo.metric, slo.stat, slo.unit) == (metric, None, unit)
    assert slo.target == pytest.approx(target)
    assert slo.is_process and not slo.is_server and not slo.is_latency
    assert slo.name == metric


def test_the_servers_scraped_metrics_stay_on_the_metrics_path() -> None:
    slo = parse_slo("server.queue_time.p99 < 50ms")
    assert slo.is_server and not slo.is_process


@pytest.mark.parametrize(
    ("expr", "said"),
    [
        ("startup.load_s < 9s", "unknown startup metric 'startup.load_s'; known: "
         "startup.ready_s, startup.first_token_s"),
        ("startup.ready_s.p99 < 9s", "'startup.ready_s' is one value per run of the server "
         "process and takes no statistic (got 'p99')"),
        ("server.rss_max_mb.max < 900", "takes no statistic (got 'max')"),
        ("server.rss_max_mb < 900ms", "bad unit 'ms' for server.rss_max_mb (in MB); use 'MB', "
         "'GB' or no unit"),
        ("startup.ready_s < 9MB", "bad unit 'MB' for startup.ready_s (in s); use 's', 'ms' or "
         "no unit"),
        ("server.rss < 9", "known: server.queue_time"),
    ],
)  # fmt: skip
def test_mistakes_are_usage_errors_naming_what_is_accepted(expr: str, said: str) -> None:
    with pytest.raises(LlmPerfUsageError) as caught:
        parse_slo(expr)
    assert said in str(caught.value)
    if expr.startswith("server.rss <"):  # the process names are listed among the known
        assert "server.rss_growth_mb" in str(caught.value)


def test_values_are_read_from_the_block_by_name() -> None:
    block = {"startup": {"ready_s": 41.2}, "resources": {"rss_max_mb": 830, "gpu_mem_max_mb": None}}
    assert process_value(block, "startup.ready_s") == 41.2
    assert process_value(block, "server.rss_max_mb") == 830.0
    assert process_value(block, "server.gpu_mem_max_mb") is None
    assert process_value(None, "startup.ready_s") is None
    assert set(PROCESS_METRICS) == {
        "startup.ready_s",
        "startup.first_token_s",
        "server.rss_max_mb",
        "server.rss_growth_mb",
        "server.gpu_mem_max_mb",
        "server.cpu_s",
        "server.cpu_ms_per_output_token",
    }
