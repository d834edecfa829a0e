"""Issue 27's two cases end to end on the embedded simulator (``fixed``: TTFT 20 ms).

- ``ttft.p90 < 200ms`` on 46 requests, every one at 20–23 ms: the p90's upper
  confidence bound (at 99%, from 44 samples on: the slowest sample) is under the
  target, so the test passes under the default ``--llm-inconclusive=fail`` (the old
  sample floor, 100 for a p90, called it inconclusive and failed it);
- ``ttft.p99 < 5ms`` on 200 requests, every one over 20 ms: the p99's lower bound
  is over the target, so it fails (the old floor, 1,000 for a p99, said inconclusive).
"""

from __future__ import annotations

import json

import pytest

SESSION = """
import pytest

{fast46}@pytest.mark.llm_slo("ttft.p90 < 200ms")
async def test_p90_of_46(llm_loadgen):
    await llm_loadgen.run()

{fast200}@pytest.mark.llm_slo("ttft.p99 < 5ms")
async def test_p99_of_200(llm_loadgen):
    await llm_loadgen.run()
"""


def test_the_issues_two_cases_are_decided_by_their_confidence_bounds(
    pytester: pytest.Pytester, fast: str
) -> None:
    pytester.makepyfile(SESSION.format(fast46=fast.format(n=46), fast200=fast.format(n=200)))
    result = pytester.runpytest("--llm-json=r.json")  # --llm-inconclusive=fail: the default
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(
        [
            "*✓ ttft.p90 < 200ms [[]run0]: observed * ms, interval [[]* ms, * ms] at 99%, "
            "target 200.0 ms, n=46",
            "*✗ ttft.p99 < 5ms [[]run0]: observed * ms, interval [[]* ms, ∞] at 99%, "
            "target 5.000 ms, n=200",
        ]
    )
    report = json.loads((pytester.path / "r.json").read_text())
    tests = {t["nodeid"].split("::")[1]: t for t in report["tests"]}

    p90 = tests["test_p90_of_46"]
    assert p90["outcome"] == "passed"
    (verdict,) = p90["slos"]
    ttft = p90["runs"][0]["metrics"]["ttft"]
    assert verdict["verdict"] == "pass" and verdict["reason"] == ""
    assert verdict["samples"] == 46 and verdict["confidence"] == 0.99
    lower, upper = verdict["interval"]
    # 46 samples: the upper bound is the slowest one (rank 46), the lower the 36th
    assert upper == pytest.approx(ttft["max"], abs=1e-3)
    assert 20 <= lower <= verdict["observed"] <= upper < 200

    p99 = tests["test_p99_of_200"]
    assert p99["outcome"] == "failed"
    (verdict,) = p99["slos"]
    assert verdict["verdict"] == "fail"
    assert verdict["samples"] == 200 and verdict["confidence"] == 0.99
    lower, upper = verdict["interval"]
    # 200 samples bound a p99 from below only (the 194th); an upper bound needs 459
    assert upper is None
    assert 20 <= lower <= verdict["observed"]
    assert p99["runs"][0]["metrics"]["ttft"]["min"] > 20
