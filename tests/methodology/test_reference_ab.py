"""A/B against a reference endpoint (``--llm-reference-endpoint``, issue 14 item 6).

Through the plugin: identical simulators pass, a slower candidate fails with
both sides in the failure message, JSON and JUnit, a bad value is a usage
error. Below it: the ABBA order, the block split, the paired rule on known
histograms, and the run options (workers, event logs, request fields) on
both sides.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from pytest_llmperf.apis.fields import RequestFields
from pytest_llmperf.client.endpoint import Endpoint, Timeouts
from pytest_llmperf.client.records import RequestRecord
from pytest_llmperf.methodology import LlmLoadgen, run_configurations
from pytest_llmperf.methodology.reference import ab_order, ab_stats, block_spec
from pytest_llmperf.results.accumulator import MetricsAccumulator
from pytest_llmperf.results.event_log import read_meta
from pytest_llmperf.sim import SimProcess, SimServer, start_sim_process
from pytest_llmperf.slo.paired import paired_checks
from pytest_llmperf.slo.regression import Thresholds
from pytest_llmperf.specs.perf import PerfSpec
from pytest_llmperf.specs.slo import parse_slo

SUITE = """
import pytest

@pytest.mark.llm_workload("synthetic", input_tokens=32, output_tokens=8, requests=40)
@pytest.mark.llm_load("concurrency", concurrency=4)
@pytest.mark.llm_slo("ttft.p50 < 5s", "tpot.p50 < 1s")
async def test_ab(llm_loadgen):
    await llm_loadgen.run()
