"""How fast does virtual time run? Target: 10 simulated minutes in under 10 s.

Simulates Poisson arrivals at 20 req/s for 600 s on the ``llama-3.1-8b-h100``
profile (1000-token prompts, 128-token outputs: about 12,000 requests) and
prints the wall time, the simulated time and the steps per second.

    python benchmarks/sim_virtual_speed.py [--rate 20] [--duration 600] [--repeat 3]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pytest_llmperf.sim.virtual import run_virtual


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--profile", default="llama-3.1-8b-h100")
    ap.add_argument("--rate", type=float, default=20.0)
    ap.add_argument("--duration", type=float, default=600.0)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    walls = []
    for i in range(args.repeat):
        t0 = time.perf_counter()
        res = run_virtual(
            args.profile, load="poisson", rate=args.rate, duration=args.duration, seed=args.seed + i
        )
        walls.append(time.perf_counter() - t0)
        d = res.to_dict()
        print(
            f"run {i + 1}: {d['counts']['issued']} requests, {d['engine']['steps']} steps, "
            f"{d['engine']['simulated_s']:.1f} simulated s in {walls[-1]:.2f} s wall "
            f"({d['engine']['steps'] / walls[-1]:,.0f} steps/s, "
            f"{d['engine']['simulated_s'] / walls[-1]:.0f}x real time); "
            f"TTFT p99 {d['metrics']['ttft']['p99']:.1f} ms"
        )
    best = min(walls)
    verdict = "PASS" if best < 10.0 else "FAIL"
    print(
        f"best wall time {best:.2f} s for {args.duration:g} s of Poisson {args.rate:g} req/s "
        f"on {args.profile} (target < 10 s): {verdict}"
    )


if __name__ == "__main__":
    main()
