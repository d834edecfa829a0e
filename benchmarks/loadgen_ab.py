"""A/B: the same max-throughput run with two variants of the client, interleaved.

Why: on a shared VM whose speed swings by ±30% from one minute to the next,
two separate runs of ``loadgen_throughput.py`` cannot tell a 5% change from
noise. Here each round runs every variant back to back, in a fresh process
each (same server, order alternating), and reports requests/s *and* client
CPU per request (``time.process_time`` over the run, which a busy neighbour
disturbs far less than wall time).

A variant is ``LABEL=SOURCE[:LOOP[:SIM_LOOP]]``: ``SOURCE`` is the folder put
first on ``PYTHONPATH`` (a copy of an older ``pytest_llmperf`` to compare
with, or ``.`` for this checkout), ``LOOP`` the client's event loop,
``asyncio`` (default) or ``uvloop``, and ``SIM_LOOP`` the simulator's
(``--server sim``: then every run starts a simulator of its own; empty: the
simulator's own choice)::

    python benchmarks/loadgen_ab.py before=/tmp/old after=. --rounds 9
    python benchmarks/loadgen_ab.py asyncio=. uvloop=.:uvloop --rounds 9
    python benchmarks/loadgen_ab.py sim-asyncio=.::asyncio sim-uvloop=.::uvloop --server sim
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from loops import sim_loop  # noqa: E402
from streaming_server import start_server  # noqa: E402

CONCURRENCY = 64
TOKENS = 16

_CHILD = r"""
import asyncio, json, sys, time
from pytest_llmperf.client.endpoint import Endpoint
from pytest_llmperf.specs.run import RunSpec
from pytest_llmperf.specs.load import LoadSpec
from pytest_llmperf.loadgen import LoadRun

url, model, requests, concurrency, tokens, loop = sys.argv[1:7]
spec = RunSpec(
    "synthetic",
    {"input_tokens": 4, "output_tokens": int(tokens)},
    0,
    LoadSpec.parse("max-throughput", {"concurrency": int(concurrency)}),
    requests=int(requests),
)


async def main():
    run = LoadRun(Endpoint(url + "/v1", model=model), spec)
    c0, t0 = time.process_time(), time.perf_counter()
    result = await run.execute()
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    if result.counts["completed"] != int(requests):
        raise SystemExit(f"lost requests: {result.counts} {result.errors}")
    return {"rate": int(requests) / wall, "cpu_us": cpu / int(requests) * 1e6}


if loop == "uvloop":
    import uvloop
    factory = uvloop.new_event_loop
else:
    factory = asyncio.new_event_loop
with asyncio.Runner(loop_factory=factory) as runner:
    print(json.dumps(runner.run(main())))
"""


@dataclass
class Variant:
    label: str
    source: str
    loop: str
    sim_loop: str
    rates: list[float] = field(default_factory=list)
    cpu_us: list[float] = field(default_factory=list)

    @classmethod
    def parse(cls, text: str) -> Variant:
        label, sep, rest = text.partition("=")
        if not sep or not label:
            raise SystemExit(f"variant must be LABEL=SOURCE[:LOOP[:SIM_LOOP]], got {text!r}")
        source, _, loops = rest.partition(":")
        loop, _, sim_loop = loops.partition(":")
        for name in (loop, sim_loop):
            if name not in ("", "asyncio", "uvloop"):
                raise SystemExit(f"a loop is asyncio or uvloop, got {name!r}")
        return cls(label, str(Path(source or ".").resolve()), loop or "asyncio", sim_loop)

    def run_once(self, url: str, model: str, requests: int) -> None:
        env = {**os.environ, "PYTHONPATH": self.source}
        argv = [url, model, str(requests), str(CONCURRENCY), str(TOKENS), self.loop]
        out = subprocess.run(
            [sys.executable, "-c", _CHILD, *argv],
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
            check=False,
        )
        if out.returncode != 0:
            raise SystemExit(f"{self.label} failed:\n{out.stderr[-2000:]}")
        got = json.loads(out.stdout.strip().splitlines()[-1])
        self.rates.append(got["rate"])
        self.cpu_us.append(got["cpu_us"])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("variants", nargs="+", help="LABEL=SOURCE[:LOOP[:SIM_LOOP]]")
    ap.add_argument("--requests", type=int, default=6000)
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--server", choices=("bench", "sim"), default="bench")
    args = ap.parse_args()
    variants = [Variant.parse(v) for v in args.variants]
    if args.server == "sim":
        from pytest_llmperf.sim import start_sim_process

        model = "sim-fixed"
        for i in range(args.rounds):
            for variant in variants if i % 2 == 0 else variants[::-1]:
                with sim_loop(variant.sim_loop):
                    sim = start_sim_process("fixed", overrides={"ttft_ms": 0, "itl_ms": 0})
                try:
                    variant.run_once(sim.url, model, args.requests)
                finally:
                    sim.stop()
    else:
        server = start_server(0, 0, record=False)
        try:
            for i in range(args.rounds):
                for variant in variants if i % 2 == 0 else variants[::-1]:
                    variant.run_once(server.url, "bench-model", args.requests)
        finally:
            server.stop()
    print(
        f"machine: {platform.machine()}, {os.cpu_count()} CPUs, Python "
        f"{platform.python_version()}, load average: "
        + " ".join(f"{x:.2f}" for x in os.getloadavg())
    )
    where = "benchmark server" if args.server == "bench" else "simulator (fixed profile)"
    print(
        f"max-throughput A/B, {CONCURRENCY} concurrent {TOKENS}-token streams, "
        f"{args.requests} requests x {args.rounds} rounds, zero-delay {where}"
    )
    for v in variants:
        loops = v.loop + (f", sim {v.sim_loop}" if v.sim_loop else "")
        print(
            f"  {v.label:>12} ({loops}): req/s best {max(v.rates):6.0f} median "
            f"{statistics.median(v.rates):6.0f} | CPU/request best {min(v.cpu_us):5.1f} µs "
            f"median {statistics.median(v.cpu_us):5.1f} µs  | rounds "
            + " ".join(f"{r:.0f}" for r in v.rates)
        )
    if len(variants) == 2:
        a, b = variants
        ratios = sorted(y / x for x, y in zip(a.rates, b.rates, strict=True))
        cpu = sorted(y / x for x, y in zip(a.cpu_us, b.cpu_us, strict=True))
        print(
            f"  {b.label}/{a.label} per round: req/s "
            + " ".join(f"{r:.2f}" for r in ratios)
            + f" (median {statistics.median(ratios):.2f}); CPU/request "
            + " ".join(f"{r:.2f}" for r in cpu)
            + f" (median {statistics.median(cpu):.2f})"
        )


if __name__ == "__main__":
    main()
