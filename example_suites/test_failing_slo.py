"""What a failing SLO looks like.

This target is impossible (a 1 ms time to first token), so the test fails
with a table of observed against target values. It is marked
``xfail(strict=True)`` so the example suite stays green; see the failure with

    pytest example_suites/test_failing_slo.py --runxfail

which prints something like:

    SLO violated: ttft.p50 < 1ms, observed 24.3 ms
    SLO              run   observed  target      verdict
    ---------------  ----  --------  ----------  -------
    ttft.p50 < 1ms   run0  24.3 ms   < 1.000 ms  ✗ FAIL
    error_rate < 1%  run0  0.00%     < 1.00%     ✓ PASS

and exits with status 1, which is what fails a CI job.
"""

import pytest


@pytest.mark.xfail(strict=True, reason="demonstrates a violated SLO")
@pytest.mark.llm_workload("synthetic", input_tokens=128, output_tokens=16, requests=20)
@pytest.mark.llm_load("poisson", rate=20)
@pytest.mark.llm_slo("ttft.p50 < 1ms", "error_rate < 1%")
async def test_impossible_ttft(llm_loadgen):
    await llm_loadgen.run()
