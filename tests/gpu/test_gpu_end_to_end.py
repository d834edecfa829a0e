"""Issue 41's done-when, end to end: a DCGM exporter's page (its documented format, two
GPUs) yields per-GPU power, energy and memory per run, and ``energy_per_output_token_j``
in every report.

A pytester session against the simulator's ``gpu-2`` profile (a real HTTP server on
127.0.0.1 in a process of its own, serving its two simulated GPUs as dcgm-exporter
writes them: sim/dcgm_page.py), the page found in the simulator's listing
(``--llm-server-metrics=discover``, role ``gpu``), ``--llm-gpu=off`` so that a GPU of
the machine running the tests is not read beside them. The figures are checked against
what the simulator's model says (idle 70 W to 700 W per GPU, memory from the KV
cache's use) and against each other (energy over the run against the mean power times
the run's time, joules per token against energy over the server's tokens), loosely
enough for a busy machine; the verdict of an SLO on energy per token is judged, and the
figures appear in the terminal, the Markdown, the HTML and the JUnit properties.
"""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET

import pytest

from pytest_llmperf.reports.gpu_words import format_gpu_value

SUITE = """
import pytest

@pytest.mark.llm_workload("synthetic", input_tokens=64, output_tokens=24, requests=24, seed=5)
@pytest.mark.llm_load("concurrency", concurrency=8)
@pytest.mark.llm_slo("energy_per_output_token_j < 20J", "gpu.memory_used_mb.max < 80GB")
async def test_gpus_judged(llm_loadgen):
    result = await llm_loadgen.run()
    assert result.gpu is not None


@pytest.mark.llm_workload("synthetic", input_tokens=64, output_tokens=24, requests=8, seed=5)
@pytest.mark.llm_load("concurrency", concurrency=8)
@pytest.mark.llm_slo("energy_per_output_token_j < 1mJ")
async def test_energy_target_missed(llm_loadgen):
    await llm_loadgen.run()
"""

IDLE_W, MAX_W = 70.0, 700.0  # profiles.yaml's defaults, each GPU within 2 % of them


def test_a_dcgm_page_gives_every_report_its_gpus(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_gpu_suite=SUITE)
    result = pytester.runpytest(
        "--llm-endpoint=sim:gpu-2",
        "--llm-server-metrics=discover,0.2",
        "--llm-gpu=off",
        "--llm-json=out.json",
        "--llm-markdown=out.md",
        "--llm-html=out.html",
        "--junitxml=out.xml",
        "--llm-summary=full",
    )
    result.assert_outcomes(passed=1, failed=1)
    report = json.loads((pytester.path / "out.json").read_text())
    tests = {t["nodeid"].split("::")[1]: t for t in report["tests"]}

    # JSON: the run's gpu block, per GPU and together
    (run,) = tests["test_gpus_judged"]["runs"]
    gpu = run["gpu"]
    devices = gpu["devices"]
    assert [d["id"] for d in devices] == ["0", "1"]
    assert len({d["uuid"] for d in devices}) == 2
    assert all(d["source"] == "dcgm" and d["name"] == "NVIDIA H100 80GB HBM3" for d in devices)
    for d in devices:
        assert IDLE_W * 0.98 <= d["power_w"]["mean"] <= d["power_w"]["max"] <= MAX_W * 1.02
        assert d["energy_from"] == "counter" and d["energy_j"] > 0
        assert 10_000 < d["memory_used_mb"]["max"] < 81_559  # weights and the KV cache in use
    assert gpu["energy_j"] == pytest.approx(sum(d["energy_j"] for d in devices))
    assert gpu["power_w"]["mean"] > 2 * IDLE_W  # eight sequences running most of the run
    tokens = gpu["output_tokens"]
    assert tokens == 24 * 24 and gpu["output_tokens_from"] == "server"
    assert gpu["energy_per_output_token_j"] == pytest.approx(gpu["energy_j"] / tokens)
    assert any(
        s.startswith("dcgm ") and s.endswith("/llmperf/dcgm/metrics") for s in gpu["sources"]
    )
    # each counter's energy against the power sampled over the same reads: the same story
    for d in devices:
        t, watts = d["series"]["t_s"], d["series"]["power_w"]
        window = t[-1] - t[0]
        assert IDLE_W * 0.98 * window <= d["energy_j"] <= MAX_W * 1.02 * window
        steps = zip(t, t[1:], watts, watts[1:], strict=False)
        trapezoids = sum((b - a) * (p + q) / 2 for a, b, p, q in steps)
        assert 0.5 < d["energy_j"] / trapezoids < 2  # 0.2 s samples miss the load's edges

    # the SLO on energy per token, judged (and a target no GPU meets, failed)
    slos = {s["expr"]: s for s in tests["test_gpus_judged"]["slos"]}
    judged = slos["energy_per_output_token_j < 20J"]
    assert judged["verdict"] == "pass"
    assert judged["observed"] == pytest.approx(gpu["energy_per_output_token_j"])
    assert slos["gpu.memory_used_mb.max < 80GB"]["verdict"] == "pass"
    (missed,) = tests["test_energy_target_missed"]["slos"]
    assert missed["verdict"] == "fail"

    # terminal, Markdown, HTML, JUnit: the run's GPU figures, the same numbers
    per_token = format_gpu_value(gpu["energy_per_output_token_j"], "J")  # as reports write it
    text = result.stdout.str()
    assert "gpu [run0]: 2 GPUs (NVIDIA H100 80GB HBM3, dcgm)" in text
    assert re.search(r"\d\.\d+ J/token \(server's tokens\)", text), text
    markdown = (pytester.path / "out.md").read_text()
    assert "### GPUs: power, energy and memory over each run" in markdown
    rows = [x for x in markdown.splitlines() if x.startswith("| GPU ") and " on " in x]
    assert len(rows) == 4  # two GPUs in each of the two tests' runs
    judged_part = markdown[markdown.index("`test_gpu_suite.py::test_gpus_judged` [run0] (dcgm") :]
    everything = next(x for x in judged_part.splitlines() if x.startswith("| all |"))
    assert f"| {per_token} |" in everything
    html = (pytester.path / "out.html").read_text()
    part = html[html.index('<section class="gpu">') :]
    assert re.search(r"<th>GPU 0 on [^<]+ \(NVIDIA H100 80GB HBM3\)</th>", part)
    assert f'<td class="num">{per_token}</td>' in part
    assert 'data-kind="gpu-power-w"' in part and 'data-kind="gpu-memory-used-mb"' in part
    prefix = "test_gpu_suite.py::test_gpus_judged::"  # the suite's properties, per test
    props = {
        p.get("name", "").removeprefix(prefix): p.get("value")
        for p in ET.parse(pytester.path / "out.xml").iter("property")
    }
    assert props["llm_gpu[energy_per_output_token_j][run0]"] == per_token
    assert props["llm_slo[energy_per_output_token_j < 20J][run0].verdict"] == "pass"
