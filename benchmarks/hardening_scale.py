"""Scale check: 10,000 concurrent streams from one process, and memory over a long run.

Starts the cheap raw-asyncio streaming server of the hardening tests as a
child process (not the simulator: the client is what is measured), then:

1. one run with ``--streams`` concurrent streams (default 10,000), each
   ``--tokens`` chunks ``--itl-ms`` apart, two requests per stream slot;
   prints wall time, peak streams the *server* saw open at once, connections
   accepted (reuse), errors, file-descriptor limit, and the process RSS;
2. ``--waves`` further runs of the same size, printing RSS after each, so
   growth (a leak) would show as a rising column.

Usage: ``python benchmarks/hardening_scale.py [--streams 10000] [--waves 3]``.
Exit status 1 if any request failed or the server never saw the streams open
at once.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import resource
import sys
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "hardening"))
sys.path.insert(0, str(ROOT))

from cheap_server import start_cheap_server  # noqa: E402

from pytest_llmperf.client.endpoint import Endpoint, Timeouts  # noqa: E402
from pytest_llmperf.client.fdlimits import descriptor_limits  # noqa: E402
from pytest_llmperf.loadgen import run_load  # noqa: E402
from pytest_llmperf.specs.run import RunSpec  # noqa: E402


def _rss_mb() -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _stats(url: str) -> dict[str, int]:
    with urllib.request.urlopen(f"{url}/stats", timeout=30) as r:
        return json.loads(r.read())


async def _run(url: str, streams: int, tokens: int) -> tuple[float, dict]:
    endpoint = Endpoint.from_env(
        url, api_key_env=None, model="cheap", timeouts=Timeouts.parse("120")
    )
    spec = RunSpec.from_markers(
        ("synthetic",),
        {"requests": 2 * streams, "input_tokens": 8, "output_tokens": tokens},
        ("concurrency",),
        {"concurrency": streams},
    )
    t0 = time.perf_counter()
    result = await run_load(endpoint, spec)
    return time.perf_counter() - t0, {"counts": result.counts, "errors": result.errors}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--streams", type=int, default=10_000)
    ap.add_argument("--tokens", type=int, default=20)
    ap.add_argument("--itl-ms", type=float, default=100.0)
    ap.add_argument("--waves", type=int, default=3)
    args = ap.parse_args()

    proc, url = start_cheap_server(tokens=args.tokens, itl_ms=args.itl_ms)
    ok = True
    try:
        rss0 = _rss_mb()
        wall, out = asyncio.run(_run(url, args.streams, args.tokens))
        stats = _stats(url)
        soft, hard = descriptor_limits() or (0, 0)
        print(f"streams (concurrency)      {args.streams}")
        print(f"requests                   {out['counts']['issued']}")
        print(
            f"completed / failed         {out['counts']['completed']} / {out['counts']['failed']}"
        )
        print(f"errors                     {out['errors'] or 'none'}")
        ideal = 2 * args.tokens * args.itl_ms / 1000
        print(f"wall time                  {wall:.2f} s (server-side minimum {ideal:.2f} s)")
        print(f"server peak open streams   {stats['peak_open']}")
        accepted, served = stats["accepted"], stats["requests"]
        print(f"server connections         {accepted} accepted for {served} requests")
        print(f"RLIMIT_NOFILE soft/hard    {soft} / {hard}")
        print(f"client RSS                 {rss0:.0f} MB before, {_rss_mb():.0f} MB after")
        ok = out["counts"]["failed"] == 0 and stats["peak_open"] >= 0.9 * args.streams
        for wave in range(args.waves):
            asyncio.run(_run(url, args.streams, args.tokens))
            gc.collect()
            print(f"RSS after wave {wave + 2}           {_rss_mb():.0f} MB")
    finally:
        assert proc.stdin is not None
        proc.stdin.close()
        proc.wait(timeout=30)
    print("OK" if ok else "FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
