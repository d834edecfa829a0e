"""Is a 10% TTFT step found within one run, in histories measured on this machine?

The unit tests check the change-point detector on synthetic series (lognormal
noise of a known CV) and the end-to-end pipeline on simulator runs with a step
far beyond any machine noise (tests/analysis/test_change_points.py). Whether a
*small* step survives the noise of real runs is a property of the machine as
much as of the code, so it is measured here and printed, not asserted.

Each history is ``--runs`` short closed-loop runs (``--requests`` requests at
concurrency 16) against the fixed-latency simulator, TTFT ``--ttft-ms``, and
``--step`` times that from run ``runs // 2`` on; the value stored per run is
its TTFT p50, as the history store keeps it. Prints the series' CV before the
step, and over ``--histories`` histories how often a change point is found and
how often within ±1 run of the step, with its relative change.
Target: a 10% step found within ±1 run in at least 95% of histories on a quiet
machine (the synthetic tests' rate at CV 3%).

    python benchmarks/change_points_sim.py [--histories 5] [--runs 24] [--step 1.10]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pytest_llmperf.analysis.change_points import detect_change_points
from pytest_llmperf.client.endpoint import Endpoint, Timeouts
from pytest_llmperf.loadgen import LoadRun
from pytest_llmperf.sim import SimServer
from pytest_llmperf.specs.load import LoadSpec
from pytest_llmperf.specs.run import RunSpec


async def ttft_p50(ttft_ms: float, seed: int, requests: int) -> float:
    async with SimServer("fixed", ttft_ms=ttft_ms, itl_ms=1.0, seed=seed) as sim:
        endpoint = Endpoint(sim.url + "/v1", timeouts=Timeouts.from_seconds(10))
        spec = RunSpec(
            "synthetic",
            {"input_tokens": 8, "output_tokens": 4},
            0,
            LoadSpec.parse("concurrency", {"concurrency": 16, "seed": seed}),
            requests=requests,
        )
        result = await LoadRun(endpoint, spec).execute()
        return float(result.metrics["ttft"].p(50))


async def history(index: int, runs: int, step: float, ttft_ms: float, requests: int) -> list[float]:
    at = runs // 2
    return [
        await ttft_p50(ttft_ms * (step if i >= at else 1.0), index * runs + i, requests)
        for i in range(runs)
    ]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--histories", type=int, default=5)
    ap.add_argument("--runs", type=int, default=24)
    ap.add_argument("--step", type=float, default=1.10)
    ap.add_argument("--ttft-ms", type=float, default=100.0)
    ap.add_argument("--requests", type=int, default=48)
    args = ap.parse_args()
    at = args.runs // 2
    found = located = 0
    cvs: list[float] = []
    load = os.getloadavg()[0]
    for h in range(args.histories):
        values = asyncio.run(history(h, args.runs, args.step, args.ttft_ms, args.requests))
        before = values[:at]
        cvs.append(statistics.stdev(before) / statistics.mean(before))
        points = detect_change_points(values, seed=h)
        hits = [p for p in points if abs(p.index - at) <= 1]
        found += bool(points)
        located += bool(hits)
        change = f"{hits[0].relative_change:+.3f}" if hits else "-"
        print(
            f"history {h}: CV before the step {cvs[-1]:.3f}, change points at "
            f"{[p.index for p in points]}, relative change at the step {change}",
            flush=True,
        )
    print(
        f"{args.histories} histories of {args.runs} runs, step x{args.step:g} at run {at}: "
        f"found {found}/{args.histories}, within ±1 run {located}/{args.histories} "
        f"(target >= 95%); run-to-run CV median {statistics.median(cvs):.3f}; "
        f"load average {load:.2f} before, {os.getloadavg()[0]:.2f} after"
    )


if __name__ == "__main__":
    main()
