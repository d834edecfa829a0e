"""Structured outputs, adapters and greedy outputs end to end against the simulator:
markers -> requests -> the simulator's outputs -> validity, per-model results and
verdicts, output_match against a saved baseline, output_consistency alone."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from pytest_llmperf.sim import SimProcess, start_sim_process

SCHEMA = {
    "type": "object",
    "properties": {
        "title": {"type": "string", "maxLength": 40},
        "count": {"type": "integer", "minimum": 0, "maximum": 9},
    },
    "required": ["title", "count"],
}

STRUCTURED_ADAPTERS = f"""
import pytest

@pytest.mark.llm_workload(
    "synthetic", input_tokens=16, output_tokens=64, requests=60, seed=5,
    structured={SCHEMA!r}, adapters={{"sim-lora-1": 0.4, "sim-lora-2": 0.4}},
)
@pytest.mark.llm_load("concurrency", concurrency=8)
@pytest.mark.llm_slo("valid_rate >= 100%", "error_rate < 1%")
@pytest.mark.llm_slo("ttft.max < 30s", per_model=True)
async def test_paths(llm_loadgen):
    result = await llm_loadgen.run()
    assert result.counts["completed"] == 60
"""

# 8 output tokens: enough for a changed output to part from the original (at a seeded
# token in 1..7) and short for the alone pass, which sends 64 samples one at a time
# (20 ms + 7 x 5 ms each on the fixed profile, not 20 ms + 23 x 5 ms)
GREEDY = """
import pytest

@pytest.mark.llm_workload(
    "synthetic", input_tokens=16, output_tokens=8, requests=100, seed=9, greedy=True
)
@pytest.mark.llm_load("concurrency", concurrency=8)
@pytest.mark.llm_slo({slos})
async def test_greedy(llm_loadgen):
    await llm_loadgen.run()
"""


def _report(pytester: pytest.Pytester, name: str = "out.json") -> dict[str, Any]:
    report: dict[str, Any] = json.loads((pytester.path / name).read_text())
    return report


@pytest.fixture(scope="module")
def plain_sim() -> Iterator[SimProcess]:
    """A ``fixed`` simulator process: the same server as :func:`changing_sim` but for
    its fault (a URL endpoint sizes prompts with the server's /tokenize, as the other
    does, so both send the same prompts)."""
    sim = start_sim_process("fixed")
    try:
        yield sim
    finally:
        sim.stop()


@pytest.fixture(scope="module")
def changing_sim() -> Iterator[SimProcess]:
    """A ``fixed`` simulator whose outputs change on 10% of the prompts."""
    sim = start_sim_process("fixed", overrides={"output_change_rate": 0.1})
    try:
        yield sim
    finally:
        sim.stop()


def test_structured_outputs_across_adapters_are_valid_and_broken_down(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile(STRUCTURED_ADAPTERS)
    result = pytester.runpytest("--llm-json=out.json")
    result.assert_outcomes(passed=1)
    (test,) = _report(pytester)["tests"]
    (run,) = test["runs"]
    assert run["counts"]["invalid"] == 0 and run["counts"]["checked"] == 60
    assert run["metrics"]["valid_rate"] == 1.0 and run["invalid_samples"] == []
    by_model = run["by_model"]
    assert set(by_model) == {"sim-lora-1", "sim-lora-2", "sim-fixed"}
    assert sum(m["counts"]["completed"] for m in by_model.values()) == 60
    for name in ("sim-lora-1", "sim-lora-2"):  # 0.4 of 60 = 24, drawn: well within 10..38
        assert 10 <= by_model[name]["counts"]["issued"] <= 38
        assert by_model[name]["metrics"]["ttft"]["count"] == by_model[name]["counts"]["completed"]
    per_model = [v for v in test["slos"] if v.get("model")]
    assert sorted(v["model"] for v in per_model) == sorted(by_model)
    assert all(v["verdict"] == "pass" and v["expr"] == "ttft.max < 30s" for v in per_model)


@pytest.fixture(scope="module")
def unconstrained_sim() -> Iterator[SimProcess]:
    """A ``fixed`` simulator that does not constrain decoding to the schema (as a server
    told not to): its JSON has the schema's shape, not its bounds."""
    sim = start_sim_process("fixed", overrides={"constrain_outputs": "false"})
    try:
        yield sim
    finally:
        sim.stop()


