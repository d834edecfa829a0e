"""Which API a test drives: ``--llm-api`` for the session, ``llm_endpoint(api=...)`` per
test, and markers that cannot be measured on the chosen API refused at collection."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

EMBED_TTFT = """
import pytest

@pytest.mark.llm_endpoint(api="embeddings")
@pytest.mark.llm_workload("synthetic", input_tokens=16, requests=5)
@pytest.mark.llm_slo("e2e.p50 < 1s", "ttft.p99 < 500ms")
async def test_embed(llm_loadgen):
    await llm_loadgen.run()
"""


def test_a_ttft_slo_on_an_embeddings_test_is_a_usage_error_naming_the_test(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile(test_embed=EMBED_TTFT)
    result = pytester.runpytest()
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        ["*test_embed.py::test_embed: *'ttft.p99 < 500ms'*--llm-api=embeddings streams no tokens*"]
    )


def test_the_session_option_makes_every_test_an_embeddings_test(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        """
        import pytest

        @pytest.mark.llm_slo("itl.p99 < 50ms")
        async def test_stream(llm_loadgen):
            await llm_loadgen.run()
        """
    )
    result = pytester.runpytest("--llm-api=embeddings")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*::test_stream: *itl is a token-stream metric*"])


@pytest.mark.parametrize(
    ("marker", "message"),
    [
        ('llm_endpoint(api="rerank")', "api=: must be one of chat, completions, responses"),
        ("llm_endpoint()", "takes one spec"),
        ('llm_endpoint(model="m")', "takes one spec"),
        ('llm_endpoint("sim", "sim:tiny")', "takes one spec"),
        ('llm_endpoint("sim", flavour="x")', "takes one spec"),
    ],
)
def test_a_bad_llm_endpoint_marker_names_the_test(
    pytester: pytest.Pytester, marker: str, message: str
) -> None:
    pytester.makepyfile(
        f"import pytest\n\n@pytest.mark.{marker}\n"
        "async def test_x(llm_loadgen):\n    await llm_loadgen.run()\n"
    )
    result = pytester.runpytest()
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"*::test_x llm_endpoint marker*{message}*"])


def test_images_on_completions_are_refused(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        """
        import pytest

        @pytest.mark.llm_workload("synthetic", input_tokens=16, output_tokens=4, images=1)
        async def test_pics(llm_loadgen):
            await llm_loadgen.run()
        """
    )
    result = pytester.runpytest("--llm-api=completions")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*::test_pics: *images=1*--llm-api=completions sends no images*"])


SESSION = """
import pytest

@pytest.mark.llm_workload("synthetic", input_tokens=16, output_tokens=4, requests=12)
@pytest.mark.llm_load("concurrency", concurrency=4)
@pytest.mark.llm_slo("error_rate < 5%")
async def test_chat(llm_loadgen):
    r = await llm_loadgen.run()
    assert r.counts["completed"] == 12

@pytest.mark.llm_endpoint(api="responses")
@pytest.mark.llm_workload("synthetic", input_tokens=16, output_tokens=4, requests=12)
@pytest.mark.llm_load("concurrency", concurrency=4)
@pytest.mark.llm_slo("ttft.max < 1s", "error_rate < 5%")
async def test_responses(llm_loadgen):
    r = await llm_loadgen.run()
    assert r.counts["completed"] == 12
    assert r.token_lengths["output_server_mean"] == 4

@pytest.mark.llm_endpoint(api="messages")
@pytest.mark.llm_workload("synthetic", input_tokens=16, output_tokens=4, requests=12)
@pytest.mark.llm_load("concurrency", concurrency=4)
async def test_messages(llm_loadgen):
    r = await llm_loadgen.run()
    assert r.counts["completed"] == 12
    assert r.token_lengths["output_server_mean"] == 4

@pytest.mark.llm_endpoint(api="embeddings")
@pytest.mark.llm_workload("synthetic", input_tokens=16, inputs_per_request=3, requests=12)
@pytest.mark.llm_load("concurrency", concurrency=4)
@pytest.mark.llm_slo("e2e.max < 1s", "input_throughput > 1 tok/s")
async def test_embeddings(llm_loadgen):
    r = await llm_loadgen.run()
    assert r.counts["completed"] == 12
    assert r.accumulator.embedding_inputs == 36
"""


def test_one_session_drives_every_api_on_one_simulator(
    pytester: pytest.Pytester, tmp_path: Path
) -> None:
    pytester.makepyfile(test_apis=SESSION)
    report = tmp_path / "r.json"
    result = pytester.runpytest(f"--llm-json={report}")
    result.assert_outcomes(passed=4)
    data = json.loads(report.read_text())
    by_test = {t["nodeid"].split("::")[-1]: t for t in data["tests"]}
    apis = {name: t["endpoint"]["api"] for name, t in by_test.items()}
    assert apis == {
        "test_chat": "chat",
        "test_responses": "responses",
        "test_messages": "messages",
        "test_embeddings": "embeddings",
    }
    urls = {t["endpoint"]["url"] for t in by_test.values()}
    assert len(urls) == 1, urls  # one simulator, four APIs
    embed = by_test["test_embeddings"]["runs"][0]["metrics"]
    assert embed["embedding_inputs"] == 36 and embed["ttft"]["count"] == 0
    assert embed["e2e"]["count"] == 12
    lengths = by_test["test_embeddings"]["runs"][0]["token_lengths"]
    assert lengths["output_requested_mean"] == 0 and lengths["input_server_mean"] > 0


AB = """
import pytest
from pytest_llmperf.plugin.state import STATE_KEY
from pytest_llmperf.plugin.under_test import reference_endpoint

@pytest.mark.llm_endpoint(api="messages")
@pytest.mark.llm_workload("synthetic", input_tokens=16, output_tokens=4, requests=24)
@pytest.mark.llm_load("concurrency", concurrency=4)
@pytest.mark.llm_slo("error_rate < 5%")
async def test_ab(llm_loadgen, pytestconfig):
    await llm_loadgen.run()
    state = pytestconfig.stash[STATE_KEY]
    assert reference_endpoint(state).api == "chat"
    assert reference_endpoint(state, "messages").api == "messages"
    assert reference_endpoint(state, "messages") is reference_endpoint(state, "messages")
"""


def test_an_ab_reference_is_driven_through_the_tests_api(
    pytester: pytest.Pytester, tmp_path: Path
) -> None:
    pytester.makepyfile(test_ab=AB)
    report = tmp_path / "r.json"
    result = pytester.runpytest("--llm-reference-endpoint=sim:fixed", f"--llm-json={report}")
    result.assert_outcomes(passed=1)
    run = json.loads(report.read_text())["tests"][0]["runs"][0]
    assert run["reference"]["verdict"] in ("pass", "passed", "unchanged"), run["reference"]
