"""``--llm-event-loop``: the suite's async tests, and so the client, run on the loop chosen.

Inner sessions (pytester) against the embedded simulator: the test prints the
module of the loop it runs on, the load run against a real socket completes.
"""

from __future__ import annotations

import pytest

SUITE = """
import asyncio

import pytest


@pytest.mark.llm_workload("synthetic", input_tokens=16, output_tokens=4, requests=8)
@pytest.mark.llm_load("concurrency", concurrency=2)
@pytest.mark.llm_slo("error_rate < 5%")
async def test_on_the_loop(llm_loadgen):
    await llm_loadgen.run()
    print("LOOP=" + type(asyncio.get_running_loop()).__module__.split(".")[0])
"""


@pytest.mark.parametrize(("value", "module"), [("uvloop", "uvloop"), ("asyncio", "asyncio")])
def test_the_tests_run_on_the_loop_chosen(
    pytester: pytest.Pytester, value: str, module: str
) -> None:
    pytest.importorskip("uvloop")
    pytester.makepyfile(test_suite=SUITE)
    result = pytester.runpytest("-p", "no:cacheprovider", "-s", f"--llm-event-loop={value}")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines([f"*LOOP={module}*"])


def test_the_ini_twin_and_a_bad_value(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_suite=SUITE)
    pytester.makeini("[pytest]\nllm_event_loop = trio\n")
    result = pytester.runpytest("-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--llm-event-loop*auto, asyncio, uvloop*'trio'*"])
