"""Affinity through the plugin: ``--llm-affinity``, the ``llm_endpoint`` marker's
``affinity=``, and their usage errors, in a real pytest session against the simulator's
session router (two replicas; it pins on Dynamo's headers, and deals calls without
them round robin).

Each test of the suite replays one Weka conversation and writes the replica of every
root call (read by the client from ``x-replica-id``) to a file: pinned, they are one
replica; unpinned, both.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from pytest_llmperf.client.affinity import DEFAULT_REPLICA_HEADERS
from pytest_llmperf.sim import start_sim_process


def conversation() -> dict[str, Any]:
    calls = [{"type": "s", "t": 0.05 * k, "in": 32 + 32 * k, "out": 4} for k in range(4)]
    return {"id": "conv-a", "block_size": 16, "requests": calls}


SUITE = """
import json
from pathlib import Path

import pytest

TRACE = {trace!r}
LOAD = pytest.mark.llm_load("trace", path=TRACE, format="weka")


def roots(records):
    return [r.replica for r in sorted(records, key=lambda r: r.turn) if r.agent == ""]


async def replay(llm_loadgen, name):
    records = []
    llm_loadgen.observers.append(records.append)
    await llm_loadgen.run()
    Path({out!r}, name + ".json").write_text(json.dumps(roots(records)))


@LOAD
async def test_session_option(llm_loadgen):
    await replay(llm_loadgen, "option")


@LOAD
@pytest.mark.llm_endpoint(affinity="dynamo")
async def test_marker_pins(llm_loadgen):
    await replay(llm_loadgen, "marker")


@LOAD
@pytest.mark.llm_endpoint(affinity="none")
async def test_marker_unpins(llm_loadgen):
    await replay(llm_loadgen, "unpinned")
"""


@pytest.fixture
def suite(pytester: pytest.Pytester, tmp_path: Path) -> Path:
    trace = tmp_path / "conv-a.json"
    trace.write_text(json.dumps(conversation()))
    out = tmp_path / "out"
    out.mkdir()
    pytester.makepyfile(test_suite=SUITE.format(trace=str(trace), out=str(out)))
    return out


def _run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    overrides = {"replicas": 2, "router": "session"}
    sim = start_sim_process("llama-3.1-8b-h100", overrides=overrides, speedup=20)
    try:
        return pytester.runpytest(f"--llm-endpoint={sim.url}", "-p", "no:cacheprovider", *args)
    finally:
        sim.stop()


def test_the_option_and_the_marker_pin_the_conversation(
    pytester: pytest.Pytester, suite: Path
) -> None:
    report = suite / "report.json"
    result = _run(pytester, "--llm-affinity=dynamo", f"--llm-json={report}")
    result.assert_outcomes(passed=3)
    shown = json.loads(report.read_text())
    affinity = shown["endpoint"]["affinity"]  # the JSON report names the session's affinity
    assert affinity == {"modes": ["dynamo"], "replica_headers": list(DEFAULT_REPLICA_HEADERS)}
    per_test = {t["nodeid"].rpartition("::")[2]: t["endpoint"].get("affinity") for t in
                shown["tests"]}  # fmt: skip
    assert per_test["test_marker_unpins"] is None, per_test  # affinity="none": none shown
    seen = {name: json.loads((suite / f"{name}.json").read_text()) for name in
            ("option", "marker", "unpinned")}  # fmt: skip
    assert all(len(v) == 4 for v in seen.values()), seen
    assert len(set(seen["option"])) == 1, seen  # --llm-affinity=dynamo
    assert len(set(seen["marker"])) == 1, seen  # affinity="dynamo"
    assert set(seen["unpinned"]) == {"0", "1"}, seen  # affinity="none" over the option


def test_without_the_option_only_the_marked_test_is_pinned(
    pytester: pytest.Pytester, suite: Path
) -> None:
    _run(pytester).assert_outcomes(passed=3)
    option = json.loads((suite / "option.json").read_text())
    marker = json.loads((suite / "marker.json").read_text())
    assert set(option) == {"0", "1"} and len(set(marker)) == 1, (option, marker)


def test_a_bad_option_value_stops_the_session(pytester: pytest.Pytester, suite: Path) -> None:
    result = pytester.runpytest("--llm-affinity=dynamo,stickiness", "-p", "no:cacheprovider")
    assert result.ret == 4
    result.stderr.fnmatch_lines(["*--llm-affinity*unknown affinity mode 'stickiness'*"])


def test_a_bad_marker_value_names_the_test(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        test_bad="""
import pytest

@pytest.mark.llm_workload("synthetic", requests=1, input_tokens=8, output_tokens=2)
@pytest.mark.llm_endpoint(affinity="header:")
async def test_bad(llm_loadgen):
    await llm_loadgen.run()
"""
    )
    result = pytester.runpytest("-p", "no:cacheprovider")
    assert result.ret == 4
    result.stderr.fnmatch_lines(
        ["*test_bad.py::test_bad llm_endpoint marker affinity=*'header' needs a header name*"]
    )
