"""The server's own metrics end to end: markers -> run -> the simulator's /metrics -> verdicts.

The simulator exports vLLM's metric names (and its own identity) on ``/metrics``; its
``tiny`` profile has a KV cache too small for a handful of long requests at once,
so it preempts within seconds, while ``llama-3.1-8b-h100`` at a low rate never does.
"""

from __future__ import annotations

import json

import pytest

PREEMPTS = """
import pytest

@pytest.mark.llm_endpoint("{profile}")
@pytest.mark.llm_workload(
    "synthetic", input_tokens=300, output_tokens={output}, requests={requests}
)
@pytest.mark.llm_load("concurrency", concurrency={concurrency})
@pytest.mark.llm_slo("server.preemptions == 0", "error_rate < 1%")
async def test_no_preemptions(llm_loadgen):
    await llm_loadgen.run()
"""


def _report(pytester: pytest.Pytester) -> dict:
    return json.loads((pytester.path / "out.json").read_text())


def test_preemptions_slo_fails_where_the_server_preempts(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(PREEMPTS.format(profile="sim:tiny", requests=8, concurrency=8, output=300))
    result = pytester.runpytest("--llm-json=out.json")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*server.preemptions == 0*FAIL*"])
    (run,) = _report(pytester)["tests"][0]["runs"]
    server = run["server_metrics"]
    assert server["family"] == "sim" and server["missing"] is None
    assert server["metrics"]["server.preemptions"]["value"] > 0
    assert server["metrics"]["server.requests"]["value"] == run["counts"]["completed"] == 8


def test_preemptions_slo_passes_at_low_load_on_a_large_server(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        PREEMPTS.format(profile="sim:llama-3.1-8b-h100", requests=8, concurrency=2, output=64)
    )
    result = pytester.runpytest("--llm-json=out.json")
    result.assert_outcomes(passed=1)
    (run,) = _report(pytester)["tests"][0]["runs"]
    assert run["server_metrics"]["metrics"]["server.preemptions"]["value"] == 0


def test_off_means_no_scrapes_and_server_slos_inconclusive(pytester: pytest.Pytester) -> None:
    """Without scrapes only the responses' own timings are left (the simulator returns
    vLLM's per-request ``metrics``): latencies, but no preemption count to judge."""
    pytester.makepyfile(
        PREEMPTS.format(profile="sim:llama-3.1-8b-h100", requests=4, concurrency=2, output=8)
    )
    result = pytester.runpytest("--llm-json=out.json", "--llm-server-metrics=off")
    result.assert_outcomes(failed=1)  # inconclusive fails under the default policy
    result.stdout.fnmatch_lines(["*server.preemptions == 0*--llm-server-metrics off*"])
    report = _report(pytester)
    (run,) = report["tests"][0]["runs"]
    server = run["server_metrics"]
    assert server["source"] == "responses" and server["scrapes"] == 0
    assert "server.preemptions" not in server["metrics"]
    assert server["metrics"]["server.queue_time"]["count"] == 4
    assert report["tests"][0]["endpoint"]["server_metrics"] == "off"


@pytest.mark.parametrize(
    ("option", "says"),
    [
        ("--llm-server-metrics=fast", "--llm-server-metrics: expected auto, off"),
        ("--llm-server-metrics=-1", "--llm-server-metrics"),
        ("--llm-reset-cache=maybe", "--llm-reset-cache: must be one of auto, off, got 'maybe'"),
    ],
)
def test_bad_option_values_are_usage_errors_naming_them(
    pytester: pytest.Pytester, option: str, says: str
) -> None:
    pytester.makepyfile("def test_x():\n    pass\n")
    result = pytester.runpytest(option)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert says in result.stderr.str() + result.stdout.str()


def test_the_history_keeps_the_servers_metrics_for_their_trends(
    pytester: pytest.Pytester,
) -> None:
    """``--llm-history``: each run's ``server.*`` statistics are stored beside the client's,
    so ``llmperf-history trend TEST server.queue_time --stat p99`` has a series."""
    from pytest_llmperf.history.store import HistoryStore
    from pytest_llmperf.history.trends import trend_series, trend_table

    pytester.makepyfile(
        PREEMPTS.format(profile="sim:llama-3.1-8b-h100", requests=6, concurrency=2, output=8)
    )
    db = pytester.path / "history.sqlite"
    for _ in range(2):
        pytester.runpytest(f"--llm-history={db}").assert_outcomes(passed=1)
    test = "test_the_history_keeps_the_servers_metrics_for_their_trends.py::test_no_preemptions"
    with HistoryStore.open(str(db)) as store:
        (series,) = trend_series(store, test, "server.queue_time", "p99")
        assert len(series.points) == 2 and all(p.value > 0 for p in series.points)
        (counts,) = trend_series(store, test, "server.requests", "value")
        assert [p.value for p in counts.points] == [6.0, 6.0]
        assert "server.queue_time p99" in trend_table(store, test, "server.queue_time", "p99")


def test_a_baseline_keeps_the_servers_metrics_and_compares_those_named(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile(
        PREEMPTS.format(profile="sim:llama-3.1-8b-h100", requests=30, concurrency=4, output=8)
    )
    pytester.runpytest("--llm-baseline-save=b.json").assert_outcomes(passed=1)
    stored = json.loads((pytester.path / "b.json").read_text())
    (test,) = stored["tests"].values()
    assert test["runs"]["run0"]["server_metrics"]["metrics"]["server.requests"]["value"] == 30
    assert stored["fingerprint"]["server"]["family"] == "sim"
    result = pytester.runpytest(
        "--llm-baseline-compare=b.json",
        # the comparison is what is tested, not this machine: a busy one moves the
        # bucketed queue time's p50 across a bucket (10 -> 20 ms, seen) and TTFT by 10%
        "--llm-baseline-threshold=server.queue_time.p50=1000%,server.e2e.mean=1000%,1000%",
        "--llm-json=out.json",
    )
    result.assert_outcomes(passed=1)
    report = _report(pytester)
    checks = {c["name"]: c for c in report["tests"][0]["baseline"]}
    assert {"server.queue_time.p50", "server.e2e.mean", "ttft.p50"} <= set(checks)
    assert checks["server.e2e.mean"]["verdict"] in ("unchanged", "improved")
    assert checks["server.e2e.mean"]["comparable"] is True  # the same simulator profile
    assert report["session"]["baseline"]["comparable"] is True
