"""Several endpoints in one session: per directory (a conftest's ``llm_endpoint``
fixture), per test (the ``llm_endpoint`` marker), the command line's ``--llm-endpoint``
over both, and each test's report naming the endpoint it measured (endpoints.py)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pytest_llmperf.client.endpoint import normalize_base_url
from pytest_llmperf.errors import LlmPerfUsageError
from pytest_llmperf.options import LlmPerfOptions
from pytest_llmperf.plugin.endpoints import EndpointPool, EndpointSpec, several_endpoints
from pytest_llmperf.sim import SimProcess, start_sim_process

# 20 short requests and an SLO: where they went is what these tests check
TEST = """
import pytest

@pytest.mark.llm_workload("synthetic", input_tokens=16, output_tokens=4, requests=20)
@pytest.mark.llm_load("concurrency", concurrency=4)
@pytest.mark.llm_slo("error_rate < 5%")
{marker}
async def test_{name}(llm_loadgen):
    result = await llm_loadgen.run()
    assert result.counts["completed"] == 20
"""

TINY_DIR = """
import pytest

@pytest.fixture(scope="session")
def llm_endpoint(llm_endpoints):
    return llm_endpoints.get("sim:tiny")
"""


@pytest.fixture(scope="module")
def server() -> Iterator[SimProcess]:
    """A "real" server for --llm-endpoint=URL: a simulator the test started itself."""
    process = start_sim_process("fixed", overrides={"ttft_ms": 5, "itl_ms": 1})
    yield process
    process.stop()


def two_directories(pytester: pytest.Pytester) -> None:
    """``top/`` measures the ini's endpoint, except one test marked for ``sim:strict-reasoning``;
    ``top/small/`` overrides the ``llm_endpoint`` fixture for ``sim:tiny``."""
    pytester.makeini("[pytest]\nllm_endpoint = sim:fixed\n")
    pytester.makepyfile(
        test_top=TEST.format(name="top", marker="")
        + TEST.format(name="marked", marker='@pytest.mark.llm_endpoint("sim:strict-reasoning")'),
    )
    small = pytester.mkpydir("small")
    (small / "conftest.py").write_text(TINY_DIR)
    (small / "test_small.py").write_text(TEST.format(name="small", marker=""))


def by_test(report: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {t["nodeid"].rsplit("::", 1)[1]: t["endpoint"] for t in report["tests"]}


def test_directories_and_tests_measure_their_own_profile_in_one_session(
    pytester: pytest.Pytester,
) -> None:
    two_directories(pytester)
    result = pytester.runpytest("-p", "no:cacheprovider", "--llm-json=r.json", "--llm-html=r.html")
    result.assert_outcomes(passed=3)
    report = json.loads(Path(pytester.path, "r.json").read_text())
    endpoints = by_test(report)
    assert endpoints["test_top"]["simulator"] == "fixed"
    assert endpoints["test_marked"]["simulator"] == "strict-reasoning"
    assert endpoints["test_small"]["simulator"] == "tiny"
    # three simulators, three processes: three different URLs
    assert len({e["url"] for e in endpoints.values()}) == 3
    # the report claims no single endpoint, and lists each
    top = report["endpoint"]
    assert top["url"] is None and top["model"] is None and top["several"] is True
    assert {e["simulator"] for e in top["endpoints"]} == {"fixed", "strict-reasoning", "tiny"}
    # each run's minimum report names its own endpoint
    small_run = next(t for t in report["tests"] if t["nodeid"].endswith("test_small"))["runs"][0]
    assert "tiny" in json.dumps(small_run["minimum_report"])
    # the terminal names the endpoint beside each test
    result.stdout.fnmatch_lines(["*test_top.py::test_top [[]passed[]] on sim:fixed"])
    result.stdout.fnmatch_lines(["*test_small [[]passed[]] on sim:tiny"])
    result.stdout.fnmatch_lines(["*test_marked [[]passed[]] on sim:strict-reasoning"])
    # the HTML summary lists the three, not one of them as "the" endpoint
    summary = Path(pytester.path, "r.html").read_text().split('id="summary"', 1)[1]
    summary = summary.split("</table>", 1)[0]
    assert "<th>endpoints</th>" in summary and "<th>endpoint</th>" not in summary
    for profile in ("sim:fixed", "sim:strict-reasoning", "sim:tiny"):
        assert profile in summary


def test_the_command_line_endpoint_is_measured_everywhere(
    pytester: pytest.Pytester, server: SimProcess
) -> None:
    two_directories(pytester)
    result = pytester.runpytest(
        "-p", "no:cacheprovider", f"--llm-endpoint={server.url}", "--llm-json=r.json"
    )
    result.assert_outcomes(passed=3)
    report = json.loads(Path(pytester.path, "r.json").read_text())
    url = normalize_base_url(server.url)
    assert {e["url"] for e in by_test(report).values()} == {url}
    assert {e["simulator"] for e in by_test(report).values()} == {None}
    assert report["endpoint"]["url"] == url and "several" not in report["endpoint"]
    assert " on sim:" not in result.stdout.str()  # one endpoint: no per-test label


def test_a_marked_module_and_a_single_directory_run(pytester: pytest.Pytester) -> None:
    """``pytestmark`` chooses for a module; the directory runs alone just as well."""
    pytester.makepyfile(
        test_mod='import pytest\npytestmark = pytest.mark.llm_endpoint("sim:tiny")\n'
        + TEST.format(name="mod", marker="")
    )
    result = pytester.runpytest("-p", "no:cacheprovider", "--llm-json=r.json")
    result.assert_outcomes(passed=1)
    report = json.loads(Path(pytester.path, "r.json").read_text())
    assert report["endpoint"]["simulator"] == "tiny"  # one endpoint measured: that one
    assert by_test(report)["test_mod"]["simulator"] == "tiny"


@pytest.mark.parametrize(
    ("marker", "words"),
    [
        ('@pytest.mark.llm_endpoint("sim:nope")', ["*test_bad*llm_endpoint marker*'nope'*"]),
        ('@pytest.mark.llm_endpoint("ftp://x")', ["*test_bad*llm_endpoint marker*ftp://x*"]),
        ("@pytest.mark.llm_endpoint()", ["*test_bad*llm_endpoint marker*takes one spec*"]),
        ('@pytest.mark.llm_inconclusive("maybe")', ["*test_bad*llm_inconclusive*'maybe'*"]),
    ],
)
def test_a_bad_marker_is_a_usage_error_naming_the_test(
    pytester: pytest.Pytester, marker: str, words: list[str]
) -> None:
    pytester.makepyfile(TEST.format(name="bad", marker=marker))
    result = pytester.runpytest("-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(words)


# -- the inconclusive policy per directory and per test --------------------------------

INCONCLUSIVE = """
import pytest

