"""Marker validation at collection, options, ini twins and asyncio modes."""

from __future__ import annotations

import pytest

TEMPLATE = """
import pytest

{markers}
async def test_x(llm_loadgen):
    await llm_loadgen.run()
"""


@pytest.mark.parametrize(
    ("markers", "bad_word"),
    [
        ('@pytest.mark.llm_load("poison", rate=1)', "'poison'"),
        ('@pytest.mark.llm_slo("ttfx.p99 < 1s")', "'ttfx'"),
        ('@pytest.mark.llm_slo("ttft.p99 < 1 parsec")', "'parsec'"),
        ('@pytest.mark.llm_slo("ttft.p99 is small")', "malformed SLO"),
        ('@pytest.mark.llm_workload("synthetic", requests=0)', "requests must be"),
        ('@pytest.mark.llm_load("poisson", rate=5, concurrency=2)', "not concurrency="),
        ('@pytest.mark.llm_slo(ruleset="no-such-ruleset")', "'no-such-ruleset'"),
    ],
)
def test_bad_markers_are_usage_errors_naming_test_and_word(
    pytester: pytest.Pytester, markers: str, bad_word: str
) -> None:
    pytester.makepyfile(TEMPLATE.format(markers=markers))
    result = pytester.runpytest()
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    text = result.stderr.str() + result.stdout.str()
    assert "test_bad_markers_are_usage_errors_naming_test_and_word.py::test_x" in text
    assert bad_word in text
    assert "endpoint under test" in text  # header printed, but no session ran
    assert "passed" not in text and "failed" not in text


def test_all_bad_tests_are_reported_at_once(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        """
        import pytest

        @pytest.mark.llm_load("poison", rate=1)
        async def test_a(llm_loadgen): ...

        @pytest.mark.llm_slo("ttft.p100.5 < 1s")
        async def test_b(llm_loadgen): ...
        """
    )
    result = pytester.runpytest()
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        ["*::test_a: unknown load pattern 'poison'*", "*::test_b: *unknown statistic 'p100.5'*"]
    )


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--llm-timeout=0"], "--llm-timeout: must be > 0"),
        (["--llm-timeout=soon"], "--llm-timeout: expected a float, got 'soon'"),
        (["--llm-scale=-1"], "--llm-scale: must be > 0"),
        (["--llm-workers=two"], "--llm-workers: expected a whole number"),
        (
            ["--llm-api=rerank"],
            "--llm-api: must be one of chat, completions, responses, messages, embeddings, "
            "got 'rerank'",
        ),
        (["--llm-endpoint=localhost:8000"], "--llm-endpoint: endpoint URL must look like"),
        (["--llm-inconclusive=maybe"], "--llm-inconclusive: must be one of"),
        (["--llm-ruleset=nope.yaml"], "ruleset 'nope.yaml' is neither a built-in"),
    ],
)
def test_bad_options_are_usage_errors(pytester: pytest.Pytester, args, message) -> None:
    pytester.makepyfile("def test_nothing(): pass")
    result = pytester.runpytest(*args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert message in result.stderr.str()


PROFILES = (
    "known: disaggregated-1p1d, disaggregated-2p2d, fixed, gpu-2, llama-3.1-8b-h100, "
    "replicas-2-round-robin, replicas-2-session, replicas-4-least-loaded, "
    "replicas-4-prefix-aware, replicas-4-round-robin, replicas-4-slow-one, strict-reasoning, tiny"
)


@pytest.mark.parametrize(
    ("args", "ini", "marker", "where"),
    [
        (["--llm-endpoint=sim:nosuch"], "", "", "--llm-endpoint"),
        (["--llm-reference-endpoint=sim:nosuch"], "", "", "--llm-reference-endpoint"),
        ([], "llm_endpoint = sim:nosuch", "", "--llm-endpoint"),
        (
            [],
            "",
            '@pytest.mark.llm_endpoint("sim:nosuch")',
            "test_an_unknown_profile_is_one_error_line.py::test_x llm_endpoint marker",
        ),
    ],
    ids=["option", "reference", "ini", "marker"],
)
def test_an_unknown_profile_is_one_error_line(
    pytester: pytest.Pytester, args: list[str], ini: str, marker: str, where: str
) -> None:
    """Said once, before any simulator starts: no ``_pytest.outcomes.Exit`` line, no
    simulator stderr quoted, the test id not doubled."""
    if ini:
        pytester.makeini(f"[pytest]\n{ini}\n")
    pytester.makepyfile(TEMPLATE.format(markers=marker))
    result = pytester.runpytest("-p", "no:cacheprovider", *args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    said = [line for line in result.stderr.lines if line.strip()]
    expected = f"ERROR: pytest-llmperf: {where}: unknown simulator profile 'nosuch'"
    assert said == [f"{expected} in 'sim:nosuch'; {PROFILES}"], said
    assert "Exit" not in result.stdout.str() and "stderr" not in result.stdout.str()


def test_ini_option_twin(pytester: pytest.Pytester, fast: str) -> None:
    pytester.makeini("[pytest]\nllm_endpoint = sim\nllm_api = completions\n")
    pytester.makepyfile(
        "import pytest\n" + fast.format(n=5) + "async def test_x(llm_loadgen, llm_endpoint):\n"
        "    await llm_loadgen.run()\n"
        "    assert llm_endpoint.api == 'completions' and llm_endpoint.sim_profile == 'fixed'\n"
    )
    result = pytester.runpytest()
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(
        ["*endpoint under test: embedded simulator, profile fixed*", "*api=completions*"]
    )


@pytest.mark.parametrize("mode", ["strict", "auto"])
def test_async_tests_run_in_both_asyncio_modes(pytester: pytest.Pytester, fast: str, mode) -> None:
    pytester.makeini(f"[pytest]\nasyncio_mode = {mode}\n")
    pytester.makepyfile(
        "import pytest\n" + fast.format(n=5) + "async def test_marked(llm_loadgen):\n"
        "    r = await llm_loadgen.run()\n"
        "    assert r.counts['completed'] == 5\n\n"
        "async def test_fixture_only(llm_loadgen):\n"
        "    r = await llm_loadgen.run(requests=3)\n"
        "    assert r.counts['completed'] == 3\n\n"
        "@pytest.mark.asyncio\n"
        "async def test_endpoint_client(llm_endpoint):\n"
        "    async with llm_endpoint.client() as http:\n"
        "        r = await http.get(llm_endpoint.base_url + '/models')\n"
        "    assert r.status_code == 200\n"
    )
    result = pytester.runpytest()
    result.assert_outcomes(passed=3)


def test_module_level_markers_apply(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        """
        import pytest

        pytestmark = [
            pytest.mark.llm_workload("synthetic", input_tokens=8, output_tokens=2, requests=6),
            pytest.mark.llm_slo("error_rate < 1%"),
        ]

        @pytest.mark.llm_slo("ttft.max < 30s")
        async def test_x(llm_loadgen):
            r = await llm_loadgen.run()
            assert r.counts["issued"] == 6
        """
    )
    result = pytester.runpytest("-p", "no:randomly")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["*✓ ttft.max < 30s*", "*✓ error_rate < 1%*"])


def test_scale_option_shrinks_runs(pytester: pytest.Pytester, fast: str) -> None:
    pytester.makepyfile(
        "import pytest\n" + fast.format(n=50) + "async def test_x(llm_loadgen):\n"
        "    r = await llm_loadgen.run()\n"
        "    assert r.counts['issued'] == 5\n"
    )
    pytester.runpytest("--llm-scale=0.1").assert_outcomes(passed=1)
