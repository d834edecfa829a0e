"""A/B comparisons against managed servers: each side's blocks watch that side's server;
a side's server that dies ends the comparison after that block, and the merged run keeps
the exit; the blocks' resources merge into one ``server_process``."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pytest_llmperf.client.endpoint import Endpoint, Timeouts
from pytest_llmperf.loadgen.server_watch import merged_server_process
from pytest_llmperf.managed_server import ManagedServer, ServerCommand
from pytest_llmperf.methodology.llm_loadgen import LlmLoadgen
from pytest_llmperf.results.run_result import StopReason
from pytest_llmperf.specs.perf import PerfSpec


@pytest.fixture
def sims(tmp_path: Path) -> Iterator[list[ManagedServer]]:
    """Two simulators started through ManagedServer (20 ms between tokens)."""
    started: list[ManagedServer] = []
    try:
        for name in ("candidate", "reference"):
            argv = [sys.executable, "-m", "pytest_llmperf.sim", "--port", "{port}"]
            command = ServerCommand.parse(
                [*argv, "--set", "itl_ms=20"], name=name, ready_timeout_s=60, stop_grace_s=2
            )
            started.append(ManagedServer.start(command, log_dir=tmp_path, model="sim-fixed"))
        yield started
    finally:
        for server in started:
            server.stop()


def _endpoint(server: ManagedServer) -> Endpoint:
    return Endpoint(server.url + "/v1", model="sim-fixed", timeouts=Timeouts.from_seconds(30))


@pytest.mark.asyncio
async def test_a_side_whose_server_dies_ends_the_comparison(sims: list[ManagedServer]) -> None:
    """Four blocks of 60 requests (2 s each at concurrency 6): the candidate's server is
    killed in its first block; no block runs after it."""
    candidate, reference = sims
    spec = PerfSpec.from_markers(
        (("synthetic",), {"input_tokens": 8, "output_tokens": 100, "requests": 240}),
        ((), {"pattern": "concurrency", "concurrency": 6}),
        [],
    )
    gen = LlmLoadgen(
        _endpoint(candidate),
        spec,
        reference=_endpoint(reference),
        server=candidate,
        reference_server=reference,
    )
    killer = threading.Timer(0.8, os.kill, (candidate.pid, signal.SIGKILL))
    killer.start()
    try:
        result = await asyncio.wait_for(gen.run(), 60)
    finally:
        killer.cancel()
    (ab,) = gen.comparisons
    assert ab.order == ["A1"]  # the comparison stopped with the block the server died in
    assert result.stop_reason is StopReason.SERVER_EXITED
    assert result.stop_detail.startswith("server exited with signal 9 (SIGKILL) at ")
    assert result.stop_detail.endswith("into run0-candidate-block1")
    process = result.server_process
    assert process is not None and process["pid"] == candidate.pid
    assert process["exit"]["signal"] == 9 and "LISTENING" in process["exit"]["log_tail"]
    assert ab.reference.server_process is None  # its blocks never ran
    assert result.to_dict()["server_process"]["exit"]["signal_name"] == "SIGKILL"


def _block(start: float, end: float, cpu: float, samples: int, **more: Any) -> dict[str, Any]:
    return {
        "name": "vllm",
        "pid": 7,
        "log": "/x.log",
        "resources": {
            "rss_start_mb": start,
            "rss_end_mb": end,
            "rss_max_mb": max(start, end) + 1,
            "rss_growth_mb": end - start,
            "cpu_s": cpu,
            "cpu_ms_per_output_token": 1.0,
            "samples": samples,
            "gpu_mem_max_mb": None,
            "gpu_note": "no NVML",
        },
        "exit": None,
        **more,
    }


def test_a_sides_blocks_merge_into_one_server_process() -> None:
    exit = {"signal": 9, "message": "server exited with signal 9 (SIGKILL)"}
    merged = merged_server_process(
        [_block(100, 120, 1.5, 4), None, _block(125, 180, 0.5, 3, exit=exit)], 1000
    )
    assert merged is not None
    assert (merged["name"], merged["pid"], merged["exit"]) == ("vllm", 7, exit)
    assert merged["resources"] == {
        "rss_start_mb": 100.0,
        "rss_end_mb": 180.0,
        "rss_max_mb": 181.0,
        "rss_growth_mb": 80.0,  # from the first block's start to the last one's end
        "cpu_s": 2.0,
        "cpu_ms_per_output_token": 2.0,
        "samples": 7,
        "gpu_mem_max_mb": None,
        "gpu_note": "no NVML",
    }
    assert merged_server_process([None, None], 10) is None
