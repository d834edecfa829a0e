"""The client's compiled per-read path against its pure-Python twin, in the same run.

Issue 42, item 3. ``loadgen_events.py``'s rounds (the same server, the same
clients, each in a fresh process), with the project's client run twice a round:
``llmperf-compiled`` (``pytest_llmperf/client/_speedups.pyx``, as installed) and
``llmperf-python`` (``LLMPERF_PURE_PYTHON=1``: the pure twin), beside bare aiohttp,
the order rotating round by round. Read its table as ``loadgen_events.py``'s (its
docstring), plus the compiled/pure ratio of CPU per event per round; then, with
no socket and no event loop, the per-read path alone on each twin
(``loadgen_events.py --micro``'s last line): what compiling changed, without the
event loop's and the kernel's share of a read.

    python benchmarks/compiled_ab.py --concurrency 512 --itl 10 --rounds 3
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import loadgen_events as events  # noqa: E402

ENV = "LLMPERF_PURE_PYTHON"
CLIENTS = {"llmperf-compiled": ("llmperf", ""), "llmperf-python": ("llmperf", "1")}


def _round(
    server: events.ServerProcess, name: str, conc: int, requests: int, tokens: int
) -> events.Round:
    client, pure = CLIENTS.get(name, (name, ""))
    os.environ[ENV] = pure  # the child inherits it: the twin it runs
    try:
        return events.run_round(server, client, conc, requests, tokens)
    finally:
        os.environ.pop(ENV, None)


def _micro(pure: str) -> str:
    cmd = [sys.executable, os.path.join(HERE, "loadgen_events.py"), "--micro", "--rounds", "3"]
    done = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, ENV: pure})
    return done.stdout.strip().splitlines()[-1].strip() if done.returncode == 0 else done.stderr


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--concurrency", type=int, default=512)
    ap.add_argument("--itl", type=float, default=10.0)
    ap.add_argument("--tokens", type=int, default=1024)
    ap.add_argument("--per-stream", type=float, default=2)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    from pytest_llmperf.client import speedups_in_use
    from pytest_llmperf.client.fdlimits import ensure_descriptors

    if not speedups_in_use():
        raise SystemExit("the compiled extension is not built here (pip install -e .)")
    ensure_descriptors(args.concurrency, what="benchmark streams")
    print(f"load average now {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    names = [*CLIENTS, "aiohttp"]
    requests = max(1, round(args.concurrency * args.per_stream))
    server = events.start_server(args.itl)
    try:
        by_client: dict[str, list[events.Round]] = {n: [] for n in names}
        for k in range(args.rounds):
            for name in names[k % len(names) :] + names[: k % len(names)]:
                got = _round(server, name, args.concurrency, requests, args.tokens)
                by_client[name].append(got)
        events.report(args.concurrency, args.itl, args.tokens, by_client)
    finally:
        server.stop()
    pairs = zip(by_client["llmperf-python"], by_client["llmperf-compiled"], strict=True)
    cpu = [(p.cpu_us, c.cpu_us) for p, c in pairs]
    usr = [
        (p.out["user_s"] / p.out["events"] * 1e6, c.out["user_s"] / c.out["events"] * 1e6)
        for p, c in zip(by_client["llmperf-python"], by_client["llmperf-compiled"], strict=True)
    ]
    print(
        "  compiled / python, CPU per event, per round: "
        + " ".join(f"{c / p:.2f}" for p, c in cpu)
        + f" (median {statistics.median(c / p for p, c in cpu):.2f}); usr per event: "
        + " ".join(f"{p:.2f}->{c:.2f}" for p, c in usr)
        + f" µs (median change {statistics.median((c - p) / p for p, c in usr):+.0%})"
    )
    loads = [r.loadavg for rounds in by_client.values() for r in rounds]
    print(f"  load average over the rounds: {min(loads):.1f}-{max(loads):.1f}")
    print("  the per-read path alone (loadgen_events.py --micro, best of 15):")
    print(f"    compiled: {_micro('')}")
    print(f"    python:   {_micro('1')}")


if __name__ == "__main__":
    main()
