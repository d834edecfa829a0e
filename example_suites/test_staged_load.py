"""Load as production sends it: stages, a ramp, bursts, a concurrency cap, abandoned answers.

One run goes through several load levels on the clock; each stage reports
its own planned and achieved rate and its own metrics (``run["stages"]`` in
the JSON report), and every SLO is judged on every stage: the failure table
names the stage that broke it. A stage may also carry SLOs of its own.
See docs/load-shapes.md.
"""

import pytest


@pytest.mark.llm_workload("synthetic-uniform", output_tokens=(16, 64), seed=3)
@pytest.mark.llm_load(
    "poisson",
    stages=[
        {"rate": 15, "duration": 2},
        {"rate": 40, "duration": 2, "slo": "ttft.p90 < 400ms"},  # the busy hour's own bar
    ],
)
@pytest.mark.llm_slo("ttft.p50 < 250ms", "error_rate < 1%")
async def test_quiet_then_busy(llm_loadgen):
    result = await llm_loadgen.run()
    quiet, busy = result.to_dict()["stages"]
    assert busy["achieved_rate"] > 1.5 * quiet["achieved_rate"]  # 40 vs 15 planned, Poisson


@pytest.mark.llm_workload("synthetic-uniform", output_tokens=(16, 64), seed=4)
@pytest.mark.llm_load(
    "poisson",
    ramp={"from": 10, "to": 50, "duration": 3, "shape": "linear", "steps": 3},
    burstiness=0.5,  # gamma gaps: twice Poisson's spread, the same mean rate
)
@pytest.mark.llm_slo("ttft.p50 < 300ms", "error_rate < 1%")
async def test_a_bursty_ramp(llm_loadgen):
    result = await llm_loadgen.run()
    rates = [stage["planned_rate"] for stage in result.to_dict()["stages"]]
    assert rates == sorted(rates)


@pytest.mark.llm_workload("synthetic-uniform", output_tokens=(16, 64), requests=60, seed=5)
@pytest.mark.llm_load(
    "poisson",
    rate=20,
    max_concurrency=16,  # a gateway's per-replica limit: arrivals beyond it queue
    cancel={"share": 0.1, "after_tokens": 8},  # one user in ten stops reading early
)
@pytest.mark.llm_slo("ttft.p90 < 1s", "queue_wait.p50 < 500ms", "error_rate < 1%")
async def test_a_capped_gateway_with_impatient_users(llm_loadgen):
    result = await llm_loadgen.run()
    # abandoned answers are counted apart: neither completed nor failed
    assert result.counts["cancelled"] > 0
    assert result.counts["failed"] == 0
