"""A quiet green (issue 36): the output-length warning is said where ``max_tokens`` was
meant as the length and the outputs fell short of it, with what to do; not where it is a
cap (a structured output or a tool call, which ends where its JSON or call ends; a
workload with ``ignore_eos=False``), though ``token_lengths`` records the lengths.

One session against a simulator that refuses ``ignore_eos`` (unknown fields are
refused, as OpenAI's API does) and stops 90% of free-text requests early.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from pytest_llmperf.results.run_result import token_length_warnings
from pytest_llmperf.sim import SimProcess, start_sim_process

SCHEMA = {
    "type": "object",
    "properties": {"ok": {"type": "boolean"}, "n": {"type": "integer", "maximum": 9}},
    "required": ["ok", "n"],
    "additionalProperties": False,
}
SUITE = f"""
import pytest

def workload(**params):
    return pytest.mark.llm_workload(
        "synthetic", input_tokens=32, output_tokens=64, requests=20, **params
    )

@workload(structured={SCHEMA!r})
@pytest.mark.llm_load("concurrency", concurrency=4)
async def test_structured(llm_loadgen):
    await llm_loadgen.run()

@workload(tools="sample", tool_choice="get_weather")
@pytest.mark.llm_load("concurrency", concurrency=4)
async def test_tool_call(llm_loadgen):
    await llm_loadgen.run()

@workload(ignore_eos=False)
@pytest.mark.llm_load("concurrency", concurrency=4)
async def test_natural_lengths(llm_loadgen):
    await llm_loadgen.run()

@workload()
@pytest.mark.llm_load("concurrency", concurrency=4)
async def test_fixed_lengths(llm_loadgen):
    await llm_loadgen.run()
"""


@pytest.fixture(scope="module")
def early_stopping_sim() -> Iterator[SimProcess]:
    sim = start_sim_process("fixed", overrides={"strict_fields": "true", "early_stop_prob": 0.9})
    try:
        yield sim
    finally:
        sim.stop()


def test_only_outputs_meant_to_be_long_are_warned_of(
    pytester: pytest.Pytester, early_stopping_sim: SimProcess
) -> None:
    pytester.makepyfile(test_lengths=SUITE)
    result = pytester.runpytest(
        f"--llm-endpoint={early_stopping_sim.url}", "--llm-json=out.json", "-p", "no:cacheprovider"
    )
    result.assert_outcomes(passed=4, warnings=1)
    report = json.loads((pytester.path / "out.json").read_text())
    lengths: dict[str, dict[str, Any]] = {
        t["nodeid"].split("::")[1]: t["runs"][0]["token_lengths"] for t in report["tests"]
    }
    for name in ("test_structured", "test_tool_call", "test_natural_lengths"):
        # short of max_tokens, and recorded so, but ended where it was meant to: quiet
        assert lengths[name]["output_deviation"] < -0.1, (name, lengths[name])
        assert lengths[name]["warnings"] == [], (name, lengths[name])
    (warning,) = lengths["test_fixed_lengths"]["warnings"]
    assert warning.startswith("outputs were -"), warning
    assert "the server refused ignore_eos" in warning, warning
    assert "llm_workload(..., ignore_eos=False)" in warning, warning  # what to do
    text = result.stdout.str()
    assert text.count("off the requested length") == 2, text  # its terminal line, its warning
    # where outputs fell short, the endpoint's refusal of ignore_eos is said once too
    assert text.count("endpoint: server refused ignore_eos") == 1, text
    result.stdout.fnmatch_lines(["*LlmPerfTokenLengthWarning: run0: outputs were -*"])


LENGTHS = {
    "output_requested_mean": 128.0,
    "output_server_mean": 40.0,
    "output_deviation": -0.6875,
    "input_deviation": 0.0,
}


@pytest.mark.parametrize(
    ("workload", "fields", "warned", "advice"),
    [
        ({"output_control": "max_tokens", "structured": "ticket"}, {}, False, ""),
        ({"output_control": "max_tokens", "tools": ["f"]}, {}, False, ""),
        ({"output_control": "max_tokens"}, {"ignore_eos": False}, False, ""),  # ignore_eos=False
        ({"output_control": "max_tokens + ignore_eos"}, {}, True, "check the server's output"),
        (
            {"output_control": "max_tokens + ignore_eos"},
            {"ignore_eos": False},
            True,
            "use a server that takes ignore_eos",
        ),
        ({}, {}, True, "ignore_eos=False"),  # a workload that does not say: as before
    ],
)
def test_short_outputs_are_said_only_where_the_length_was_a_target(
    workload: dict[str, Any], fields: dict[str, Any], warned: bool, advice: str
) -> None:
    said = token_length_warnings(LENGTHS, fields, workload)
    assert bool(said) is warned, said
    if warned:
        assert said[0].startswith("outputs were -69% off the requested length (40 vs 128")
        assert advice in said[0], said


def test_outputs_longer_than_asked_are_said_even_where_max_tokens_is_a_cap() -> None:
    longer = {**LENGTHS, "output_server_mean": 160.0, "output_deviation": 0.25}
    (said,) = token_length_warnings(longer, {}, {"output_control": "max_tokens"})
    assert "+25%" in said and "generated past max_tokens" in said, said
