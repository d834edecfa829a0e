"""Fleet SLOs through the plugin against the simulator's two replicas behind its router
(``sim:replicas-2-round-robin``: each response names its replica in ``x-replica-id``;
each test names its simulator, which a command line's ``--llm-endpoint`` would pin):
``replica.*`` verdicts name each replica in the test's failure and in the JSON report,
``runs[].by_replica`` holds each replica's requests, ``fleet.imbalance`` is read from
them, and a run whose responses name no replica says so."""

from __future__ import annotations

import json
from typing import Any

import pytest

SUITE = """
import pytest

WORKLOAD = pytest.mark.llm_workload(
    "synthetic", input_tokens=16, output_tokens=4, requests=40, seed=3
)
LOAD = pytest.mark.llm_load("concurrency", concurrency=4)


@WORKLOAD
@LOAD
@pytest.mark.llm_endpoint("sim:replicas-2-round-robin")
@pytest.mark.llm_slo(
    "replica.ttft.max < 60s",
    "replica.e2e.max < 1ms",  # no replica answers that fast: each one fails
    "replica.error_rate < 1%",
    "fleet.imbalance < 1.2",  # round robin: 20 and 20
)
async def test_fleet(llm_loadgen):
    await llm_loadgen.run()


@WORKLOAD
@LOAD
@pytest.mark.llm_endpoint("sim:fixed")  # one server: no response names a replica
@pytest.mark.llm_slo("replica.ttft.max < 60s", "ttft.max < 60s")
async def test_single(llm_loadgen):
    await llm_loadgen.run()
"""


@pytest.fixture
def session(pytester: pytest.Pytester) -> tuple[pytest.RunResult, dict[str, dict[str, Any]]]:
    """One session of both tests; the JSON report's tests by name."""
    pytester.makepyfile(test_fleet=SUITE)
    result = pytester.runpytest("--llm-json=out.json", "--llm-inconclusive=warn")
    report = json.loads((pytester.path / "out.json").read_text())
    return result, {t["nodeid"].rpartition("::")[2]: t for t in report["tests"]}


def test_replica_verdicts_name_each_replica(
    session: tuple[pytest.RunResult, dict[str, dict[str, Any]]],
) -> None:
    result, tests = session
    result.assert_outcomes(failed=1, passed=1, warnings=1)
    # the failure names each replica that missed the target
    result.stdout.fnmatch_lines(["*replica.e2e.max < 1ms*replica 0 (20 of 40 requests)*"])
    result.stdout.fnmatch_lines(["*replica.e2e.max < 1ms*replica 1 (20 of 40 requests)*"])
    test = tests["test_fleet"]
    (run,) = test["runs"]
    assert sorted(run["by_replica"]) == ["0", "1"]
    assert [run["by_replica"][k]["counts"]["completed"] for k in ("0", "1")] == [20, 20]
    assert run["counts"]["replica_unattributed"] == 0
    judged = {(v["expr"], v.get("replica")): v["verdict"] for v in test["slos"]}
    assert judged == {
        ("replica.ttft.max < 60s", "0"): "pass",
        ("replica.ttft.max < 60s", "1"): "pass",
        ("replica.e2e.max < 1ms", "0"): "fail",
        ("replica.e2e.max < 1ms", "1"): "fail",
        ("replica.error_rate < 1%", "0"): "pass",
        ("replica.error_rate < 1%", "1"): "pass",
        ("fleet.imbalance < 1.2", None): "pass",
    }
    imbalance = next(v for v in test["slos"] if v["expr"].startswith("fleet."))
    assert imbalance["observed"] == 1.0
    # a single server: no new key, and the replica SLO says why it cannot judge
    single = tests["test_single"]
    (run,) = single["runs"]
    assert "by_replica" not in run and "replica_unattributed" not in run["counts"]
    replica = next(v for v in single["slos"] if v["expr"].startswith("replica."))
    assert replica["verdict"] == "inconclusive" and "replica" not in replica
    assert "--llm-replica-header" in replica["reason"]
    plain = next(v for v in single["slos"] if v["expr"] == "ttft.max < 60s")
    assert plain["verdict"] == "pass" and "replica" not in plain
