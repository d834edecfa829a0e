"""A quiet first run: a bare suite (no ini) with an async test prints no warning.

Each session runs in a subprocess rooted in pytester's temporary folder, so
this repository's ``pyproject.toml`` (whose ``filterwarnings`` hides
pytest-asyncio's loop-scope warning from our own inner sessions) is not read.
The control case proves the check can fail: without pytest-llmperf the same
suite prints pytest-asyncio's warning.
"""

from __future__ import annotations

import pytest

BARE = """
import pytest

@pytest.mark.llm_workload("synthetic", input_tokens=16, output_tokens=4, requests=20)
@pytest.mark.llm_load("concurrency", concurrency=4)
@pytest.mark.llm_slo("error_rate < 5%")
async def test_bare(llm_loadgen):
    await llm_loadgen.run()
"""

PLAIN_ASYNC = """
import pytest

@pytest.mark.asyncio
async def test_plain():
    assert True
"""

UNSET = 'asyncio_default_fixture_loop_scope" is unset'


def run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    assert not list(pytester.path.glob("*.ini")) and not list(pytester.path.glob("*.toml"))
    return pytester.runpytest_subprocess("-p", "no:cacheprovider", *args)


def test_a_bare_suite_runs_without_a_warning(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_bare=BARE)
    result = run(pytester, "-W", "error")  # any warning at all would now be an error
    result.assert_outcomes(passed=1, warnings=0)
    out = result.stdout.str() + result.stderr.str()
    assert UNSET not in out and "Warning" not in out
    result.stdout.fnmatch_lines(["asyncio: *asyncio_default_fixture_loop_scope=function*"])


def test_without_the_plugin_pytest_asyncio_warns(pytester: pytest.Pytester) -> None:
    """The control: what the plugin prevents is really there to prevent."""
    pytester.makepyfile(test_plain=PLAIN_ASYNC)
    result = run(pytester, "-p", "no:llmperf")
    assert UNSET in result.stdout.str() + result.stderr.str()


@pytest.mark.parametrize("how", ["ini", "-o"])
def test_the_users_own_loop_scope_is_kept(pytester: pytest.Pytester, how: str) -> None:
    pytester.makepyfile(test_bare=BARE)
    if how == "ini":
        pytester.makefile(
            ".cfg", setup="[tool:pytest]\nasyncio_default_fixture_loop_scope = module\n"
        )
        result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-W", "error")
    else:
        result = run(pytester, "-W", "error", "-o", "asyncio_default_fixture_loop_scope=session")
    result.assert_outcomes(passed=1, warnings=0)
    scope = "module" if how == "ini" else "session"
    result.stdout.fnmatch_lines([f"asyncio: *asyncio_default_fixture_loop_scope={scope},*"])
