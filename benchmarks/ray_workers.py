"""Ray actors vs local worker processes: the same run with ``--llm-workers=2`` and ``ray:2``.

Target (issue #15): 4,000 requests at concurrency 64 (16-token streams)
against a local zero-delay streaming server complete 4,000/4,000 with
``ray:2``, at no less than 0.85x the requests/s of ``--llm-workers=2`` in the
same session.

Both sides are one ``LoadRun`` each, as the plugin makes them: local workers
start two fresh processes per run; the Ray side uses one local Ray instance
(``ray.init(num_cpus=2)``, started for this session as the plugin does) whose
two actors stay warm across runs, as they do across a session's runs. The
sides alternate for ``--rounds`` rounds; req/s is requests / the run's wall
time (``LoadRun.execute``, worker or actor set-up included), and also over
the run's measured window alone (its ``request_throughput``: the issuing
rate once started, where the set-up no longer counts). The first Ray round
also creates the actors; it is shown apart, and the comparison is of the
best round of each side (as ``benchmarks/loadgen_throughput.py`` does).

    python benchmarks/ray_workers.py [--requests 4000] [--rounds 3]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import sys
import time
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from streaming_server import start_server

from pytest_llmperf.client.endpoint import Endpoint
from pytest_llmperf.loadgen import LoadRun
from pytest_llmperf.loadgen.scale_out.ray_workers import RayCluster
from pytest_llmperf.specs.load import LoadSpec
from pytest_llmperf.specs.run import RunSpec

CONCURRENCY = 64
TOKENS = 16
MODEL = "bench-model"
TARGET = 0.85


async def one_run(
    url: str, requests: int, ray: RayCluster | None
) -> tuple[float, float, dict[str, Any]]:
    """``(requests / wall time, the run's own request_throughput, self_check)``."""
    spec = RunSpec(
        "synthetic",
        {"input_tokens": 4, "output_tokens": TOKENS},
        0,
        LoadSpec.parse("max-throughput", {"concurrency": CONCURRENCY}),
        requests=requests,
    )
    run = LoadRun(Endpoint(url + "/v1", model=MODEL), spec, workers=2, ray=ray)
    t0 = time.perf_counter()
    result = await run.execute()
    wall = time.perf_counter() - t0
    if result.counts["completed"] != requests:
        raise SystemExit(f"{'ray:2' if ray else '2'} lost requests: {result.counts}")
    window_rate = float(result.metrics["request_throughput"])  # type: ignore[arg-type]
    return requests / wall, window_rate, result.self_check


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--requests", type=int, default=4000)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    server = start_server(0, 0, record=False)
    cluster = RayCluster(local_cpus=2)
    local: list[tuple[float, float]] = []
    ray: list[tuple[float, float]] = []
    try:
        t = time.perf_counter()
        cluster.connect()
        connect_s = time.perf_counter() - t
        cold, _, _ = asyncio.run(one_run(server.url, args.requests, cluster))
        for _ in range(args.rounds):
            wall_rate, window_rate, _ = asyncio.run(one_run(server.url, args.requests, None))
            local.append((wall_rate, window_rate))
            wall_rate, window_rate, check = asyncio.run(one_run(server.url, args.requests, cluster))
            ray.append((wall_rate, window_rate))
    finally:
        cluster.close()
        server.stop()
    print(
        f"machine: {platform.machine()}, {os.cpu_count()} CPUs, Python "
        f"{platform.python_version()}, load average: "
        + " ".join(f"{x:.2f}" for x in os.getloadavg())
    )
    print(
        f"max-throughput, {CONCURRENCY} concurrent {TOKENS}-token streams, {args.requests} "
        f"requests a run, zero-delay benchmark server, {args.rounds} rounds"
    )
    print(f"  local Ray instance started in {connect_s:.1f} s (once per session)")
    print(f"  ray:2, first run (creates the actors): {cold:7.0f} req/s")
    for what, k in (("run wall time, set-up included", 0), ("measured window only", 1)):
        mine = [r[k] for r in local]
        theirs = [r[k] for r in ray]
        print(f"  req/s over the {what}:")
        print(
            f"    --llm-workers=2:     best {max(mine):7.0f}  rounds "
            + " ".join(f"{r:.0f}" for r in mine)
        )
        print(
            f"    --llm-workers=ray:2: best {max(theirs):7.0f}  rounds "
            + " ".join(f"{r:.0f}" for r in theirs)
        )
        ratio = max(theirs) / max(mine)
        verdict = "meets" if ratio >= TARGET else "MISSES"
        per_round = sorted(t / m for t, m in zip(theirs, mine, strict=True))
        print(
            f"    ratio ray:2 / 2: {ratio:.2f} ({verdict} the target >= {TARGET}); per round "
            + " ".join(f"{r:.2f}" for r in per_round)
        )
    print(f"  placement: {check.get('worker_nodes')}")


if __name__ == "__main__":
    main()
