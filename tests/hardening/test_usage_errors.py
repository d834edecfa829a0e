"""Bad input is a usage error that names where it came from, before any load is sent.

Each case runs a real pytest session (pytester, in-process: option parsing,
plugin start-up and collection run for real) with one mistake in a marker, an
SLO string, an option, a ruleset file or a dataset file. Every session points
at a listening socket on 127.0.0.1 that the test watches: it must never see a
connection, so "before any load" is checked, not assumed.
"""

from __future__ import annotations

import socket
import textwrap

import pytest

GOOD_TEST = """
import pytest

{marks}
async def test_perf(llm_loadgen):
    await llm_loadgen.run()
"""
GOOD_MARKS = (
    '@pytest.mark.llm_workload("synthetic", input_tokens=8, output_tokens=4, requests=4)\n'
    '@pytest.mark.llm_load("concurrency", concurrency=2)'
)


@pytest.fixture
def watched_endpoint():
    """A listening socket nobody should connect to; yields its URL, then checks."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(16)
        listener.setblocking(False)
        yield f"http://127.0.0.1:{listener.getsockname()[1]}"
        with pytest.raises(BlockingIOError):
            conn, _ = listener.accept()
            conn.close()  # pragma: no cover - only reached when load was sent


def _run(pytester: pytest.Pytester, endpoint: str, marks: str, *args: str):
    pytester.makepyfile(test_bad=GOOD_TEST.format(marks=marks))
    return pytester.runpytest(
        f"--llm-endpoint={endpoint}", "--llm-model=m", "-p", "no:cacheprovider", *args
    )


def _assert_usage_error(result, *fragments: str) -> None:
    text = result.stdout.str() + result.stderr.str()
    assert result.ret == pytest.ExitCode.USAGE_ERROR, text
    for fragment in fragments:
        assert fragment in text, f"{fragment!r} not in:\n{text}"
    assert "Traceback" not in text, text
    assert "passed" not in result.stdout.str()


MARKER_CASES = [
    ('@pytest.mark.llm_slo("ttft.p99 <")', ["test_perf", "malformed SLO", "ttft.p99 <"]),
    ('@pytest.mark.llm_slo("latency.p99 < 5ms")', ["test_perf", "unknown metric", "latency"]),
    ('@pytest.mark.llm_slo("ttft.p100.5 < 5ms")', ["test_perf", "p100.5"]),
    ('@pytest.mark.llm_slo("ttft.p99 < 5 parsecs")', ["test_perf", "parsecs"]),
    ('@pytest.mark.llm_slo("error_rate < 1%", budget=3)', ["test_perf", "budget"]),
    ('@pytest.mark.llm_slo(ruleset="no-such-ruleset")', ["test_perf", "no-such-ruleset"]),
    ('@pytest.mark.llm_load("burst", rate=5)', ["test_perf", "burst"]),
    ('@pytest.mark.llm_load("poisson", rate=0)', ["test_perf", "rate"]),
    ('@pytest.mark.llm_load("poisson", rate=-3)', ["test_perf", "rate"]),
    ('@pytest.mark.llm_load("poisson", rate=5, concurrency=3)', ["test_perf", "concurrency"]),
    ('@pytest.mark.llm_load("concurrency", concurrency=0)', ["test_perf", "concurrency"]),
    ('@pytest.mark.llm_load("concurrency", rate=5)', ["test_perf", "rate"]),
    ('@pytest.mark.llm_workload("no-such-workload")', ["test_perf", "no-such-workload"]),
    ('@pytest.mark.llm_workload("synthetic", input_tokenz=5)', ["test_perf", "input_tokenz"]),
    ('@pytest.mark.llm_workload("synthetic", requests=0)', ["test_perf", "requests"]),
    ('@pytest.mark.llm_workload("synthetic", duration=-1)', ["test_perf", "duration"]),
    # load shapes (issue 13): each names the parameter and the bad value
    ('@pytest.mark.llm_load("poisson", rate=5, burstiness=0)', ["test_perf", "burstiness", "0"]),
    (
        '@pytest.mark.llm_load("poisson", rate=5, burstiness="x")',
        ["test_perf", "burstiness", "'x'"],
    ),
    (
        '@pytest.mark.llm_load("poisson", rate=5, max_concurrency=0)',
        ["test_perf", "max_concurrency", "0"],
    ),
    (
        '@pytest.mark.llm_load("concurrency", concurrency=2, max_concurrency=3)',
        ["test_perf", "max_concurrency"],
    ),
    ('@pytest.mark.llm_load("poisson", stages=[])', ["test_perf", "stages", "[]"]),
    (
        '@pytest.mark.llm_load("poisson", stages=[{"rate": -1, "duration": 5}])',
        ["test_perf", "stages[0]", "rate", "-1"],
    ),
    (
        '@pytest.mark.llm_load("poisson", stages=[{"rate": 1, "duration": 5}, {"rate": 2}])',
        ["test_perf", "stages[1]", "duration"],
    ),
    (
        '@pytest.mark.llm_load("poisson", stages=[{"rate": 1, "duraton": 5}])',
        ["test_perf", "stages[0]", "duraton"],
    ),
    (
        '@pytest.mark.llm_load("concurrency", stages=[{"concurrency": 1.5, "duration": 5}])',
        ["test_perf", "concurrency", "1.5"],
    ),
    (
        '@pytest.mark.llm_load("poisson", stages=[{"rate": 1, "duration": 5, "slo": "ttft <"}])',
        ["test_perf", "stages[0]", "ttft <"],
    ),
    (
        '@pytest.mark.llm_load("poisson", rate=3, stages=[{"rate": 1, "duration": 5}])',
        ["test_perf", "stages", "rate=3"],
    ),
    (
        '@pytest.mark.llm_load("poisson", '
        'ramp={"from": 1, "to": 9, "duration": 5, "shape": "cubic"})',
        ["test_perf", "ramp", "'cubic'"],
    ),
    (
        '@pytest.mark.llm_load("poisson", '
        'ramp={"from": 0, "to": 9, "duration": 5, "shape": "exponential"})',
        ["test_perf", "ramp", "from", "0"],
    ),
    (
        '@pytest.mark.llm_load("poisson", ramp={"from": 1, "to": 9, "duration": 5, "steps": 0})',
        ["test_perf", "ramp", "steps", "0"],
    ),
    (
        '@pytest.mark.llm_load("poisson", ramp={"from": 1, "duration": 5})',
        ["test_perf", "ramp", "'to'"],
    ),
    (
        '@pytest.mark.llm_load("poisson", rate=5, cancel={"share": 2, "after_tokens": 3})',
        ["test_perf", "cancel", "share", "2"],
    ),
    (
        '@pytest.mark.llm_load("poisson", rate=5, cancel={"share": 0.5})',
        ["test_perf", "cancel", "after_tokens"],
    ),
    (
        '@pytest.mark.llm_load("poisson", rate=5, cancel={"share": 0.5, "after_tokens": 0})',
        ["test_perf", "after_tokens", "0"],
    ),
    (
        '@pytest.mark.llm_load("poisson", rate=5, cancel={"share": 0.5, "after_ms": -5})',
        ["test_perf", "after_ms", "-5"],
    ),
    ('@pytest.mark.llm_load("poisson", rate=5, cancel=0.5)', ["test_perf", "cancel", "0.5"]),
    ('@pytest.mark.llm_load("trace")', ["test_perf", "path"]),
    (
        '@pytest.mark.llm_workload("synthetic")\n@pytest.mark.llm_load("trace", path="t.jsonl")',
        ["test_perf", "trace", "'synthetic'"],
    ),
    (
        '@pytest.mark.llm_workload("trace")\n@pytest.mark.llm_load("trace", path="no-such.jsonl")',
        ["test_perf", "no-such.jsonl"],
    ),
    (
        '@pytest.mark.llm_load("trace", path="t.jsonl", time_scale=0)',
        ["test_perf", "time_scale", "0"],
    ),
    ('@pytest.mark.llm_load("trace", path="t.jsonl", limit=0)', ["test_perf", "limit", "0"]),
    ('@pytest.mark.llm_load("trace", path="t.jsonl", start=-1)', ["test_perf", "start", "-1"]),
    ('@pytest.mark.llm_load("trace", path="t.jsonl", rate=5)', ["test_perf", "rate"]),
]


def test_every_bad_marker_is_reported_naming_its_test(pytester, watched_endpoint):
    """One session with one bad test per case: all are reported together, each by name."""
    workload, load = GOOD_MARKS.split("\n")
    files = {}
    for i, (marks, _) in enumerate(MARKER_CASES):
        if "llm_workload" not in marks:
            marks += "\n" + workload
        if "llm_load" not in marks:
            marks += "\n" + load
        files[f"test_bad_{i:02d}"] = GOOD_TEST.format(marks=marks)
    pytester.makepyfile(**files)
    result = pytester.runpytest(
        f"--llm-endpoint={watched_endpoint}", "--llm-model=m", "-p", "no:cacheprovider"
    )
    _assert_usage_error(result)
    lines = (result.stdout.str() + result.stderr.str()).splitlines()
    for i, (marks, fragments) in enumerate(MARKER_CASES):
        line = next((x for x in lines if x.startswith(f"test_bad_{i:02d}.py::test_perf")), "")
        for fragment in fragments[1:]:
            assert fragment in line, f"{marks}: {fragment!r} not in {line!r}"


OPTION_CASES = [
    (["--llm-timeout=-1"], ["--llm-timeout", "-1"]),
    (["--llm-timeout=abc"], ["--llm-timeout", "abc"]),
    (["--llm-timeout=connect=1,bogus=2"], ["--llm-timeout", "bogus"]),
    (["--llm-timeout=first_token=50,total=10"], ["--llm-timeout", "first_token"]),
    (["--llm-api=grpc"], ["--llm-api", "grpc"]),
    (["--llm-scale=0"], ["--llm-scale", "0"]),
    (["--llm-workers=-2"], ["--llm-workers", "-2"]),
    (["--llm-inconclusive=maybe"], ["--llm-inconclusive", "maybe"]),
]


@pytest.mark.parametrize(("args", "fragments"), OPTION_CASES, ids=[c[0][0] for c in OPTION_CASES])
def test_bad_option_is_a_usage_error_naming_the_option(pytester, watched_endpoint, args, fragments):
    result = _run(pytester, watched_endpoint, GOOD_MARKS, *args)
    _assert_usage_error(result, *fragments)


def test_bad_endpoint_url_is_a_usage_error(pytester):
    pytester.makepyfile(test_bad=GOOD_TEST.format(marks=GOOD_MARKS))
    result = pytester.runpytest("--llm-endpoint=ftp://host/v1", "-p", "no:cacheprovider")
    _assert_usage_error(result, "--llm-endpoint", "ftp://host")


RULESET_FILES = [
    ("slos: [ttft.p99 < 5ms\n  - broken: [", ["bad.yaml", "YAML"]),
    ("slos:\n  - 'ttft.p99 < 5ms'\nslo_targets: 3\n", ["bad.yaml", "slo_targets"]),
    ("slos:\n  - 'ttft.p99 << 5ms'\n", ["bad.yaml", "ttft.p99 << 5ms"]),
    ("- just\n- a list\n", ["bad.yaml"]),
]


@pytest.mark.parametrize(
    ("content", "fragments"), RULESET_FILES, ids=["yaml", "unknown-key", "bad-slo", "not-mapping"]
)
def test_bad_ruleset_file_is_a_usage_error_naming_the_file(
    pytester, watched_endpoint, content, fragments
):
    path = pytester.path / "bad.yaml"
    path.write_text(content)
    result = _run(pytester, watched_endpoint, GOOD_MARKS, f"--llm-ruleset={path}")
    _assert_usage_error(result, *fragments)


def test_missing_ruleset_file_is_a_usage_error(pytester, watched_endpoint):
    result = _run(pytester, watched_endpoint, GOOD_MARKS, "--llm-ruleset=missing-rules.yaml")
    _assert_usage_error(result, "missing-rules.yaml")


DATASETS = [
    (None, ["test_perf", "nope.jsonl"]),  # missing file
    ('{"conversations": [{"from": "human", "value": "hi"}\n', ["test_perf", "corrupt.jsonl"]),
    ("[1, 2, 3]\n", ["test_perf"]),
    ("", ["test_perf"]),
]


@pytest.mark.parametrize(
    ("content", "fragments"), DATASETS, ids=["missing", "truncated-json", "not-objects", "empty"]
)
def test_missing_or_corrupt_dataset_is_a_usage_error(
    pytester, watched_endpoint, content, fragments
):
    name = "nope.jsonl" if content is None else "corrupt.jsonl"
    if content is not None:
        (pytester.path / name).write_text(content)
    marks = textwrap.dedent(
        f"""\
        @pytest.mark.llm_workload("conversation", path={str(pytester.path / name)!r}, requests=4)
        @pytest.mark.llm_load("concurrency", concurrency=2)"""
    )
    result = _run(pytester, watched_endpoint, marks)
    _assert_usage_error(result, *fragments)


@pytest.mark.parametrize(
    "flag", ["--llm-json", "--llm-html", "--llm-baseline-save", "--llm-events"]
)
def test_unwritable_output_path_is_a_usage_error_before_any_load(pytester, watched_endpoint, flag):
    """Found at the start, not after the run when the figures would be lost."""
    blocker = pytester.path / "not-a-dir"
    blocker.write_text("a file where a directory is needed")
    result = _run(pytester, watched_endpoint, GOOD_MARKS, f"{flag}={blocker / 'out' / 'x.json'}")
    _assert_usage_error(result, flag, "not-a-dir")


def test_output_path_that_is_a_directory_is_a_usage_error(pytester, watched_endpoint):
    result = _run(pytester, watched_endpoint, GOOD_MARKS, f"--llm-json={pytester.path}")
    _assert_usage_error(result, "--llm-json", "is a directory")


@pytest.mark.parametrize(
    ("content", "fragment"),
    [(None, "not found"), ("{not json", "cannot read"), ('{"a": 1}', "not a pytest-llmperf")],
    ids=["missing", "corrupt", "not-a-baseline"],
)
def test_bad_baseline_file_is_a_usage_error(pytester, watched_endpoint, content, fragment):
    path = pytester.path / "base.json"
    if content is not None:
        path.write_text(content)
    result = _run(pytester, watched_endpoint, GOOD_MARKS, f"--llm-baseline-compare={path}")
    _assert_usage_error(result, "base.json", fragment)


def test_bad_ini_value_names_the_option(pytester, watched_endpoint):
    pytester.makeini("[pytest]\nllm_timeout = soon\n")
    result = _run(pytester, watched_endpoint, GOOD_MARKS)
    _assert_usage_error(result, "--llm-timeout", "soon")


@pytest.mark.parametrize(
    "pasted",
    [
        "http://h:8000/v1/chat/completions",
        "http://h:8000/v1/completions/",
        "http://h:8000/v1/models",
    ],
)
def test_a_pasted_request_url_becomes_the_base_url(pasted):
    from pytest_llmperf.client.endpoint import normalize_base_url

    assert normalize_base_url(pasted) == "http://h:8000/v1"
