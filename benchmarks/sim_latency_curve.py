"""Latency vs load on ``llama-3.1-8b-h100``, in virtual time: where is the knee?

Sweeps Poisson arrival rates (1000-token prompts, 128-token outputs by
default), and for each prints TTFT p50/p99, TPOT p50/p99, achieved request
and output throughput, peak batch and peak queue. Past saturation the wait
queue grows without bound during the run, so TTFT p99 shoots up while
throughput plateaus. ``--markdown`` prints the table used in
docs/simulator.md.

    python benchmarks/sim_latency_curve.py [--rates 5,10,...] [--duration 120] [--markdown]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pytest_llmperf.sim.virtual import run_virtual

DEFAULT_RATES = "2,5,10,15,20,24,26,28,30,32,35,40"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--profile", default="llama-3.1-8b-h100")
    ap.add_argument("--rates", default=DEFAULT_RATES)
    ap.add_argument("--duration", type=float, default=120.0)
    ap.add_argument("--input-tokens", type=int, default=1000)
    ap.add_argument("--output-tokens", type=int, default=128)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--markdown", action="store_true")
    ap.add_argument("--plot", action="store_true", help="also draw the curve in text")
    args = ap.parse_args()
    rows = []
    t0 = time.perf_counter()
    for rate in (float(x) for x in args.rates.split(",")):
        d = run_virtual(
            args.profile,
            load="poisson",
            rate=rate,
            duration=args.duration,
            seed=args.seed,
            input_tokens=args.input_tokens,
            output_tokens=args.output_tokens,
        ).to_dict()
        m = d["metrics"]
        rows.append(
            (
                rate,
                m["ttft"]["p50"],
                m["ttft"]["p99"],
                m["tpot"]["p50"],
                m["tpot"]["p99"],
                m["request_throughput"],
                m["output_throughput"],
                d["engine"]["max_running"],
                d["engine"]["max_waiting"],
            )
        )
    wall = time.perf_counter() - t0
    head = (
        "rate req/s",
        "TTFT p50 ms",
        "TTFT p99 ms",
        "TPOT p50 ms",
        "TPOT p99 ms",
        "req/s out",
        "tok/s out",
        "max batch",
        "max queue",
    )
    if args.markdown:
        print("| " + " | ".join(head) + " |")
        print("|" + "---:|" * len(head))
        for r in rows:
            print(
                f"| {r[0]:g} | {r[1]:.1f} | {r[2]:.1f} | {r[3]:.2f} | {r[4]:.2f} "
                f"| {r[5]:.2f} | {r[6]:.0f} | {r[7]} | {r[8]} |"
            )
    else:
        print(
            f"{args.profile}: Poisson, {args.input_tokens} in / {args.output_tokens} out tokens, "
            f"{args.duration:g} s per rate, seed {args.seed}"
        )
        print("".join(f"{h:>13}" for h in head))
        for r in rows:
            print(
                f"{r[0]:>13g}{r[1]:>13.1f}{r[2]:>13.1f}{r[3]:>13.2f}{r[4]:>13.2f}{r[5]:>13.2f}"
                f"{r[6]:>13.0f}{r[7]:>13}{r[8]:>13}"
            )
        peak = max(rows, key=lambda r: r[6])
        print(
            f"\nthroughput plateau ~{peak[6]:.0f} output tok/s ({peak[5]:.1f} req/s); "
            f"TTFT p99 x{rows[-1][2] / rows[0][2]:.0f} from the lowest to the highest rate"
        )
    if args.plot:
        print()
        print(plot(rows))
    print(f"(sweep took {wall:.1f} s wall)", file=sys.stderr)


def plot(rows: list[tuple]) -> str:
    """Horizontal bars: TTFT p99 on a log scale, output throughput on a linear one."""
    import math

    lo = math.log10(min(r[2] for r in rows))
    hi = math.log10(max(r[2] for r in rows))
    top = max(r[6] for r in rows)
    width = 30
    out = [f"{'req/s':>6}  {'TTFT p99 (log scale)':<{width}}  {'':>9}  output tok/s"]
    for r in rows:
        n = 1 + round((math.log10(r[2]) - lo) / (hi - lo or 1) * (width - 1))
        m = 1 + round(r[6] / top * (width - 1))
        out.append(f"{r[0]:>6g}  {'#' * n:<{width}}  {r[2]:>7.0f}ms  {'=' * m} {r[6]:.0f}")
    return "\n".join(out)


if __name__ == "__main__":
    main()
