"""``--llm-tokenizer`` (and ``llm_tokenizer``): checked up front, applied to every workload."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from pytest_llmperf.errors import LlmPerfUsageError
from pytest_llmperf.options import LlmPerfOptions


def _resolve(value: str | None) -> LlmPerfOptions:
    return LlmPerfOptions.resolve(lambda o: value if o.flag == "--llm-tokenizer" else None)


@pytest.mark.parametrize("value", ["bogus-encoding", "/no/such/folder", "./missing.json"])
def test_bad_values_are_usage_errors_naming_option_and_value(value: str) -> None:
    with pytest.raises(LlmPerfUsageError) as err:
        _resolve(value)
    assert err.value.where == "--llm-tokenizer"
    assert repr(value) in str(err.value)


def test_a_folder_without_tokenizer_json_is_refused(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text("{}")
    with pytest.raises(LlmPerfUsageError, match=r"neither a tokenizer\.json file"):
        _resolve(str(tmp_path))


def test_good_values_pass(llama_dir: Path) -> None:
    assert _resolve(None).tokenizer is None
    assert _resolve("server").tokenizer == "server"
    assert _resolve("approximate").tokenizer == "approximate"
    assert _resolve(str(llama_dir)).tokenizer == str(llama_dir)
    assert _resolve(str(llama_dir / "tokenizer.json")).tokenizer == str(
        llama_dir / "tokenizer.json"
    )
    try:
        import tiktoken  # noqa: F401
    except ImportError:
        return
    assert _resolve("cl100k_base").tokenizer == "cl100k_base"


INI = "[pytest]\nasyncio_default_fixture_loop_scope = function\n"

SIZED_TEST = """
import pytest


@pytest.mark.llm_workload("synthetic", input_tokens=60, output_tokens=3, requests=6)
@pytest.mark.llm_load("concurrency", concurrency=2)
async def test_session_tokenizer(llm_loadgen):
    result = await llm_loadgen.run()
    assert result.counts["completed"] == 6
    assert "Hugging Face tokenizer" in result.workload["tokenizer"], result.workload
    assert result.workload["prompt_overhead_tokens"] > 0  # chat: the template's tokens


@pytest.mark.llm_workload("synthetic", input_tokens=60, output_tokens=3, requests=2,
                          tokenizer="approximate")
async def test_a_named_tokenizer_wins(llm_loadgen):
    result = await llm_loadgen.run()
    assert result.workload["tokenizer"].startswith("approximate"), result.workload
"""


@pytest.mark.parametrize("workers", ["1", "2"])
def test_the_session_tokenizer_sizes_every_run(
    pytester: pytest.Pytester, llama_dir: Path, workers: str
) -> None:
    """Against the simulator, with worker processes too (the tokenizer is pickled to them)."""
    pytester.makepyfile(test_sized=SIZED_TEST)
    result = pytester.runpytest(
        f"--llm-tokenizer={llama_dir}", f"--llm-workers={workers}", "-p", "no:cacheprovider"
    )
    result.assert_outcomes(passed=2)


def test_the_simulator_default_warns_nothing(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        test_default=textwrap.dedent(
            """
            import pytest

            @pytest.mark.llm_workload("synthetic", input_tokens=20, output_tokens=3, requests=2)
            async def test_default(llm_loadgen):
                result = await llm_loadgen.run()
                assert "simulator's own tokenizer" in result.workload["tokenizer"]
            """
        )
    )
    pytester.makeini(INI)
    result = pytester.runpytest(
        "-p", "no:cacheprovider",
        "-W", "error::pytest_llmperf.session_tokenizer.TokenizerFallbackWarning",
    )  # fmt: skip
    result.assert_outcomes(passed=1)


@pytest.mark.parametrize("where", ["option", "ini"])
def test_a_bad_value_stops_the_session_as_a_usage_error(
    pytester: pytest.Pytester, where: str
) -> None:
    pytester.makepyfile(test_x="def test_x():\n    pass\n")
    if where == "ini":
        pytester.makeini(INI + "llm_tokenizer = not-an-encoding\n")
        result = pytester.runpytest("-p", "no:cacheprovider")
    else:
        pytester.makeini(INI)
        result = pytester.runpytest("--llm-tokenizer=not-an-encoding", "-p", "no:cacheprovider")
    text = result.stdout.str() + result.stderr.str()
    assert result.ret == pytest.ExitCode.USAGE_ERROR, text
    assert "--llm-tokenizer" in text and "'not-an-encoding'" in text
    assert "Traceback" not in text
