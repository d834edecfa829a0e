"""TTFT and TTFO against the server's own send times, on the stream shapes of real servers.

The unit test (tests/client/test_real_server_shapes.py) checks each request's
timestamps against the server's by causality only (sent before the server read
it, read after the server wrote it). How *close* the client's ttft/ttfo come to
the server's own is timing, so it is measured here: the same strict server
(``tests/client/strict_server.py``: a role chunk, reasoning deltas, answer
deltas of which every third is ``""``, the finish on its own chunk or on the
last token, as vLLM streams a reasoning model) runs in a thread of this process,
on the same monotonic clock, and each request's client ttft/ttfo is compared
with the server's (head read to the event's write returning), paired by prompt.
Target (the test's old bound): within 1 ms at p50.

    python benchmarks/token_event_timing.py [--requests 400] [--concurrency 4]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "tests" / "client"))

from strict_server import StrictServer, serve  # noqa: E402

from pytest_llmperf.client.endpoint import Endpoint, Timeouts, normalize_base_url  # noqa: E402
from pytest_llmperf.client.preflight import preflight  # noqa: E402
from pytest_llmperf.client.records import RequestRecord  # noqa: E402
from pytest_llmperf.loadgen import run_load  # noqa: E402
from pytest_llmperf.specs.run import RunSpec  # noqa: E402


async def measure(api: str, finish_on_last: bool, requests: int, concurrency: int) -> str:
    server = StrictServer(
        reasoning=3 if api == "chat" else 0, answer=9, empty_every=3, finish_on_last=finish_on_last
    )
    records: list[RequestRecord] = []
    with serve(server):
        endpoint = Endpoint(
            normalize_base_url(server.url), api=api, timeouts=Timeouts.from_seconds(10)
        )  # type: ignore[arg-type]
        endpoint = await preflight(endpoint)
        spec = RunSpec.from_markers(
            ("synthetic",), {"requests": requests}, ("concurrency",), {"concurrency": concurrency}
        )
        result = await run_load(endpoint, spec, observers=[records.append])
    assert result.counts["completed"] == requests, result.counts
    by_prompt = {spec.workload.sample(r.index).prompt: r for r in records}
    ttft, ttfo = [], []
    for s in server.served[-requests:]:
        text = s.body["messages"][-1]["content"] if api == "chat" else s.body["prompt"]
        [r] = [r for prompt, r in by_prompt.items() if prompt in text]
        ttft.append(((r.t_first - r.t_send) - (s.first_event_ns - s.received_ns)) / 1e6)
        ttfo.append(((r.t_out - r.t_send) - (s.first_answer_ns - s.received_ns)) / 1e6)
    shape = f"{api:11s} finish {'on last' if finish_on_last else 'apart  '}"
    out = []
    for name, diffs in (("ttft", ttft), ("ttfo", ttfo)):
        p50, p99 = np.percentile(diffs, [50, 99])
        verdict = "PASS" if abs(p50) <= 1.0 else "FAIL"
        out.append(f"{name} client - server p50 {p50:+.3f} ms, p99 {p99:+.3f} ms ({verdict})")
    return f"  {shape}: " + "; ".join(out)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--requests", type=int, default=400)
    ap.add_argument("--concurrency", type=int, default=4)
    args = ap.parse_args()
    print(
        f"{args.requests} requests at concurrency {args.concurrency} per shape, "
        f"load average {os.getloadavg()[0]:.2f} (target |p50| <= 1 ms)"
    )
    for api in ("chat", "completions"):
        for finish_on_last in (False, True):
            line = asyncio.run(measure(api, finish_on_last, args.requests, args.concurrency))
            print(line, flush=True)


if __name__ == "__main__":
    main()
