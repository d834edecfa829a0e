"""``python -m pytest_llmperf.sim --virtual``: one virtual-time run, printed.

The run itself is virtual.py's; this is its table (deterministic: no wall-clock
values in it) and the command line's checks, JSON file and wall time.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Any

from .profiles import Profile
from .virtual import run_virtual

__all__ = ["format_result", "run_cli"]


def format_result(d: dict[str, Any]) -> str:
    """Human-readable table of a run (deterministic: no wall-clock values)."""
    load = d["load"]
    what = (
        f"rate {load['rate']:g} req/s" if "rate" in load else f"concurrency {load['concurrency']}"
    )
    lines = [
        f"profile {d['profile']} ({d['model']}), {load['pattern']} {what}, "
        f"duration {load['duration']:g} s, "
        f"seed {d['seed']}",
        f"workload: input {d['workload']['input_tokens']} "
        f"output {d['workload']['output_tokens']} tokens"
        + (
            f", shared prefix {d['workload']['shared_prefix']}"
            if d["workload"]["shared_prefix"]
            else ""
        ),
        "counts: " + ", ".join(f"{k} {v}" for k, v in d["counts"].items()),
        "",
        f"{'metric':<8}{'p50':>11}{'p90':>11}{'p95':>11}{'p99':>11}{'p99.9':>11}{'mean':>11}{'max':>11}",
    ]
    m = d["metrics"]
    for name in ("ttft", "tpot", "itl", "e2e"):
        s = m[name]
        cells = [s[k] for k in ("p50", "p90", "p95", "p99", "p99.9", "mean", "max")]
        lines.append(
            f"{name + ' ms':<8}"
            + "".join(f"{c:>11.3f}" if c is not None else f"{'-':>11}" for c in cells)
        )
    lines.append("")

    def num(v: float | None, fmt: str) -> str:
        return "-" if v is None else format(v, fmt)

    lines.append(
        f"request_throughput {num(m['request_throughput'], '.3f')} req/s, "
        f"output_throughput {num(m['output_throughput'], '.1f')} tok/s, "
        f"input_throughput {num(m['input_throughput'], '.1f')} tok/s, "
        f"error_rate {num(m['error_rate'], '.4f')}"
    )
    e = d["engine"]
    lines.append(
        f"engine: {e['steps']} steps over {e['simulated_s']:.3f} simulated s, "
        f"{e['preemptions']} preemptions, "
        f"max running {e['max_running']}, max waiting {e['max_waiting']}, "
        f"prefix cache hit rate {e['prefix_cache_hit_rate']:.3f}, dropped {e['dropped_unservable']}"
    )
    for name, s in d.get("by_model", {}).items():  # only with adapters
        ttft, tpot = s["metrics"]["ttft"], s["metrics"]["tpot"]
        lines.append(
            f"model {name}: completed {s['counts']['completed']}, "
            f"ttft p50 {num(ttft['p50'], '.3f')} p99 {num(ttft['p99'], '.3f')} ms, "
            f"tpot p50 {num(tpot['p50'], '.3f')} p99 {num(tpot['p99'], '.3f')} ms"
        )
    if "lora_loads" in e:
        lines.append(f"adapter loads {e['lora_loads']}")
    for r in d.get("replicas", ()):  # only with several replicas (virtual_fleet.py)
        lines.append(
            f"replica {r['name']} ({d['router']}): {r['requests']} requests, {r['steps']} steps, "
            f"{r['preemptions']} preemptions, max running {r['max_running']}, "
            f"prefix cache hit rate {r['prefix_cache_hit_rate']:.3f}"
        )
    return "\n".join(lines)


def run_cli(args: argparse.Namespace, profile: Profile) -> int:
    """``--virtual`` mode of ``python -m pytest_llmperf.sim``."""
    if args.load in ("poisson", "constant") and not args.rate:
        print(f"error: --load {args.load} needs --rate", file=sys.stderr)
        return 2
    if args.load == "concurrency" and not args.concurrency:
        print("error: --load concurrency needs --concurrency", file=sys.stderr)
        return 2
    t0 = time.perf_counter()
    try:
        result = run_virtual(
            profile,
            load=args.load,
            rate=args.rate,
            concurrency=args.concurrency,
            duration=args.duration,
            input_tokens=args.input_tokens,
            output_tokens=args.output_tokens,
            shared_prefix=args.shared_prefix,
            seed=args.seed,
            adapters=args.adapters,
            keep_requests=False,  # only the summary is printed: memory stays flat
        )
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    wall = time.perf_counter() - t0
    d = result.to_dict()
    print(format_result(d))
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(d, f, indent=2, sort_keys=True)
            f.write("\n")
    print(f"(wall time {wall:.2f} s)", file=sys.stderr)
    return 0
