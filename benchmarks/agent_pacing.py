"""Agent-tree pacing: how late tool waits, subagent launches and think times end.

Issue 39's bar ("Done when"): tool gaps within 5 ms of the recorded ones, and item 7:
think and tool waits paced as precisely as open-loop sends. Every wait of the issuing
side ends on ``Pacer.wait_until`` (wake 1 ms early, yield to the loop to the planned
instant), and an agent call's ``t_sched`` is the instant it was due (its thread's
previous end, or its joined subagents' latest, plus the recorded wait), so its error is
``t_send - t_sched``: the measured gap minus the recorded one.

Runs a trace of agent trees (``--conversations`` roots, 12 calls each with tool waits
of 5-200 ms drawn from a seed, two joined subagents of 5 calls after call 3 and one in
the background after call 6, starts 50 ms apart) against ``streaming_server.py``
(first token after 20 ms, 8 tokens 2 ms apart), then a closed loop of plain
conversations with a 50 ms think time (the think is counted from the reply's end on
the client's clock), and prints the error's percentiles per kind of wait.
``--wait sleep`` replaces the pacer's wait by a plain ``asyncio.sleep`` to the instant
(what a waiting primitive without the early wake-up would do), for comparison.

    python benchmarks/agent_pacing.py [--conversations 40] [--wait pacer|sleep]
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import os
import platform
import random
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "tests" / "loadgen"))  # the hand-written agent trees

from agent_trees import Spawn, Thread, TreeSource  # noqa: E402
from streaming_server import start_server  # noqa: E402

from pytest_llmperf.client.endpoint import Endpoint  # noqa: E402
from pytest_llmperf.client.records import RequestRecord  # noqa: E402
from pytest_llmperf.loadgen import LoadRun  # noqa: E402
from pytest_llmperf.loadgen.issue.pacing import Pacer  # noqa: E402
from pytest_llmperf.specs.load import LoadSpec  # noqa: E402
from pytest_llmperf.specs.run import RunSpec  # noqa: E402


def trees(count: int, seed: int) -> TreeSource:
    rng = random.Random(seed)

    def waits(n: int, low: float, high: float) -> tuple[float, ...]:
        return tuple(round(rng.uniform(low, high), 3) for _ in range(n))

    roots = []
    for i in range(count):
        spawns = (
            Spawn(3, Thread(f"a{i}", 5, waits(4, 5, 100))),
            Spawn(3, Thread(f"b{i}", 5, waits(4, 5, 100)), offset_ms=rng.uniform(0, 20)),
            Spawn(6, Thread(f"c{i}", 3, waits(2, 5, 100)), offset_ms=5, joined=False),
        )
        roots.append(Thread("root", 12, waits(11, 5, 200), spawns, max_tokens=8))
    return TreeSource(roots, starts_ms=tuple(50.0 * i for i in range(count)))


def percentiles(values: list[float]) -> str:
    if not values:
        return "none"
    values = sorted(values)

    def p(q: float) -> float:
        return values[min(len(values) - 1, int(q / 100 * len(values)))]

    return (
        f"n={len(values):5d}  p50 {p(50):7.3f}  p90 {p(90):7.3f}  p99 {p(99):7.3f}  "
        f"max {values[-1]:7.3f} ms"
    )


async def _sleep_wait(self: Pacer, planned_ns: int) -> bool:
    delay = (planned_ns - time.monotonic_ns()) / 1e9
    if delay > 0:
        await asyncio.sleep(delay)
    return not self.cancelled


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--conversations", type=int, default=40)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--wait", choices=("pacer", "sleep"), default="pacer")
    args = ap.parse_args()
    if args.wait == "sleep":
        Pacer.wait_until = _sleep_wait  # type: ignore[method-assign]
    print(
        f"machine: {platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()}"
        f", load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}; wait={args.wait}"
    )
    server = start_server(20.0, 2.0, record=False)
    endpoint = Endpoint(server.url + "/v1")
    try:
        records: list[RequestRecord] = []
        source = trees(args.conversations, args.seed)
        load = LoadSpec.parse("trace", {"path": "agents", "format": "weka"})
        spec = RunSpec("test-agent-trees", {"source": source}, 0, load, requests=None)
        result = asyncio.run(LoadRun(endpoint, spec, observers=[records.append]).execute())
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "c.jsonl"
            with path.open("w") as f:
                for c in range(40):
                    messages = []
                    for k in range(6):
                        messages.append({"role": "user", "content": f"c{c} t{k} ask"})
                        messages.append({"role": "assistant", "content": "one two three"})
                    f.write(json.dumps({"messages": messages}) + "\n")
            conv = RunSpec(
                "conversation",
                {"path": str(path), "conversations": True, "think_time": 0.05},
                0,
                LoadSpec.parse("concurrency", {"concurrency": 8}),
                requests=240,
            )
            turns: list[RequestRecord] = []
            asyncio.run(LoadRun(endpoint, conv, observers=[turns.append]).execute())
    finally:
        server.stop()
    print(
        f"agent trees: {result.counts['issued']} calls, {result.counts['completed']} completed,"
        f" {len({r.conversation for r in records})} conversations"
    )
    kinds: dict[str, list[float]] = defaultdict(list)
    for r in records:
        late = (r.t_send - r.t_sched) / 1e6
        if r.agent == "" and r.turn == 0:
            kinds["conversation start (trace time)"].append(late)
        elif r.turn == 0:
            kinds["subagent launch (offset after parent)"].append(late)
        else:
            kinds["tool wait (after own call or join)"].append(late)
    for kind, values in kinds.items():
        print(f"  {kind:40s} t_send - t_sched: {percentiles(values)}")
    every = [v for values in kinds.values() for v in values]
    print(f"  {'all calls':40s} t_send - t_sched: {percentiles(every)}")
    by_conv: dict[int, list[RequestRecord]] = defaultdict(list)
    for r in turns:
        by_conv[r.index].append(r)
    gaps = []
    for calls in by_conv.values():
        calls.sort(key=lambda r: r.turn)
        gaps += [(b.t_send - a.t_end) / 1e6 - 50.0 for a, b in itertools.pairwise(calls)]
    print(f"  {'closed-loop conversation think (50 ms)':40s} gap - 50 ms:      {percentiles(gaps)}")
    print(f"  load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
