"""``--llm-gpu`` in a pytest session on this machine (no GPU, the real pynvml installed):
one line in the header says why nothing is read, no warning, no failure, no ``gpu``
block; a malformed value is a usage error naming the option."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

INNER = """
import pytest

@pytest.mark.llm_workload("synthetic", input_tokens=8, output_tokens=4, requests=4)
@pytest.mark.llm_load("concurrency", concurrency=2)
@pytest.mark.parametrize("k", [1, 2])
async def test_runs(llm_loadgen, k):
    await llm_loadgen.run()
"""


def test_no_gpu_is_one_note_in_the_header_and_no_block(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_inner_gpu=INNER)
    result = pytester.runpytest(
        "--llm-endpoint=sim:fixed", "--llm-gpu=auto", "--llm-json=out.json", "-W", "error"
    )
    result.assert_outcomes(passed=2)
    said = result.stdout.str()
    assert said.count("llmperf: GPUs: none on this machine (") == 1, said
    assert "warning" not in said.lower()
    report = json.loads((Path(pytester.path) / "out.json").read_text())
    runs = [run for test in report["tests"] for run in test["runs"]]
    assert len(runs) == 2 and all("gpu" not in run for run in runs)


def test_a_bad_value_is_a_usage_error_naming_the_option(pytester: pytest.Pytester) -> None:
    pytester.makepyfile("def test_x():\n    pass\n")
    result = pytester.runpytest("--llm-gpu=first")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    said = result.stderr.str() + result.stdout.str()
    assert "--llm-gpu" in said and "'first'" in said
