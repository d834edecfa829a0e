"""How fast does virtual time run? Targets (issue 29): 10 simulated minutes in <= 1 s.

Simulates Poisson arrivals at 20 req/s for 600 s on the ``llama-3.1-8b-h100``
profile (1000-token prompts, 128-token outputs: about 12,000 requests) and
prints the wall time, the simulated time and the steps per second, best of
``--repeat`` runs (seeds ``seed``, ``seed + 1``, ...). The second target, one
hour at 100 req/s in <= 15 s (360,000 requests; the engine is overloaded and
drains until about 12,400 simulated s), is ``--rate 100 --duration 3600``, or
``--hour`` to check it after the default one (``--hour-repeat`` runs, 1 by
default: several seconds). Other rates and durations are timed without a verdict.
Runs stream their requests (``run_virtual(keep_requests=False)``, what the
``--virtual`` command line does); ``--keep`` keeps them all (the API's default: every
request and its token times, 2.4 GB for the hour).

Each run prints its wall and CPU time (``time.process_time``: on a shared machine
the wall time is the CPU time plus the waits for a core) and each best time the
process's peak RSS so far (``ru_maxrss``; issue 42: under 500 MB for the hour). The
machine's speed is printed first: a pure-Python loop's ns per iteration (no
system call in it), so figures from another machine can be placed. The load
average is printed with each best time: the figures are single-threaded and meant
for a quiet machine.

    python benchmarks/sim_virtual_speed.py [--rate 20] [--duration 600] [--repeat 3]
                                           [--hour [--hour-repeat 1]] [--keep]
"""

from __future__ import annotations

import argparse
import os
import resource
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pytest_llmperf.sim.virtual import run_virtual

# (rate req/s, simulated s) -> wall-time target in s (issue 29)
TARGETS = {(20.0, 600.0): 1.0, (100.0, 3600.0): 15.0}
HOUR = (100.0, 3600.0)


def python_speed(n: int = 5_000_000) -> float:
    """ns per iteration of a plain Python loop (best of 3): the machine's syscall-free
    CPU speed, for placing its figures beside another machine's."""
    best = float("inf")
    for _ in range(3):
        t0 = time.perf_counter_ns()
        x = 0
        for i in range(n):
            x += i
        best = min(best, (time.perf_counter_ns() - t0) / n)
    return best


def peak_rss_mb() -> float:
    """The process's peak resident set so far (Linux: ru_maxrss is in KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def measure(
    profile: str, rate: float, duration: float, repeat: int, seed: int, keep: bool = False
) -> float:
    """Time ``repeat`` runs, print each and the verdict; returns the best wall time."""
    walls = []
    for i in range(repeat):
        t0, c0 = time.perf_counter(), time.process_time()
        res = run_virtual(
            profile,
            load="poisson",
            rate=rate,
            duration=duration,
            seed=seed + i,
            keep_requests=keep,
        )
        walls.append(time.perf_counter() - t0)
        cpu = time.process_time() - c0
        d = res.to_dict()
        print(
            f"run {i + 1}: {d['counts']['issued']} requests, {d['engine']['steps']} steps, "
            f"{d['engine']['simulated_s']:.1f} simulated s in {walls[-1]:.2f} s wall, "
            f"{cpu:.2f} s CPU ({d['engine']['steps'] / walls[-1]:,.0f} steps/s, "
            f"{d['engine']['simulated_s'] / walls[-1]:.0f}x real time); "
            f"TTFT p99 {d['metrics']['ttft']['p99']:.1f} ms"
        )
        del res, d
    best = min(walls)
    target = TARGETS.get((rate, duration))
    verdict = (
        f"(target <= {target:g} s): {'PASS' if best <= target else 'FAIL'}"
        if target is not None
        else "(no target for this rate and duration)"
    )
    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    print(
        f"best wall time {best:.2f} s of {repeat} for {duration:g} s of Poisson {rate:g} req/s "
        f"on {profile} {verdict}; peak RSS so far {peak_rss_mb():.0f} MB; load average {load}"
    )
    return best


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--profile", default="llama-3.1-8b-h100")
    ap.add_argument("--rate", type=float, default=20.0)
    ap.add_argument("--duration", type=float, default=600.0)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--hour", action="store_true", help="also check 1 h at 100 req/s")
    ap.add_argument("--hour-repeat", type=int, default=1)
    ap.add_argument("--keep", action="store_true", help="keep every request (the API default)")
    args = ap.parse_args()
    print(f"machine: a pure-Python loop takes {python_speed():.1f} ns per iteration")
    measure(args.profile, args.rate, args.duration, args.repeat, args.seed, args.keep)
    if args.hour and (args.rate, args.duration) != HOUR:
        measure(args.profile, *HOUR, args.hour_repeat, args.seed, args.keep)


if __name__ == "__main__":
    main()
