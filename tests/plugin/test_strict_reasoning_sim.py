"""A whole session against the simulator's strict-reasoning profile, as a user runs it.

The profile refuses unknown request fields like the OpenAI API, streams 16
reasoning tokens before the answer, and sends a third of its deltas as
``"content": ""``: the session must negotiate ``ignore_eos`` away, complete
every request, count every token, and time ``ttfo`` after the reasoning.
"""

from __future__ import annotations

import json

import pytest

SUITE = """
import pytest

@pytest.mark.llm_workload("synthetic", input_tokens=32, output_tokens=40, requests=30)
@pytest.mark.llm_load("concurrency", concurrency=4)
@pytest.mark.llm_slo("error_rate < 1%", "ttfo.p50 < 2s")
async def test_reasoning(llm_loadgen):
    result = await llm_loadgen.run()
    assert result.metrics["ttfo"].p(50) > result.metrics["ttft"].p(50)
"""


def test_strict_reasoning_simulator_session(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_reasoning=SUITE)
    result = pytester.runpytest(
        "--llm-endpoint=sim:strict-reasoning", "--llm-json=report.json", "-p", "no:cacheprovider"
    )
    assert result.ret == 0, result.stdout.str()
    report = json.loads((pytester.path / "report.json").read_text())
    fields = report["endpoint"]["request_fields"]
    assert fields["ignore_eos"] is False and "ignore_eos" in fields["refused"]
    [run] = report["tests"][0]["runs"]
    assert run["counts"]["completed"] == 30 and run["error_samples"] == []
    metrics, lengths = run["metrics"], run["token_lengths"]
    assert metrics["token_count_source"] == "usage"
    assert metrics["reasoning_tokens"] == 30 * 16
    # one ITL gap per token after the first: every token is a token event, empty ones too
    assert lengths["output_events_mean"] == lengths["output_server_mean"] == 40
    assert metrics["itl"]["count"] == 30 * 39
    assert lengths["input_server_mean"] == lengths["input_requested_mean"] == 32
    assert lengths["warnings"] == []
    # every output reached its length: the refusal changed nothing measured, so the JSON
    # records it and the terminal of this green run says nothing of it (issue 36)
    assert any("refused ignore_eos" in note for note in fields["notes"]), fields
    assert "refused ignore_eos" not in result.stdout.str()
