"""SLOs on the GPUs' figures (``gpu.power_w.mean < 300W``, ``energy_per_output_token_j <
0.5J``): the grammar (units, errors naming the SLO and the GPU names), rulesets, and the
verdicts on a run's ``gpu`` block (one value as observed; inconclusive with why where the
block or the value is missing; whole runs only, not made inconclusive by a
generator-bound run)."""

from __future__ import annotations

import pytest
from gpu_figures_sample import figures

from pytest_llmperf.errors import LlmPerfUsageError
from pytest_llmperf.gpu.figures import GpuDevice, GpuFigures
from pytest_llmperf.results.accumulator import MetricsAccumulator
from pytest_llmperf.results.run_result import RunResult
from pytest_llmperf.slo.gpu_verdicts import NO_GPU
from pytest_llmperf.slo.verdicts import Verdict, evaluate, evaluate_runs
from pytest_llmperf.specs.gpu_names import GPU_METRICS
from pytest_llmperf.specs.rulesets import ruleset_from_mapping
from pytest_llmperf.specs.slo import parse_slo
from pytest_llmperf.specs.stages import Stage


@pytest.mark.parametrize(
    ("expr", "metric", "target", "unit"),
    [
        ("gpu.power_w.mean < 300W", "gpu.power_w.mean", 300.0, "W"),
        ("gpu.power_w.max < 1.2kW", "gpu.power_w.max", 1200.0, "W"),
        ("gpu.energy_j < 5kJ", "gpu.energy_j", 5000.0, "J"),
        ("gpu.energy_j <= 0.5Wh", "gpu.energy_j", 1800.0, "J"),
        ("gpu.memory_used_mb.max < 70GB", "gpu.memory_used_mb.max", 71680.0, "MB"),
        ("gpu.memory_used_mb.max < 900", "gpu.memory_used_mb.max", 900.0, "MB"),
        ("gpu.util > 50%", "gpu.util", 0.5, "fraction"),
        ("gpu.temperature_c.max < 85C", "gpu.temperature_c.max", 85.0, "C"),
        ("energy_per_output_token_j < 0.5J", "energy_per_output_token_j", 0.5, "J"),
        ("energy_per_output_token_j < 300mJ", "energy_per_output_token_j", 0.3, "J"),
    ],
)
def test_the_gpu_names_parse_in_their_units(
    expr: str, metric: str, target: float, unit: str
) -> None:
    slo = parse_slo(expr)
    assert (slo.metric, slo.stat, slo.unit, slo.is_gpu) == (metric, None, unit, True)
    assert slo.target == pytest.approx(target)
    assert not slo.is_process and not slo.is_server and slo.name == metric


@pytest.mark.parametrize(
    ("expr", "says"),
    [
        ("gpu.power_w < 300W", "unknown GPU metric 'gpu.power_w'"),
        ("gpu.fan < 3", "unknown GPU metric 'gpu.fan'"),
        ("gpu.util.max > 50%", "takes no statistic (got 'max')"),
        ("energy_per_output_token_j.p99 < 1J", "takes no statistic (got 'p99')"),
        ("gpu.util > 50W", "bad unit 'W' for gpu.util (in fraction); use '%' or no unit"),
        ("gpu.energy_j < 5kW", "bad unit 'kW' for gpu.energy_j (in J); use 'J', 'kJ', 'mJ'"),
        ("gpu.temperature_c.max < 85F", "bad unit 'F'"),
    ],
)
def test_a_bad_gpu_slo_names_itself_and_the_gpu_names(expr: str, says: str) -> None:
    with pytest.raises(LlmPerfUsageError) as info:
        parse_slo(expr)
    text = str(info.value)
    assert repr(expr) in text and says in text
    if "unknown" in says or "statistic" in says:
        assert all(name in text for name in GPU_METRICS)


def test_an_unknown_metric_lists_the_gpu_names_among_the_known() -> None:
    with pytest.raises(LlmPerfUsageError) as info:
        parse_slo("joules < 3")
    assert "energy_per_output_token_j" in str(info.value) and "gpu.power_w.mean" in str(info.value)


def test_a_ruleset_takes_gpu_targets_with_a_limit_implied() -> None:
    ruleset = ruleset_from_mapping(
        {"targets": {"energy_per_output_token_j": "0.5J", "gpu.util": "> 50%"}},
        source="tier.yaml",
    )
    assert [s.expr for s in ruleset.slos] == ["energy_per_output_token_j < 0.5J", "gpu.util > 50%"]
    with pytest.raises(LlmPerfUsageError, match=r"tier.yaml: targets.gpu.util.*gpu.power_w.mean"):
        ruleset_from_mapping({"targets": {"gpu.util": {"max": "50%"}}}, source="tier.yaml")


