"""Memory: 200,000 requests in one run keep the client's memory flat.

Target (issue #3): peak memory growth under 100 MB for a 200,000-request run,
because a run keeps histograms and an on-disk event log, not lists of
samples (each request's record is dropped once it is accumulated and
queued for the log).

Measures the process's resident set size (VmRSS, sampled every 50 ms by a
thread) after a 2,000-request warm-up run — imports, connection pool,
buffers — and its peak during the long run, with ``--llm-events`` on.
Server: ``benchmarks/streaming_server.py`` with zero delay; max-throughput at
64 concurrent 4-token streams.

    python benchmarks/loadgen_memory.py [--requests 200000] [--no-events]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from streaming_server import start_server

from pytest_llmperf.client.endpoint import Endpoint
from pytest_llmperf.loadgen import LoadRun
from pytest_llmperf.results.run_result import RunResult
from pytest_llmperf.specs.load import LoadSpec
from pytest_llmperf.specs.run import RunSpec


def rss_mb() -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


class PeakRss:
    """Samples RSS in a thread; ``.peak`` is the highest seen since ``reset()``."""

    def __init__(self) -> None:
        self.peak = 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        while not self._stop.wait(0.05):
            self.peak = max(self.peak, rss_mb())

    def reset(self) -> None:
        self.peak = rss_mb()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()


def one_run(url: str, requests: int, events: Path | None) -> tuple[RunResult, float]:
    spec = RunSpec(
        "synthetic",
        {"input_tokens": 8, "output_tokens": 4},
        0,
        LoadSpec.parse("max-throughput", {"concurrency": 64}),
        requests=requests,
    )
    t = time.perf_counter()
    result = asyncio.run(LoadRun(Endpoint(url + "/v1"), spec, events_dir=events).execute())
    return result, time.perf_counter() - t


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--requests", type=int, default=200_000)
    ap.add_argument("--no-events", action="store_true")
    args = ap.parse_args()
    print(
        f"machine: {platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()}"
        f", load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}"
    )
    tmp = tempfile.TemporaryDirectory()
    events = None if args.no_events else Path(tmp.name)
    server = start_server(0, 0, record=False)
    sampler = PeakRss()
    try:
        one_run(server.url, 2000, events)
        base = rss_mb()
        sampler.reset()
        result, wall = one_run(server.url, args.requests, events)
        peak = sampler.peak
    finally:
        sampler.stop()
        server.stop()
    size = 0.0
    if result.events_path:
        size = Path(result.events_path).stat().st_size / 2**20
    print(
        f"{args.requests} requests in {wall:.0f} s ({args.requests / wall:.0f} req/s), "
        f"counts {result.counts}, event log {'off' if events is None else f'{size:.0f} MB'}"
    )
    print(
        f"  RSS after warm-up run {base:.1f} MB, peak during the run {peak:.1f} MB: "
        f"growth {peak - base:.1f} MB (target < 100 MB)"
    )
    tmp.cleanup()


if __name__ == "__main__":
    main()
