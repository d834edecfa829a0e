"""An ``llm_*`` marker we do not know, or a parameter a workload does not take, stops the
session at collection (exit 4) naming the test, the bad name and the nearest good one:
pytest itself would only warn, and the test would pass unjudged."""

from __future__ import annotations

import pytest

KNOWN = "llm_workload, llm_load, llm_slo, llm_endpoint, llm_inconclusive"


def _usage_error(result: pytest.RunResult) -> str:
    assert result.ret == pytest.ExitCode.USAGE_ERROR, result.stdout.str()
    text = result.stderr.str()
    # one error: one line, as for a bad option; several: one line each under a header
    assert "ERROR: pytest-llmperf: " in text
    assert "passed" not in result.stdout.str()  # no test ran
    return text


@pytest.mark.parametrize(
    "source",
    [
        """
        import pytest

        @pytest.mark.llm_slos("ttft.p90 < 1ms")
        async def test_x(llm_loadgen):
            await llm_loadgen.run()
        """,
        """
        import pytest

        @pytest.mark.llm_slos("ttft.p90 < 1ms")
        class TestX:
            async def test_x(self, llm_loadgen):
                await llm_loadgen.run()
        """,
        """
        import pytest

        pytestmark = [pytest.mark.llm_slos("ttft.p90 < 1ms")]

        async def test_x(llm_loadgen):
            await llm_loadgen.run()
        """,
    ],
    ids=["function", "class", "module"],
)
def test_a_misspelt_marker_at_any_level_is_a_usage_error_with_the_nearest_name(
    pytester: pytest.Pytester, source: str
) -> None:
    path = pytester.makepyfile(source)
    text = _usage_error(pytester.runpytest())
    nodeid = f"{path.name}::TestX::test_x" if "class" in source else f"{path.name}::test_x"
    assert (
        f"{nodeid}: unknown marker llm_slos (did you mean llm_slo?); "
        f"pytest-llmperf's markers are {KNOWN}"
    ) in text


def test_every_unknown_marker_of_every_test_is_named_at_once(pytester: pytest.Pytester) -> None:
    path = pytester.makepyfile(
        """
        import pytest

        @pytest.mark.llm_worklaod("synthetic")
        @pytest.mark.llm_inconclusiv("warn")
        async def test_a(llm_loadgen):
            await llm_loadgen.run()

        @pytest.mark.llm_zzz
        def test_b():
            pass
        """
    )
    lines = _usage_error(pytester.runpytest()).splitlines()
    name = path.name
    assert any(
        line.startswith(f"{name}::test_a: unknown marker llm_inconclusiv (did you mean ")
        and "llm_inconclusive?" in line
        for line in lines
    )
    assert any(
        line.startswith(f"{name}::test_a: unknown marker llm_worklaod (did you mean llm_workload?)")
        for line in lines
    )
    # nothing close: no guess, the list of ours
    assert any(
        line.startswith(f"{name}::test_b: unknown marker llm_zzz; pytest-llmperf's markers are")
        for line in lines
    )


def test_a_marker_the_user_registered_is_theirs(pytester: pytest.Pytester, fast: str) -> None:
    """``llm_*`` marks registered in the ini's ``markers`` (or by another plugin) are left
    alone: the user chose the name, and pytest knows it."""
    pytester.makeini(
        """
        [pytest]
        markers =
            llm_nightly: our own selection of the slow perf tests
        """
    )
    pytester.makepyfile(
        "import pytest\n\n"
        + fast.format(n=4)
        + "@pytest.mark.llm_nightly\n"
        + "async def test_x(llm_loadgen):\n"
        + "    await llm_loadgen.run()\n"
    )
    result = pytester.runpytest("-m", "llm_nightly")
    result.assert_outcomes(passed=1)


def test_a_deselected_test_is_not_checked(pytester: pytest.Pytester) -> None:
    """Collection checks the tests it runs: one left out by ``-k`` stops nothing."""
    pytester.makepyfile(
        """
        import pytest

        @pytest.mark.llm_slos("ttft.p90 < 1ms")
        def test_typo():
            pass

        def test_plain():
            pass
        """
    )
    pytester.runpytest("-k", "plain").assert_outcomes(passed=1)


@pytest.mark.parametrize(
    ("marker", "expected"),
    [
        (
            '@pytest.mark.llm_workload("synthetic", input_tokenz=8, requests=4)',
            "workload 'synthetic': does not take input_tokenz= (did you mean input_tokens?); "
            "it takes input_tokens=, output_tokens=, ignore_eos=, tokenizer=, images=, "
            "image_size=, image_format=, inputs_per_request=, structured=, tools=, "
            "tool_choice=, adapters=, greedy=, extra_body=, requests=, duration=, warmup=, seed=",
        ),
        (
            '@pytest.mark.llm_workload("conversation", sesions=True, requests=4)',
            "workload 'conversation': does not take sesions= (did you mean conversations?); "
            "it takes path=, system_prompt_tokens=, system_prompt_share=, max_input_tokens=, "
            "max_output_tokens=, min_output_tokens=, ignore_eos=, tokenizer=, conversations=, "
            "think_time=, conversation_header=, structured=",
        ),
        (
            '@pytest.mark.llm_workload("long-context", colour="red")',
            "workload 'long-context': does not take colour=; it takes context_tokens=, "
            "question_tokens=, output_tokens=",
        ),
    ],
    ids=["synthetic", "conversation", "long-context"],
)
def test_an_unknown_workload_parameter_lists_the_ones_that_workload_takes(
    pytester: pytest.Pytester, marker: str, expected: str
) -> None:
    path = pytester.makepyfile(
        f"import pytest\n\n{marker}\nasync def test_x(llm_loadgen):\n    await llm_loadgen.run()\n"
    )
    text = _usage_error(pytester.runpytest())
    assert f"{path.name}::test_x: {expected}" in text


def test_an_slo_marker_without_an_objective_is_a_usage_error(pytester: pytest.Pytester) -> None:
    """``llm_slo(confidence=0.99)`` alone judges nothing: its options apply to its own
    objectives, so a marker with none is a mistake, not a pass."""
    path = pytester.makepyfile(
        """
        import pytest

        pytestmark = pytest.mark.llm_slo(confidence=0.99)

        async def test_x(llm_loadgen):
            await llm_loadgen.run()
        """
    )
    text = _usage_error(pytester.runpytest())
    assert (
        f"{path.name}::test_x: llm_slo declares no objective: give one or more like "
        "'ttft.p99 < 500ms', or ruleset=NAME"
    ) in text