def test_outputs_a_schema_does_not_allow_are_invalid_with_the_reason(
    pytester: pytest.Pytester, unconstrained_sim: SimProcess
) -> None:
    strict = {"type": "object", "properties": {"x": {"type": "string", "maxLength": 0}},
              "required": ["x"]}  # fmt: skip
    pytester.makepyfile(
        STRUCTURED_ADAPTERS.replace(repr(SCHEMA), repr(strict))
        .replace(', adapters={"sim-lora-1": 0.4, "sim-lora-2": 0.4}', "")
        .replace('@pytest.mark.llm_slo("ttft.max < 30s", per_model=True)\n', "")
    )
    result = pytester.runpytest(f"--llm-endpoint={unconstrained_sim.url}", "--llm-json=out.json")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*valid_rate >= 100%*FAIL*"])
    (run,) = _report(pytester)["tests"][0]["runs"]
    assert run["counts"]["completed"] == 60  # invalid outputs are completed requests
    assert run["counts"]["invalid"] > 0 and run["metrics"]["valid_rate"] < 1.0
    assert "by_model" not in run
    (first, *_) = run["invalid_samples"]
    assert first["kind"] == "schema" and "x" in first["message"] and first["count"] > 0


def test_greedy_outputs_match_their_baseline_and_a_changed_server_fails(
    pytester: pytest.Pytester, plain_sim: SimProcess, changing_sim: SimProcess
) -> None:
    pytester.makepyfile(GREEDY.format(slos='"output_match >= 99%"'))
    plain = f"--llm-endpoint={plain_sim.url}"
    saved = pytester.runpytest(plain, "--llm-baseline-save=b.json")
    saved.assert_outcomes(failed=1)  # no other side yet: inconclusive fails by default
    saved.stdout.fnmatch_lines(["*output_match >= 99%*no baseline, history or reference*"])
    stored = json.loads((pytester.path / "b.json").read_text())
    (entry,) = stored["tests"].values()
    assert len(entry["runs"]["run0"]["state"]["outputs"]) == 100

    # the outputs are what is compared here; latency against a baseline taken moments
    # before on a busy machine (the suite runs under -n 2) is not: a wide threshold
    wide = "--llm-baseline-threshold=1000%"
    same = pytester.runpytest(plain, "--llm-baseline-compare=b.json", "--llm-json=same.json", wide)
    same.assert_outcomes(passed=1)
    (run,) = _report(pytester, "same.json")["tests"][0]["runs"]
    assert run["output_match"]["share"] == 1.0 and run["output_match"]["compared"] == 100
    assert run["output_match"]["against"] == "baseline" and len(run["outputs"]) == 100

    changed = pytester.runpytest(
        f"--llm-endpoint={changing_sim.url}",
        "--llm-baseline-compare=b.json",
        "--llm-json=changed.json",
        wide,
    )
    changed.assert_outcomes(failed=1)
    changed.stdout.fnmatch_lines(
        ["*output_match >= 99%*FAIL*", "*samples differ from baseline b.json*"]
    )
    (run,) = _report(pytester, "changed.json")["tests"][0]["runs"]
    match = run["output_match"]
    # 10% of the prompts changed (by a hash of each): 13 of these 100 samples, every run
    assert 0.8 <= match["share"] <= 0.95, match
    assert match["mismatched"] == len(match["mismatches"])
    assert all(m["position"] is not None and m["position"] >= 0 for m in match["mismatches"])


def test_output_consistency_sends_the_samples_again_alone(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(GREEDY.format(slos='"output_consistency >= 99%"'))
    result = pytester.runpytest("--llm-json=out.json")
    result.assert_outcomes(passed=1)
    (run,) = _report(pytester)["tests"][0]["runs"]
    consistency = run["output_consistency"]
    assert consistency["against"] == "alone" and consistency["compared"] == 64  # its cap
    assert consistency["share"] == 1.0
    assert run["counts"]["issued"] == 100  # the alone pass is not part of the run


def test_without_a_baseline_output_match_compares_with_the_reference_endpoint(
    pytester: pytest.Pytester, plain_sim: SimProcess, changing_sim: SimProcess
) -> None:
    pytester.makepyfile(GREEDY.format(slos='"output_match >= 99%"'))
    result = pytester.runpytest(
        f"--llm-endpoint={changing_sim.url}",
        f"--llm-reference-endpoint={plain_sim.url}",
        "--llm-json=out.json",
    )
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*output_match >= 99%*FAIL*"])
    (run,) = _report(pytester)["tests"][0]["runs"]
    match = run["output_match"]
    assert match["against"] == "reference" and plain_sim.url in match["compared_with"]
    assert 0 < match["compared"] <= 100 and match["share"] < 1.0
    assert "output_consistency" not in run  # another side: no alone pass unless asked