def run(gpu: GpuFigures | None = None, **kwargs: object) -> RunResult:
    return RunResult(
        workload={},
        load={},
        endpoint={},
        accumulator=MetricsAccumulator(),
        label="run0",
        gpu=gpu,
        **kwargs,  # type: ignore[arg-type]
    )


def test_each_figure_is_judged_as_observed() -> None:
    result = run(figures())  # 500 W mean, 580 W peak, 1000 J, 0.25 J/token, 41000 MB, 0.6, 65 C
    cases = {
        "gpu.power_w.mean < 600W": ("pass", 500.0),
        "gpu.power_w.mean < 400W": ("fail", 500.0),
        "gpu.power_w.max < 0.5kW": ("fail", 580.0),
        "gpu.energy_j < 1.1kJ": ("pass", 1000.0),
        "gpu.memory_used_mb.max < 41GB": ("pass", 41000.0),
        "gpu.memory_used_mb.max < 40000": ("fail", 41000.0),
        "gpu.util > 50%": ("pass", 0.6),
        "gpu.util > 70%": ("fail", 0.6),
        "gpu.temperature_c.max < 65C": ("fail", 65.0),
        "energy_per_output_token_j < 0.5J": ("pass", 0.25),
        "energy_per_output_token_j < 200mJ": ("fail", 0.25),
    }
    for expr, (verdict, observed) in cases.items():
        got = evaluate(parse_slo(expr), result)
        assert (got.verdict, got.observed, got.run) == (verdict, observed, "run0"), expr
        assert got.samples == 42 and got.reason == ""


def test_no_gpu_block_is_inconclusive_saying_no_gpu_was_read() -> None:
    got = evaluate(parse_slo("energy_per_output_token_j < 0.5J"), run(None))
    assert (got.verdict, got.observed, got.samples) == (Verdict.INCONCLUSIVE, None, 0)
    assert got.reason == NO_GPU and "--llm-gpu=off" in got.reason and "gpu role" in got.reason


def test_a_missing_value_is_inconclusive_naming_what_was_missing() -> None:
    no_tokens = run(figures(output_tokens=None))
    got = evaluate(parse_slo("energy_per_output_token_j < 0.5J"), no_tokens)
    assert got.verdict is Verdict.INCONCLUSIVE and "no output tokens" in got.reason
    assert evaluate(parse_slo("gpu.energy_j < 5kJ"), no_tokens).verdict is Verdict.PASS

    block = figures()
    block.devices[1].energy_j = None  # no counter, and too few samples to integrate
    block.devices[1].samples = 1
    block.notes.append("GPU 1 has no energy counter")
    got = evaluate(parse_slo("energy_per_output_token_j < 0.5J"), run(block))
    assert got.verdict is Verdict.INCONCLUSIVE and got.observed is None
    assert got.reason == (
        "energy_per_output_token_j: no energy for GPU 1: no energy counter and too few power "
        "samples to integrate (1 samples) (GPU 1 has no energy counter)"
    )
    # the GPU that is known is not summed alone into a smaller total
    assert evaluate(parse_slo("gpu.energy_j < 5kJ"), run(block)).verdict is Verdict.INCONCLUSIVE
    empty = evaluate(parse_slo("gpu.util > 5%"), run(GpuFigures(notes=["dcgm page failed"])))
    assert empty.reason == "gpu.util: the gpu block lists no GPU (dcgm page failed)"
    no_temp = GpuFigures(devices=[GpuDevice(id="3", source="dcgm", host="node-a")])
    got = evaluate(parse_slo("gpu.temperature_c.max < 85C"), run(no_temp))
    assert got.reason == "gpu.temperature_c.max: no GPU gave its temperature (GPU 3 on node-a)"


def test_a_generator_bound_run_still_judges_the_gpus() -> None:
    bound = run(figures(), self_check={"generator_bound": True, "reasons": ["lag"]})
    assert evaluate(parse_slo("gpu.power_w.mean < 600W"), bound).verdict is Verdict.PASS


def test_a_staged_run_judges_the_gpus_once_on_the_whole_run() -> None:
    staged = run(figures(), stage_plan=[Stage(1.0, rate=1.0), Stage(1.0, rate=2.0)])
    slos = [parse_slo("gpu.power_w.mean < 600W")]
    verdicts = evaluate_runs(slos, [staged])
    assert [(v.verdict, v.stage, v.observed) for v in verdicts] == [("pass", None, 500.0)]
