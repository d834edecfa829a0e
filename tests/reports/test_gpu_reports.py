"""A run's GPU figures (``runs[].gpu``) in every report: the JSON (block and verdicts), the
terminal's ``gpu [run]:`` line, the Markdown's table per run, the HTML's table with each
GPU's power and memory on the run's time axis, JUnit's ``llm_gpu[...]`` properties, and a
GPU baseline check in its own unit; nothing of it for a run that read no GPU. Hand-made
blocks (tests/gpu_figures_sample.py), no GPU."""

from __future__ import annotations

import re

from gpu_figures_sample import figures
from synthetic_session import ENDPOINT, payload, synthetic_run

from pytest_llmperf.gpu.figures import GpuFigures
from pytest_llmperf.reports.gpu_words import format_gpu_value, gpu_parts
from pytest_llmperf.reports.html import build_html_report
from pytest_llmperf.reports.json_report import build_report
from pytest_llmperf.reports.junit import junit_properties, regression_properties, run_properties
from pytest_llmperf.reports.markdown import build_markdown
from pytest_llmperf.reports.session_data import SessionData
from pytest_llmperf.reports.terminal import summary_lines
from pytest_llmperf.slo.gpu_regression import compare_gpu
from pytest_llmperf.slo.regression import Thresholds
from pytest_llmperf.slo.verdicts import evaluate
from pytest_llmperf.specs.gpu_names import gpu_values
from pytest_llmperf.specs.slo import parse_slo

NODEID = "tests/test_chat.py::test_energy"
SLOS = ["energy_per_output_token_j < 0.5J", "gpu.power_w.mean < 400W"]


def session(gpu: GpuFigures | None, outcome: str = "failed") -> SessionData:
    run = synthetic_run(40, 200, seed=1, rate=40, label="run0")
    run.gpu = gpu
    data = SessionData()
    data.add(NODEID, outcome, payload([run], SLOS))
    if gpu is not None:
        for expr in SLOS:
            data.tests[NODEID].slos.append(evaluate(parse_slo(expr), run).to_dict())
    return data


def report(gpu: GpuFigures | None) -> dict:
    return build_report(session(gpu), endpoint=ENDPOINT, session={})


def test_the_json_carries_the_block_and_the_gpu_verdicts_in_their_units() -> None:
    (run,) = report(figures())["tests"][0]["runs"]
    assert run["gpu"]["energy_per_output_token_j"] == 0.25
    assert [d["series"]["t_s"][-1] for d in run["gpu"]["devices"]] == [2.0, 2.0]
    verdicts = {v["expr"]: v for v in report(figures())["tests"][0]["slos"]}
    per_token = verdicts["energy_per_output_token_j < 0.5J"]
    assert (per_token["verdict"], per_token["observed"], per_token["unit"]) == ("pass", 0.25, "J")
    assert verdicts["gpu.power_w.mean < 400W"]["verdict"] == "fail"
    assert "gpu" not in report(None)["tests"][0]["runs"][0]


def test_values_are_said_in_their_units() -> None:
    assert format_gpu_value(500.0, "W") == "500 W"
    assert format_gpu_value(41.25, "W") == "41.2 W"
    assert format_gpu_value(0.0123, "J") == "0.0123 J"
    assert format_gpu_value(1.5, "J") == "1.50 J"
    assert format_gpu_value(0.6, "fraction") == "60.0%"
    assert format_gpu_value(65.0, "C") == "65.0 °C"
    assert format_gpu_value(None, "MB") == "-"


def test_the_terminal_says_one_gpu_line_per_run_and_nothing_without_a_block() -> None:
    block = figures().to_dict()
    assert ", ".join(gpu_parts(block, "run0")) == (
        "gpu [run0]: 2 GPUs (NVIDIA H200, nvml), power 500 W mean, 580 W max, energy 1000 J, "
        "0.25 J/token (server's tokens), memory max 41000 MB, util 60.0%"
    )
    lines = summary_lines(session(figures()), [], width=None)
    said = [line.strip() for line in lines if line.strip().startswith("gpu [run0]:")]
    assert said == [", ".join(gpu_parts(block, "run0"))]
    verdict = next(line for line in lines if "gpu.power_w.mean < 400W" in line)
    assert "500 W" in verdict  # the verdict's observed value in watts
    assert not any("gpu [" in line for line in summary_lines(session(None), [], width=None))
    noted = figures()
    noted.notes.append("GPU 1 has no energy counter: power integrated")
    wrapped = summary_lines(session(noted), [], width=80)
    assert all(len(line) <= 80 for line in wrapped)
    assert any("note: GPU 1 has no energy counter" in line for line in wrapped)


