"""Max-throughput: our load generator vs a bare aiohttp streaming loop, same server, same run.

Target (issue #3): with 64 concurrent 16-token streams against a zero-delay
local streaming server, ``LoadRun`` (max-throughput: the project's own HTTP/1.1
client, chunked decoding, SSE and JSON parsing of every chunk, per-chunk
timestamps, metrics) sustains at least 90% of the requests/s of a bare
aiohttp loop that only reads the bytes. Plain httpx through
``llm_endpoint.client()`` (the metadata client; httpx on the aiohttp transport
was the hot path before the own client) is shown for comparison.

The server is ``benchmarks/streaming_server.py`` (a bare asyncio protocol in
its own process, cheaper per request than either client). Each client runs
``--rounds`` times, alternating, and the best round of each is compared.

    python benchmarks/loadgen_throughput.py [--requests 6000] [--rounds 3] [--workers 1]
    python benchmarks/loadgen_throughput.py --uvloop   # LoadRun on uvloop too, each round

It prints the machine's system-call cost first (``syscall_cost.py``, issue 42).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import aiohttp
from loops import run_on
from streaming_server import start_server
from syscall_cost import line as syscall_cost_line

from pytest_llmperf.client.endpoint import Endpoint
from pytest_llmperf.loadgen import LoadRun
from pytest_llmperf.specs.load import LoadSpec
from pytest_llmperf.specs.run import RunSpec

CONCURRENCY = 64
TOKENS = 16
MODEL = "bench-model"
HTTPX_REQUESTS = 600  # plain httpx runs ~170 req/s at 64 streams here: a sample is enough


async def bare_aiohttp(url: str, requests: int, *, by_lines: bool = False) -> float:
    """The reference: 64 tasks posting and reading each stream to its end; req/s.

    ``by_lines``: for context, read the stream line by line (``async for line
    in resp.content``), as vLLM's ``benchmark_serving`` and most hand-written
    SSE clients do (issue #3's "about 1,800 req/s" bare loop has this shape).
    Neither variant decodes any JSON.
    """
    body = {
        "model": MODEL,
        "messages": [{"role": "user", "content": "hello there"}],
        "max_tokens": TOKENS,
        "stream": True,
    }
    left = requests
    connector = aiohttp.TCPConnector(limit=CONCURRENCY)
    async with aiohttp.ClientSession(connector=connector) as session:

        async def worker() -> None:
            nonlocal left
            while left > 0:
                left -= 1
                async with session.post(url + "/v1/chat/completions", json=body) as resp:
                    reads = resp.content if by_lines else resp.content.iter_any()
                    async for _ in reads:
                        time.monotonic_ns()

        t0 = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(CONCURRENCY)))
        return requests / (time.perf_counter() - t0)


async def bare_httpx(url: str, requests: int) -> float:
    """Second reference: the same loop through ``llm_endpoint.client()`` (plain httpx).

    Context only, and on at most ``HTTPX_REQUESTS`` requests a round: httpx's own
    connection pool slows down as concurrency grows (encode/httpx#3215), which
    is why the load generator has a client of its own.
    """
    body = (
        b'{"model":"%s","messages":[{"role":"user","content":"hello there"}],'
        b'"max_tokens":%d,"stream":true}' % (MODEL.encode(), TOKENS)
    )
    left = requests
    async with Endpoint(url + "/v1", model=MODEL).client(max_connections=CONCURRENCY) as client:

        async def worker() -> None:
            nonlocal left
            while left > 0:
                left -= 1
                async with client.stream(
                    "POST", url + "/v1/chat/completions", content=body
                ) as resp:
                    async for _ in resp.aiter_bytes():
                        time.monotonic_ns()

        t0 = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(CONCURRENCY)))
        return requests / (time.perf_counter() - t0)


async def ours(url: str, requests: int, workers: int) -> tuple[float, dict]:
    spec = RunSpec(
        "synthetic",
        {"input_tokens": 4, "output_tokens": TOKENS},
        0,
        LoadSpec.parse("max-throughput", {"concurrency": CONCURRENCY}),
        requests=requests,
    )
    endpoint = Endpoint(url + "/v1", model=MODEL)
    run = LoadRun(endpoint, spec, workers=workers)
    t0 = time.perf_counter()
    result = await run.execute()
    wall = time.perf_counter() - t0
    counts = result.counts
    if counts["completed"] != requests:
        raise SystemExit(f"our run lost requests: {counts} {result.errors}")
    return requests / wall, result.self_check


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--requests", type=int, default=6000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--workers", type=int, default=1)
    ap.add_argument(
        "--server",
        choices=("bench", "sim"),
        default="bench",
        help="bench: benchmarks/streaming_server.py (default); sim: the embedded simulator, "
        "fixed profile with zero TTFT and ITL",
    )
    ap.add_argument(
        "--uvloop", action="store_true", help="also run LoadRun on uvloop, each round (issue 42)"
    )
    args = ap.parse_args()
    cost = syscall_cost_line()
    global MODEL
    if args.server == "sim":
        from pytest_llmperf.sim import start_sim_process

        MODEL = "sim-fixed"
        server = start_sim_process("fixed", overrides={"ttft_ms": 0, "itl_ms": 0})
    else:
        server = start_server(0, 0, record=False)
    try:
        bare: list[float] = []
        lines: list[float] = []
        via_httpx: list[float] = []
        mine: list[float] = []
        on_uvloop: list[float] = []
        for _ in range(args.rounds):
            bare.append(asyncio.run(bare_aiohttp(server.url, args.requests)))
            lines.append(asyncio.run(bare_aiohttp(server.url, args.requests, by_lines=True)))
            via_httpx.append(
                asyncio.run(bare_httpx(server.url, min(args.requests, HTTPX_REQUESTS)))
            )
            rate, check = asyncio.run(ours(server.url, args.requests, args.workers))
            mine.append(rate)
            if args.uvloop:
                on_uvloop.append(run_on("uvloop", ours(server.url, args.requests, args.workers))[0])
    finally:
        server.stop()
    best_bare, best_mine = max(bare), max(mine)
    print(
        f"machine: {platform.machine()}, {os.cpu_count()} CPUs, Python "
        f"{platform.python_version()}, load average: "
        + " ".join(f"{x:.2f}" for x in os.getloadavg())
    )
    print(cost)
    print(
        f"max-throughput, {CONCURRENCY} concurrent {TOKENS}-token streams, "
        f"{args.requests} requests x {args.rounds} rounds, zero-delay "
        + ("benchmark server" if args.server == "bench" else "simulator (fixed profile)")
    )
    print(
        f"  bare aiohttp loop:        best {best_bare:7.0f} req/s  rounds "
        + " ".join(f"{r:.0f}" for r in bare)
    )
    print(
        f"  bare aiohttp, by lines:   best {max(lines):7.0f} req/s  rounds "
        + " ".join(f"{r:.0f}" for r in lines)
    )
    print(
        f"  httpx (endpoint.client()): best {max(via_httpx):7.0f} req/s  rounds "
        + " ".join(f"{r:.0f}" for r in via_httpx)
        + f"  ({min(args.requests, HTTPX_REQUESTS)} requests a round)"
    )
    print(
        f"  pytest-llmperf LoadRun:   best {best_mine:7.0f} req/s  rounds "
        + " ".join(f"{r:.0f}" for r in mine)
        + f"  (workers={args.workers})"
    )
    if on_uvloop:
        print(
            f"  LoadRun on uvloop:        best {max(on_uvloop):7.0f} req/s  rounds "
            + " ".join(f"{r:.0f}" for r in on_uvloop)
            + "; per round uvloop/asyncio "
            + " ".join(f"{u / m:.2f}" for u, m in zip(on_uvloop, mine, strict=True))
        )
    print(f"  ratio ours/bare: {best_mine / best_bare:.2f}  (target >= 0.90)")
    print(f"  ratio ours/bare-by-lines: {best_mine / max(lines):.2f}  (context)")
    per_round = sorted(m / b for m, b in zip(mine, bare, strict=True))
    print(
        "  per-round ratios (each round runs the clients back to back): "
        + " ".join(f"{r:.2f}" for r in per_round)
        + f"; median {per_round[len(per_round) // 2]:.2f}"
    )
    print(f"  last run self-check: cpu share {check.get('client_cpu_share')}")


if __name__ == "__main__":
    main()