@pytest.mark.llm_workload("synthetic", input_tokens=16, output_tokens=4, requests=10)
@pytest.mark.llm_load("concurrency", concurrency=4)
@pytest.mark.llm_slo("ttft.p99 < 10s")  # 10 samples: a p99 cannot be judged
{marker}
async def test_{name}(llm_loadgen):
    await llm_loadgen.run()
"""

WARN_DIR = """
import pytest

@pytest.fixture(scope="session")
def llm_inconclusive():
    return "warn"
"""


def inconclusive_suite(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_strict=INCONCLUSIVE.format(name="strict", marker=""))
    relaxed = pytester.mkpydir("relaxed")
    (relaxed / "conftest.py").write_text(WARN_DIR)
    (relaxed / "test_relaxed.py").write_text(
        INCONCLUSIVE.format(name="warns", marker="")
        + INCONCLUSIVE.format(name="marked", marker='@pytest.mark.llm_inconclusive("skip")')
    )


def test_the_inconclusive_policy_per_directory_and_per_test(pytester: pytest.Pytester) -> None:
    inconclusive_suite(pytester)
    result = pytester.runpytest("-p", "no:cacheprovider", "-rA")
    # top level: the default (fail); relaxed/: warn from its conftest, skip from the marker
    result.assert_outcomes(failed=1, passed=1, skipped=1, warnings=1)
    result.stdout.fnmatch_lines(["FAILED test_strict.py::test_strict*"])
    result.stdout.fnmatch_lines(["PASSED relaxed/test_relaxed.py::test_warns*"])


def test_the_command_line_inconclusive_policy_wins(pytester: pytest.Pytester) -> None:
    inconclusive_suite(pytester)
    result = pytester.runpytest("-p", "no:cacheprovider", "--llm-inconclusive=fail")
    result.assert_outcomes(failed=3)


# -- the library, without pytest ------------------------------------------------------


def options(**raw: str) -> LlmPerfOptions:
    return LlmPerfOptions.resolve(lambda o: raw.get(o.dest))


def test_specs_parse_and_name_the_bad_value() -> None:
    assert EndpointSpec.parse("sim", where="w") == EndpointSpec(sim_profile="fixed")
    assert EndpointSpec.parse(" sim:tiny ", where="w").label == "sim:tiny"
    url = EndpointSpec.parse("http://h:8000", model="m", where="w")
    assert url.url == "http://h:8000/v1" and url.model == "m" and url.label == url.url
    with pytest.raises(LlmPerfUsageError, match=r"where.*unknown simulator profile 'huge'"):
        EndpointSpec.parse("sim:huge", where="where")
    for bad in ("", None, 3, "localhost"):
        with pytest.raises(LlmPerfUsageError, match="where"):
            EndpointSpec.parse(bad, where="where")
    assert EndpointSpec.of_options(options()) == EndpointSpec(sim_profile="fixed")
    assert EndpointSpec.of_options(options(llm_endpoint="http://h:1", llm_model="m")).model == "m"


def test_the_pool_starts_each_endpoint_once_and_stops_them(server: SimProcess) -> None:
    pool = EndpointPool(options(llm_endpoint=server.url))
    first = pool.get("sim:tiny")
    assert pool.get("sim:tiny") is first  # cached by spec
    assert pool.default().base_url == normalize_base_url(server.url)  # the session's
    assert first.sim_profile == "tiny" and first.model  # preflighted: model resolved
    assert pool.tokenizer(first) is not None and "server_software" in pool.identity(first)
    assert [e.sim_profile for e in pool.used()] == ["tiny", None]
    pool.close()
    with pytest.raises(LlmPerfUsageError, match=first.base_url):
        EndpointPool(options()).get(first.base_url)  # that simulator is gone


def test_a_pinned_pool_returns_the_session_endpoint_for_every_spec(server: SimProcess) -> None:
    pool = EndpointPool(options(llm_endpoint=server.url), pinned=True)
    assert pool.get("sim:tiny") is pool.default() is pool.get("http://elsewhere:1")
    assert pool.used() == [pool.default()]  # nothing else was started
    with pytest.raises(LlmPerfUsageError):  # a bad spec is still an error
        pool.get("sim:huge")
    pool.close()


def test_several_endpoints_is_none_for_one() -> None:
    one = {"url": "u", "model": "m", "simulator": None, "api": "chat"}
    assert several_endpoints([one, dict(one)]) is None and several_endpoints([]) is None
    two = several_endpoints([one, {**one, "url": "v"}])
    assert two is not None and two["url"] is None and len(two["endpoints"]) == 2
    assert two["api"] == "chat"


def test_a_marked_endpoint_that_does_not_answer_fails_its_tests_only(
    pytester: pytest.Pytester,
) -> None:
    dead = '@pytest.mark.llm_endpoint("http://127.0.0.1:9")'  # the discard port: refused
    pytester.makepyfile(
        TEST.format(name="dead_1", marker=dead)
        + TEST.format(name="dead_2", marker=dead)
        + TEST.format(name="alive", marker="")
    )
    result = pytester.runpytest("-p", "no:cacheprovider")
    result.assert_outcomes(passed=1, errors=2)
    result.stdout.fnmatch_lines(["*test_dead_1 llm_endpoint marker:*127.0.0.1:9*"])


def test_a_bad_inconclusive_fixture_names_the_test(pytester: pytest.Pytester) -> None:
    pytester.makeconftest(
        "import pytest\n\n@pytest.fixture(scope='session')\ndef llm_inconclusive():\n"
        "    return 'maybe'\n"
    )
    pytester.makepyfile(TEST.format(name="x", marker=""))
    result = pytester.runpytest("-p", "no:cacheprovider")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*test_x: the llm_inconclusive fixture must return*'maybe'*"])
