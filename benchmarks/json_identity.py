"""Fixed-seed reports, minus timings: prove a restructuring changed no behaviour.

Runs one small pytest session against the embedded simulator (open loop with
stages and cancel points, closed loop with warm-up, max-throughput, multi-turn
conversations, a failing SLO) with ``--llm-json``, plus one virtual-time
simulator run (``python -m pytest_llmperf.sim --virtual``, fully
deterministic), and writes both, normalised, to one JSON file:

- the session's JSON report with every float replaced by ``"<float>"`` and
  every value under a key that names a time, a path, a host or a version
  replaced by ``"<varies>"`` (latencies and rates differ from run to run;
  keys, counts, outcomes, verdict words, workload and load descriptions,
  sample digests and the order of everything must not);
- the virtual run's metrics exactly (same seed => same numbers).

``SOURCE`` is the folder put first on ``PYTHONPATH`` (``.`` for this
checkout, or a copy of an older ``pytest_llmperf``)::

    python benchmarks/json_identity.py . --out /tmp/after.json
    python benchmarks/json_identity.py /tmp/before --out /tmp/before.json
    diff /tmp/before.json /tmp/after.json   # empty: identical minus timings

Each session runs in a temporary folder with ``SOURCE`` first on ``PYTHONPATH`` (which
wins over an installed or editable copy); the script refuses when the package imported
there is not ``SOURCE``'s, so a "before" run cannot quietly test the current tree.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

SUITE = """
import pytest

@pytest.mark.llm_workload("synthetic", input_tokens=16, output_tokens=(2, 8), seed=7)
@pytest.mark.llm_load("constant",
                      stages=[{"rate": 60, "duration": 0.2}, {"rate": 90, "duration": 0.2}],
                      cancel={"share": 0.25, "after_tokens": 2})
@pytest.mark.llm_slo("error_rate < 50%")
async def test_open_loop_stages_cancel(llm_loadgen):
    await llm_loadgen.run()

@pytest.mark.llm_workload("synthetic-uniform", requests=20, seed=3, warmup=4)
@pytest.mark.llm_load("concurrency", concurrency=4)
@pytest.mark.llm_slo("ttft.p50 < 30s", "error_rate < 1%")
async def test_closed_loop_warmup(llm_loadgen):
    await llm_loadgen.run()

@pytest.mark.llm_workload("synthetic-skewed", requests=16, seed=11)
@pytest.mark.llm_load("max-throughput", concurrency=8)
async def test_max_throughput(llm_loadgen):
    await llm_loadgen.run()

@pytest.mark.llm_workload("synthetic", input_tokens=8, output_tokens=2, requests=12, seed=5)
@pytest.mark.llm_load("poisson", rate=200, max_concurrency=3)
async def test_poisson_capped(llm_loadgen):
    await llm_loadgen.run()

@pytest.mark.llm_workload("conversation", path="chats.jsonl", sessions=True, think_time=0.0,
                          requests=6, seed=2)
@pytest.mark.llm_load("concurrency", concurrency=2)
async def test_conversations(llm_loadgen):
    await llm_loadgen.run()

@pytest.mark.llm_workload("synthetic", input_tokens=8, output_tokens=2, requests=24, seed=1)
@pytest.mark.llm_load("concurrency", concurrency=2)
@pytest.mark.llm_slo("ttft.p50 < 0.001ms")
async def test_failing_slo(llm_loadgen):
    await llm_loadgen.run()
"""

CHATS = [
    {
        "conversations": [
            {"from": "human", "value": f"question {i} part one about things"},
            {"from": "gpt", "value": f"answer {i} one"},
            {"from": "human", "value": f"question {i} part two, longer, about more things"},
            {"from": "gpt", "value": f"answer {i} two"},
        ]
    }
    for i in range(4)
]

# keys whose values depend on the clock, the machine or the port (never their structure)
VARYING_KEYS = {
    "url",
    "path",
    "host",
    "hostname",
    "pid",
    "python",
    "platform",
    "rootdir",
    "commit",
    "minimum_report",  # prose with the run's latencies in it
    # the server the gate started (issue 37): its command line (port), log file and log tail
    "cmd",
    "log",
    "log_tail",
    "PYTHONPATH",
    # counts of samples taken on a timer (resources every 0.5 s, /metrics every interval):
    # how many fit in a run depends on its wall-clock length
    "samples",
    "scrapes",
    "series",
}
VARYING_SUFFIXES = ("_at", "_s", "_ms", "_ns", "time", "duration", "version", "elapsed")
NUMBER = re.compile(r"127\.0\.0\.1:\d+|\d+\.\d+")  # the address first: its port varies


def normalise(value: Any, key: str = "") -> Any:
    if key in VARYING_KEYS:  # the whole value, a list or dict included
        return "<varies>"
    if isinstance(value, dict):
        return {k: normalise(v, k) for k, v in value.items()}
    if isinstance(value, list):
        return [normalise(v, key) for v in value]
    if key in VARYING_KEYS or key.lower().endswith(VARYING_SUFFIXES):
        return "<varies>"
    if isinstance(value, float):
        return "<float>"
    if isinstance(value, str):
        return NUMBER.sub("<n>", value)
    return value


def check_source(source: Path, work: Path) -> None:
    """Stop unless ``import pytest_llmperf`` with ``source`` on PYTHONPATH loads its copy
    (asked from ``work``, where the sessions run: a checkout as the current folder would
    come first on ``sys.path``)."""
    env = {**os.environ, "PYTHONPATH": str(source)}
    probe = "import pytest_llmperf, pathlib; print(pathlib.Path(pytest_llmperf.__file__).parent)"
    done = subprocess.run(
        [sys.executable, "-c", probe],
        cwd=work,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    loaded = Path(done.stdout.strip()).resolve()
    if loaded != (source / "pytest_llmperf").resolve():
        raise SystemExit(
            f"{sys.executable} imports pytest_llmperf from {loaded}, not from {source}: "
            "is SOURCE the folder that holds pytest_llmperf/?"
        )


def run_session(source: Path, work: Path) -> dict[str, Any]:
    (work / "test_identity.py").write_text(SUITE)
    (work / "chats.jsonl").write_text("".join(json.dumps(c) + "\n" for c in CHATS))
    (work / "pytest.ini").write_text("[pytest]\n")
    env = {**os.environ, "PYTHONPATH": str(source)}
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "--llm-json=r.json"],
        cwd=work,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    if not (work / "r.json").exists():
        raise SystemExit(f"no report:\n{done.stdout}\n{done.stderr}")
    report = json.loads((work / "r.json").read_text())
    # the per-request count of a run on wall-clock stages depends on timing: keep the tests'
    # outcomes and everything else; the exit status says which tests failed
    return {"exit_status": done.returncode, "report": normalise(report)}


def run_virtual(source: Path, work: Path) -> Any:
    env = {**os.environ, "PYTHONPATH": str(source)}
    out = work / "virtual.json"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest_llmperf.sim",
            "--virtual",
            "--profile",
            "tiny",
            "--load",
            "poisson",
            "--rate",
            "20",
            "--duration",
            "30",
            "--seed",
            "3",
            "--json",
            str(out),
        ],
        cwd=work,
        env=env,
        check=True,
        capture_output=True,
        timeout=600,
    )
    return json.loads(out.read_text())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("source", help="folder holding pytest_llmperf (. for this checkout)")
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    source = Path(args.source).resolve()
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        check_source(source, work)
        result = {"session": run_session(source, work), "virtual": run_virtual(source, work)}
    Path(args.out).write_text(json.dumps(result, indent=1, sort_keys=False) + "\n")


if __name__ == "__main__":
    main()
