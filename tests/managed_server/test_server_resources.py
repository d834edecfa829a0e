"""ResourceSampler on a real process tree: a child that allocates 200 MB is seen."""

from __future__ import annotations

import subprocess
import sys

import psutil
import pytest

from pytest_llmperf.managed_server import ResourceSampler

# waits for a line on stdin, then starts a child that allocates 200 MB (touched) and says so
TREE = r"""
import subprocess, sys
sys.stdin.readline()
subprocess.run([sys.executable, "-c",
    "import sys, time\nx = b'x' * (200 * 2**20)\nprint('allocated', flush=True)\ntime.sleep(60)"],
    timeout=120)
"""


def test_the_sampler_sees_a_child_grow_by_200_mb() -> None:
    proc = subprocess.Popen(
        [sys.executable, "-c", TREE], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        assert proc.stdin is not None and proc.stdout is not None
        sampler = ResourceSampler(proc.pid, interval_s=0.1).start()
        proc.stdin.write("go\n")
        proc.stdin.flush()
        assert proc.stdout.readline().strip() == "allocated"  # evidence, not a sleep
        resources = sampler.stop(output_tokens=1000)
    finally:
        for child in psutil.Process(proc.pid).children(recursive=True):
            child.kill()
        proc.kill()
        proc.wait()
    assert resources["rss_growth_mb"] >= 150, resources
    assert resources["rss_max_mb"] >= resources["rss_start_mb"] + 150
    growth = resources["rss_end_mb"] - resources["rss_start_mb"]
    assert resources["rss_growth_mb"] == pytest.approx(growth, abs=0.002)  # each rounded
    assert resources["samples"] >= 2 and resources["cpu_s"] > 0
    assert resources["cpu_ms_per_output_token"] == pytest.approx(resources["cpu_s"], abs=1e-5)
    assert set(resources) == {
        "rss_start_mb",
        "rss_end_mb",
        "rss_max_mb",
        "rss_growth_mb",
        "cpu_s",
        "cpu_ms_per_output_token",
        "samples",
        "gpu_mem_max_mb",
        "gpu_note",
    }
    if resources["gpu_mem_max_mb"] is None:
        assert resources["gpu_note"]


def test_no_output_tokens_give_no_cpu_per_token_and_a_gone_pid_gives_no_figures() -> None:
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        resources = ResourceSampler(proc.pid, interval_s=0.05).start().stop(output_tokens=0)
    finally:
        proc.kill()
        proc.wait()
    assert resources["cpu_ms_per_output_token"] is None and resources["samples"] >= 1
    empty = ResourceSampler(proc.pid).start().stop(output_tokens=10)
    assert empty["samples"] == 0 and empty["rss_max_mb"] is None and empty["cpu_s"] is None