"""
INI = "[pytest]\nasyncio_default_fixture_loop_scope = function\n"


@pytest.fixture
def slow_sim() -> Iterator[SimProcess]:
    with start_sim_process("fixed", overrides={"ttft_ms": 80, "itl_ms": 15}) as sim:
        yield sim


def test_identical_simulators_pass_with_both_sides_in_the_json(pytester: pytest.Pytester) -> None:
    pytester.makeini(INI)
    pytester.makepyfile(test_suite=SUITE)
    result = pytester.runpytest(
        "--llm-endpoint=sim:fixed", "--llm-reference-endpoint=sim:fixed", "--llm-json=r.json"
    )
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["*A/B reference endpoint: embedded simulator, profile fixed*"])
    (test,) = json.loads((pytester.path / "r.json").read_text())["tests"]
    (run,) = test["runs"]  # the candidate's merged blocks are the test's one run
    assert run["counts"]["completed"] == 40 and run["gated"]
    ab = run["reference"]
    assert ab["verdict"] == "unchanged" and ab["blocks"] == 4
    assert ab["order"] == ["A1", "B1", "B2", "A2", "A3", "B3", "B4", "A4"]
    assert ab["reference"]["counts"]["completed"] == 40
    assert ab["candidate"]["metrics"]["ttft"]["count"] == 40
    # two sim:fixed processes, independent of each other
    assert ab["reference_endpoint"]["url"] != test["endpoint"]["url"]
    names = {c["name"]: c for c in ab["checks"]}
    assert set(names) == {"ttft.p50", "tpot.p50"}  # the test's SLO statistics
    assert all(c["verdict"] == "unchanged" and c["reference"] > 0 for c in names.values())
    assert len(names["ttft.p50"]["block_log_ratios"]) == 4


def test_a_slower_candidate_fails_with_the_comparison_shown(
    pytester: pytest.Pytester, slow_sim: SimProcess
) -> None:
    pytester.makeini(INI)
    pytester.makepyfile(test_suite=SUITE)
    result = pytester.runpytest(
        f"--llm-endpoint={slow_sim.url}",
        "--llm-reference-endpoint=sim:fixed",
        "--llm-json=r.json",
        "--llm-html=r.html",
        "--junitxml=j.xml",
    )
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "*Worse than the reference endpoint http://*(embedded simulator, profile fixed) (A/B):",
            "*statistic*candidate*reference*change*allowed*p*blocks slower*verdict*",
            "*ttft.p50*run0*REGRESSED*",
        ]
    )
    (test,) = json.loads((pytester.path / "r.json").read_text())["tests"]
    ab = test["runs"][0]["reference"]
    assert ab["verdict"] == "regressed"
    ttft = next(c for c in ab["checks"] if c["name"] == "ttft.p50")
    assert ttft["candidate"] > 1.5 * ttft["reference"] and ttft["slower_blocks"] == 4
    (table,) = test["analyses"]  # the comparison's table, which the HTML report shows
    assert table["title"].startswith("A/B run0 against http://127.0.0.1:")
    assert table["ab_verdict"] == "regressed"
    html = (pytester.path / "r.html").read_text()
    assert "A/B run0 against" in html and "reference ms" in html and "regressed" in html
    junit = (pytester.path / "j.xml").read_text()
    assert "llm_ab[ttft.p50][run0].verdict" in junit and 'value="regressed"' in junit
    assert "llm_ab[ttft.p50][run0].reference" in junit


@pytest.mark.parametrize("value", ["ftp://example.com", "not a url"])
def test_a_bad_reference_is_a_usage_error_naming_the_option(
    pytester: pytest.Pytester, value: str
) -> None:
    pytester.makeini(INI)
    pytester.makepyfile(test_suite=SUITE)
    result = pytester.runpytest(f"--llm-reference-endpoint={value}")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--llm-reference-endpoint*"])


def test_an_unreachable_reference_stops_the_session_before_any_test(
    pytester: pytest.Pytester,
) -> None:
    pytester.makeini(INI)
    pytester.makepyfile(test_suite=SUITE)
    result = pytester.runpytest("--llm-reference-endpoint=http://127.0.0.1:9", "--llm-timeout=2")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--llm-reference-endpoint*"])


# -- below the plugin ------------------------------------------------------------------------


def spec(requests: int = 10, **load: object) -> PerfSpec:
    return PerfSpec.from_markers(
        (("synthetic",), {"input_tokens": 16, "output_tokens": 4, "requests": requests}),
        ((), dict(load or {"pattern": "concurrency", "concurrency": 2})),
        [],
    )


def test_blocks_alternate_abba_and_split_the_run_exactly() -> None:
    assert ab_order(2) == [(0, "candidate"), (0, "reference"), (1, "reference"), (1, "candidate")]
    run = spec(requests=10).run.with_overrides({"warmup": 3, "seed": 7})
    parts = [block_spec(run, k, 4) for k in range(4)]
    assert [p.requests for p in parts] == [3, 3, 2, 2]
    assert [p.warmup for p in parts] == [3, 0, 0, 0]
    assert [p.load.seed for p in parts] == [7, 8, 9, 10]
    assert ab_stats([]) == [("ttft", "p50"), ("ttft", "p99"), ("tpot", "p50"), ("tpot", "p99")]
    slos = [parse_slo("e2e.p90 < 2s"), parse_slo("error_rate < 1%")]
    assert ab_stats(slos) == [("e2e", "p90")]


def _block(ttft_ms: float, n: int = 200, jitter: float = 0.02) -> MetricsAccumulator:
    acc = MetricsAccumulator()
    for i in range(n):
        t = ttft_ms * (1 + jitter * ((i % 11) - 5) / 5)
        first = int(t * 1e6)
        record = RequestRecord(
            index=i,
            t_sched=1,
            t_send=1,
            t_first=first,
            t_last=first + 4_000_000,
            gaps_ns=[1_000_000] * 4,
            token_events=5,
        )
        acc.add(record)
    return acc


def test_the_paired_rule_on_known_blocks() -> None:
    stats = [("ttft", "p50")]
    same = paired_checks([_block(20)] * 4, [_block(20)] * 4, stats)
    assert same[0].verdict == "unchanged"
    slower = paired_checks([_block(24)] * 4, [_block(20)] * 4, stats)
    assert slower[0].verdict == "regressed" and slower[0].slower_blocks == 4
    assert slower[0].change == pytest.approx(0.2, abs=0.02)
    # within the threshold: significant but not worse by more than 10%
    assert paired_checks([_block(21)] * 4, [_block(20)] * 4, stats)[0].verdict == "unchanged"
    # one disturbed block pair cannot fail the test alone, however slow it was
    disturbed = [_block(60, n=1000), _block(20), _block(20), _block(20)]
    check = paired_checks(disturbed, [_block(20)] * 4, stats, thresholds=Thresholds(0.05))[0]
    assert check.change is not None and check.change > 0.05
    assert check.verdict == "unchanged" and check.slower_blocks == 1
    assert check.p_value is not None and check.p_value < 0.01  # the bootstrap alone would fail
    assert check.p_blocks is not None and check.p_blocks > 0.05
    # two disturbed blocks next to each other (A2 A3 in ABBA order) cannot either
    two = [_block(20), _block(60, n=1000), _block(60, n=1000), _block(20)]
    assert paired_checks(two, [_block(20)] * 4, stats)[0].verdict == "unchanged"
    faster = paired_checks([_block(15)] * 4, [_block(20)] * 4, stats)
    assert faster[0].verdict == "improved"
    # no minimum sample count (issue 36): 10 requests a side decide a p99 if they show it
    ten = paired_checks([_block(20, n=5)] * 2, [_block(20, n=5)] * 2, [("ttft", "p99")])
    assert ten[0].verdict == "unchanged" and ten[0].p_value is not None
    # 2 a side never could: inconclusive, saying how many would
    few = paired_checks([_block(20, n=1)] * 2, [_block(20, n=1)] * 2, [("ttft", "p99")])
    assert few[0].verdict == "inconclusive" and not few[0].note_only
    assert few[0].reason.startswith(
        "p99 cannot be decided at alpha 0.01 with 2 (reference) and 2 (candidate) samples"
    ), few[0].reason


@pytest.mark.asyncio
async def test_both_sides_run_with_the_session_workers_event_logs_and_fields(
    tmp_path: Path,
) -> None:
    async with (
        SimServer("fixed", ttft_ms=2, itl_ms=1) as a,
        SimServer("fixed", ttft_ms=2, itl_ms=1) as b,
    ):
        timeouts = Timeouts.from_seconds(20)
        fields = RequestFields(extra={"top_k": 5})
        gen = LlmLoadgen(
            Endpoint.from_env(a.url, api_key_env=None, timeouts=timeouts, fields=fields),
            spec(requests=8),
            reference=Endpoint.from_env(b.url, api_key_env=None, timeouts=timeouts),
            workers=2,
            events_dir=tmp_path,
            events_name="ab",
            scale=0.5,
            # 2 blocks a side (the default 4 is checked above, in a session): each block is
            # a run with 2 worker processes of its own, so 4 runs, not 8
            ab_blocks=2,
        )
        result = await gen.run()
        reference_url = b.url
    (ab,) = gen.comparisons
    assert [r.label for r in gen.results] == ["run0"]  # only the candidate's merged run
    assert result.counts["completed"] == 4 == ab.reference.counts["completed"]  # --llm-scale
    assert ab.blocks == 2 and ab.order == ["A1", "B1", "B2", "A2"]
    assert result.self_check["workers"] == 2 and ab.reference.self_check["workers"] == 2
    assert len(ab.events["candidate"]) == len(ab.events["reference"]) == 2
    meta = read_meta(ab.events["reference"][0])
    assert meta["label"] == "run0-reference-block1"
    assert all("reference" in Path(p).name for p in ab.events["reference"])
    assert all("reference" not in Path(p).name for p in ab.events["candidate"])
    assert len(list(tmp_path.glob("*.sqlite"))) == 4
    assert ab.reference_endpoint["url"] == reference_url + "/v1"


@pytest.mark.asyncio
async def test_warm_up_warms_the_reference_too() -> None:
    async with (
        SimServer("fixed", ttft_ms=2, itl_ms=1) as a,
        SimServer("fixed", ttft_ms=2, itl_ms=1) as b,
    ):
        gen = LlmLoadgen(
            Endpoint.from_env(a.url, api_key_env=None),
            spec(requests=4),
            reference=Endpoint.from_env(b.url, api_key_env=None),
        )
        await gen.warm_up(requests=4, probes=2, requests_per_probe=1, max_rounds=1)
        reference_url = b.url
    labels = [r.label for r in gen.results]
    assert "warm-up round 1 [reference]" in labels
    assert gen.comparisons == []  # warm-up runs are ungated: no A/B
    reference_run = next(r for r in gen.results if r.label == "warm-up round 1 [reference]")
    assert reference_run.endpoint["url"] == reference_url + "/v1" and not reference_run.gated


@pytest.mark.asyncio
async def test_configurations_collect_rows_with_several_workers() -> None:
    """Observers used to see nothing from worker processes: a comparison's per-request rows
    were silently empty under --llm-workers > 1. They are replayed from the event log."""
    async with (
        SimServer("fixed", ttft_ms=2, itl_ms=1) as a,
        SimServer("fixed", ttft_ms=4, itl_ms=1) as b,
    ):
        gen = LlmLoadgen(Endpoint.from_env(a.url, api_key_env=None), spec(requests=6), workers=2)
        runs = await run_configurations(gen, {"A": None, "B": b.url}, repetitions=3)
    assert [len(rows) for rows in runs.rows["A"]] == [6, 6, 6]
    assert [len(rows) for rows in runs.rows["B"]] == [6, 6, 6]
    assert all(r.events_path is None for r in gen.results)  # the replay log was temporary


def test_other_configurations_get_the_session_request_fields() -> None:
    fields = RequestFields(extra={"top_k": 5})
    gen = LlmLoadgen(
        Endpoint.from_env("http://127.0.0.1:9", api_key_env=None, fields=fields), spec()
    )
    other = gen.for_endpoint("http://127.0.0.2:8000")
    assert other.endpoint.fields == fields