def test_markdown_has_a_gpu_table_per_run_with_a_row_per_gpu() -> None:
    text = build_markdown(report(figures()))
    section = text.split("### GPUs: power, energy and memory over each run")[1]
    rows = [line for line in section.splitlines() if line.startswith("| ")]
    assert rows[0].startswith("| GPU | power mean | power max | energy | J/token")
    assert rows[2] == "| all | 500 W | 580 W | 1000 J | 0.25 J | 41000 MB | 60.0% | 65.0 °C | 42 |"
    assert rows[3] == (
        "| GPU 0 (NVIDIA H200) | 300 W | 350 W | 600 J |   | 30000 MB | 50.0% | 60.0 °C | 21 |"
    )  # J per token is the GPUs' together only: the tokens are the server's
    assert rows[4].startswith("| GPU 1 (NVIDIA H200) | 200 W | 250 W | 400 J |")
    assert "### GPUs" not in build_markdown(report(None))


def test_the_html_has_a_gpu_table_and_power_and_memory_plots_on_the_time_axis() -> None:
    data = session(figures())
    html = build_html_report(build_report(data, endpoint=ENDPOINT, session={}), data)
    section = html.split("<h4>GPUs</h4>")[1].split("</section>")[0]
    assert "<th>all</th>" in section and "<th>GPU 1 (NVIDIA H200)</th>" in section
    assert '<td class="num">0.25 J</td>' in section
    assert 'data-kind="gpu-power-w"' in section and 'data-kind="gpu-memory-used-mb"' in section
    power = section.split('data-kind="gpu-power-w"')[1].split("</svg>")[0]
    assert "GPU 0" in power and "GPU 1" in power  # a line per GPU, in the legend
    assert "s since the run started" in power
    assert len(re.findall(r"<path|<polyline", power)) >= 2
    assert "Read from nvml, every 0.1 s" in section
    plain = session(None)
    assert "<h4>GPUs</h4>" not in build_html_report(
        build_report(plain, endpoint=ENDPOINT, session={}), plain
    )


def test_junit_properties_name_each_figure_and_run() -> None:
    runs = report(figures())["tests"][0]["runs"]
    props = dict(run_properties(runs))
    assert props["llm_gpu[energy_per_output_token_j][run0]"] == "0.25 J"
    assert props["llm_gpu[gpu.power_w.mean][run0]"] == "500 W"
    assert props["llm_gpu[gpu.util][run0]"] == "60.0%"
    assert props["llm_gpu[gpu.memory_used_mb.max][run0]"] == "41000 MB"
    assert not [k for k in run_properties(report(None)["tests"][0]["runs"]) if "llm_gpu" in k[0]]
    run = synthetic_run(40, 200, seed=1, rate=40, label="run0")
    run.gpu = figures()
    verdicts = dict(junit_properties([evaluate(parse_slo(SLOS[0]), run)]))
    assert verdicts["llm_slo[energy_per_output_token_j < 0.5J][run0].observed"] == "0.25 J"


def test_a_gpu_baseline_check_is_shown_in_its_unit_everywhere() -> None:
    named = Thresholds.parse("gpu.power_w.mean=5%")
    (check,) = compare_gpu(
        gpu_values(figures().to_dict()), gpu_values(figures(power=330.0).to_dict()), named,
        run="run0",
    )  # fmt: skip
    data = session(figures(power=330.0))
    data.tests[NODEID].baseline.append(check.to_dict())
    lines = summary_lines(data, [], width=None)
    assert "  ✗ baseline gpu.power_w.mean [run0]: regressed: 500 W -> 560 W (+12.0%)" in lines
    props = dict(regression_properties([check]))
    assert props["llm_baseline[gpu.power_w.mean][run0].current"] == "560 W"
    html = build_html_report(build_report(data, endpoint=ENDPOINT, session={}), data)
    row = html.split("<td>gpu.power_w.mean</td>")[1].split("</tr>")[0]
    assert '<td class="num">500 W</td><td class="num">560 W</td>' in row
    assert "gpu.power_w.mean" in build_markdown(build_report(data, endpoint=ENDPOINT, session={}))
