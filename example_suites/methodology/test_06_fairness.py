"""Draft test "Scheduling Fairness": short and long requests sharing the server.

Mixed 80% short / 20% long classes (the draft's class definitions, long
inputs shortened to fit the tiny profile) at a load that creates contention.
Baseline for latency inflation: each class alone at its own share of the
arrival rate (the draft says "at the same total load"; the long class alone
at the full rate would be far past capacity, so its "inflation" would be
below 1 and say nothing about interference). Reported per class: TTFT/TPOT percentiles,
starvation rate (TTFT > 5x the class median), inflation; and Jain's index
over the classes' inflation.
"""

import pytest

from pytest_llmperf.analysis import class_fairness, collect

SHORT_LONG = {
    "short": {"input_tokens": (64, 256), "output_tokens": (32, 64)},
    "long": {"input_tokens": (768, 1024), "output_tokens": (64, 128)},
}
MIX = {"short": 0.8, "long": 0.2}
RATE = 40


@pytest.mark.llm_workload("synthetic-skewed", classes=SHORT_LONG, class_mix=MIX, requests=60)
@pytest.mark.llm_load("poisson", rate=RATE)
@pytest.mark.llm_slo("error_rate < 1%")
async def test_fairness_between_classes(llm_loadgen):
    isolated = {}
    for name, share in MIX.items():
        with collect(llm_loadgen) as alone:
            await llm_loadgen.run(
                gate=False,
                requests=12,
                rate=RATE * share,
                workload_params={"class_mix": {name: 1}},
            )
        ttft = sorted(r.ttft_ms for r in alone.rows if r.ttft_ms is not None)
        isolated[name] = ttft[len(ttft) // 2]
    with collect(llm_loadgen) as mixed:
        await llm_loadgen.run()
    table = class_fairness(mixed.rows, isolated_ttft_p50_ms=isolated)
    llm_loadgen.attach(table)
    assert 0.5 <= table["jain_index"] <= 1.0
