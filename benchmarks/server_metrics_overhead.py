"""Server-metrics scraping: the max-throughput run with the sampler off and on, interleaved.

Issue 24's target: with the server's ``/metrics`` scraped during the run
(``LoadRun(..., server_metrics=ServerMetricsSource(...))``: a scrape at the
start, one every ``interval_s``, one at the end, each fetched and parsed in the
sampler's own thread, off the request path) the throughput benchmark loses no
more than 3%. The load is ``loadgen_throughput.py``'s: 64 concurrent 16-token
streams against ``streaming_server.py`` (zero delay, its own process), here
with ``--metrics``: it serves a vLLM 0.32-sized page (``MetricsPage``: vLLM's
metric names, ``engine``/``model_name`` label sets and bucket boundaries,
written by ``prometheus_client``'s ``generate_latest``) whose request and token
counters and histograms move with every request served.

As ``loadgen_ab.py``: every run in a fresh process, the variants of a round back
to back (order reversed every other round); per run, requests/s over
``execute()`` (the start and end scrapes it waits for included), the run's own
``request_throughput`` (first planned send to last request end: what the
plugin reports and gates) and client CPU per request (``time.process_time``:
the sampler's thread is in that process, so its fetches and parses count).
Variants: ``off``; ``1s`` (the default interval); ``0.1s`` (a stress setting,
ten times the scrapes, to show how the cost scales). The CPU time of the
sampler's two threads (its own, which parses, and its metadata client's event
loop, which GETs), fitted over the intervals, splits into a part a run and a
part a scrape.

Alone, on the idle server: the page's size, the sampler's parse of it
(``parse_scrape`` with the vLLM mapping's ``keep``, as the sampler calls it),
the whole page's parse and a whole scrape (``scrape_once`` through the
metadata client: GET and parse), wall and process CPU; and whether the parse,
in the sampler's thread, stops this process's event loop (an idle loop spinning
with the sampler every 0.1 s: its longest turn at each scrape, against the same
instants without the sampler).

    python benchmarks/server_metrics_overhead.py [--requests 30000] [--rounds 5]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))

from streaming_server import start_server  # noqa: E402

from pytest_llmperf.client.endpoint import Endpoint  # noqa: E402
from pytest_llmperf.server_metrics.exposition import Scrape, parse_scrape  # noqa: E402
from pytest_llmperf.server_metrics.families import family_of, metric_names  # noqa: E402
from pytest_llmperf.server_metrics.sampler import ServerMetricsSampler  # noqa: E402
from pytest_llmperf.server_metrics.source import (  # noqa: E402
    SCRAPE_LIMIT_S,
    ServerMetricsSource,
    metrics_client,
    scrape_once,
)
from pytest_llmperf.server_metrics.summary import ServerFamily  # noqa: E402

CONCURRENCY = 64
TOKENS = 16
MODEL = "bench-model"

_CHILD = r"""
import asyncio, json, sys, time
from pytest_llmperf.client import metadata as metadata_mod
from pytest_llmperf.client.endpoint import Endpoint
from pytest_llmperf.loadgen import LoadRun
from pytest_llmperf.server_metrics import sampler as sampler_mod
from pytest_llmperf.server_metrics.source import resolve_source
from pytest_llmperf.specs.load import LoadSpec
from pytest_llmperf.specs.run import RunSpec

url, model, requests, concurrency, tokens, interval = sys.argv[1:7]
spec = RunSpec(
    "synthetic",
    {"input_tokens": 4, "output_tokens": int(tokens)},
    0,
    LoadSpec.parse("max-throughput", {"concurrency": int(concurrency)}),
    requests=int(requests),
)
endpoint = Endpoint(url + "/v1", model=model)
source = None
if interval != "off":  # the preflight probe, as the plugin's (not timed)
    source, note = resolve_source(endpoint, interval)
    if source is None:
        raise SystemExit(f"no /metrics: {note}")

# how long execute() waits for the start and the end scrape (timed, not changed)
waits = {}
for name in ("astart", "astop"):
    original = getattr(sampler_mod.ServerMetricsSampler, name)

    def timed(self, _original=original, _name=name):
        async def run():
            t = time.perf_counter()
            try:
                return await _original(self)
            finally:
                waits[_name] = time.perf_counter() - t
        return run()

    setattr(sampler_mod.ServerMetricsSampler, name, timed)

# the CPU time of the sampler's two threads, read in each as it ends (observed, not changed):
# the sampler's own (parses) and its metadata client's event loop (GETs)
thread_cpu = {"sampler": 0.0, "metadata": 0.0}
_serve, _run = metadata_mod._serve, sampler_mod.ServerMetricsSampler._run


def serve(loop):
    try:
        _serve(loop)
    finally:
        thread_cpu["metadata"] += time.thread_time()


def run_sampler(self):
    try:
        _run(self)
    finally:
        thread_cpu["sampler"] += time.thread_time()


metadata_mod._serve = serve
sampler_mod.ServerMetricsSampler._run = run_sampler


async def main():
    run = LoadRun(endpoint, spec, server_metrics=source)
    c0, t0 = time.process_time(), time.perf_counter()
    result = await run.execute()
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    n = int(requests)
    if result.counts["completed"] != n:
        raise SystemExit(f"lost requests: {result.counts} {result.errors}")
    out = {
        "rate": n / wall,
        "reported": result.rate("request_throughput"),
        "cpu_us": cpu / n * 1e6,
        "wall_s": wall,
    }
    if source is not None:
        sm = result.server_metrics
        requests_seen = sm.metrics.get("server.requests", {})
        out.update(
            scrapes=sm.scrapes,
            missing=sm.missing,
            family=sm.family.value,
            server_requests=requests_seen.get("value", requests_seen.get("count")),
            start_wait_ms=waits.get("astart", 0) * 1e3,
            stop_wait_ms=waits.get("astop", 0) * 1e3,
        )
        await asyncio.sleep(0.1)  # the metadata loop's thread ends just after stop()
        out.update(
            sampler_cpu_ms=thread_cpu["sampler"] * 1e3, metadata_cpu_ms=thread_cpu["metadata"] * 1e3
        )
    return out


print(json.dumps(asyncio.run(main())))
"""


@dataclass
class Variant:
    label: str
    interval: str  # "off" or seconds
    rates: list[float] = field(default_factory=list)  # requests / execute()'s wall time
    reported: list[float] = field(default_factory=list)  # the run's own request_throughput
    cpu_us: list[float] = field(default_factory=list)
    scrapes: list[int] = field(default_factory=list)
    start_ms: list[float] = field(default_factory=list)
    stop_ms: list[float] = field(default_factory=list)
    parse_cpu_ms: list[float] = field(default_factory=list)  # the sampler thread's, a run
    get_cpu_ms: list[float] = field(default_factory=list)  # the metadata loop thread's, a run
    notes: set[str] = field(default_factory=set)

    def run_once(self, url: str, requests: int) -> None:
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        argv = [url, MODEL, str(requests), str(CONCURRENCY), str(TOKENS), self.interval]
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
        self.reported.append(got["reported"])
        self.cpu_us.append(got["cpu_us"])
        if self.interval != "off":
            self.scrapes.append(got["scrapes"])
            self.start_ms.append(got["start_wait_ms"])
            self.stop_ms.append(got["stop_wait_ms"])
            self.parse_cpu_ms.append(got["sampler_cpu_ms"])
            self.get_cpu_ms.append(got["metadata_cpu_ms"])
            if got.get("missing"):
                self.notes.add(f"missing: {got['missing']}")
            if got.get("server_requests") not in (None, float(requests)):
                self.notes.add(f"server.requests {got['server_requests']} != {requests}")


def time_scrapes(url: str, repeat: int) -> dict[str, float]:
    """The page alone, on the idle server: size, the sampler's parse, a whole scrape."""
    endpoint = Endpoint(url + "/v1", model=MODEL)
    with metrics_client(endpoint, url + "/metrics", SCRAPE_LIMIT_S) as client:
        answer = client.call("GET", url + "/metrics", retry=False)
        body = answer.body
        whole = parse_scrape(body, 0)
        assert isinstance(whole, Scrape), whole
        family = family_of(whole)
        keep = metric_names(family)

        def best_and_median(fn) -> tuple[float, float, float]:
            walls, cpus = [], []
            fn()  # warm
            for _ in range(repeat):
                c0, t0 = time.process_time(), time.perf_counter()
                fn()
                walls.append(time.perf_counter() - t0)
                cpus.append(time.process_time() - c0)
            return min(walls) * 1e3, statistics.median(walls) * 1e3, statistics.median(cpus) * 1e3

        parse_keep = best_and_median(lambda: parse_scrape(body, 0, keep=keep))
        parse_all = best_and_median(lambda: parse_scrape(body, 0))
        scrape = best_and_median(lambda: scrape_once(client, url + "/metrics", keep=keep))
    lines = body.count(b"\n")
    samples = sum(1 for line in body.split(b"\n") if line and not line.startswith(b"#"))
    return {
        "bytes": len(body),
        "lines": lines,
        "samples": samples,
        "family": family.value,
        "kept": len(keep),
        "parse_keep": parse_keep,
        "parse_all": parse_all,
        "scrape": scrape,
    }


async def _spin(seconds: float) -> list[tuple[int, int]]:
    """Spin an otherwise idle event loop for ``seconds``: its turns slower than 0.5 ms,
    as (start, end) in monotonic ns."""
    slow = []
    last = time.monotonic_ns()
    end = last + int(seconds * 1e9)
    while last < end:
        await asyncio.sleep(0)
        now = time.monotonic_ns()
        if now - last > 500_000:
            slow.append((last, now))
        last = now
    return slow


def _stall_at(slow: list[tuple[int, int]], at_ns: int) -> float:
    """The longest slow turn overlapping [at - 2 ms, at + 15 ms] (a scrape's parse starts
    at ``at``, when its body is in), in ms; 0 when none."""
    lo, hi = at_ns - 2_000_000, at_ns + 15_000_000
    return max(((b - a) / 1e6 for a, b in slow if a < hi and b > lo), default=0.0)


def loop_stalls(url: str, seconds: float, interval: float) -> tuple[list[float], list[float]]:
    """How long the event loop of this process stops while the sampler (every
    ``interval`` s) fetches and parses in its thread: an idle loop spins for ``seconds``
    with the sampler and for ``seconds`` without; per scrape, the longest loop turn at its
    parse, and the same at as many instants of the run without (the machine's own noise)."""
    endpoint = Endpoint(url + "/v1", model=MODEL)
    source = ServerMetricsSource(url + "/metrics", interval, ServerFamily.VLLM)

    async def run(with_sampler: bool) -> tuple[list[tuple[int, int]], list[int]]:
        if not with_sampler:
            t0 = time.monotonic_ns()
            slow = await _spin(seconds)
            step = int(interval * 1e9)
            return slow, list(range(t0 + step, t0 + int(seconds * 1e9), step))
        sampler = ServerMetricsSampler(endpoint, source)
        await sampler.astart()
        slow = await _spin(seconds)
        recording = await sampler.astop()
        return slow, [a.at_ns for a in recording.attempts if a.role == "sample" and a.scrape]

    slow, at = asyncio.run(run(True))
    on = [_stall_at(slow, t) for t in at]
    slow, at = asyncio.run(run(False))
    off = [_stall_at(slow, t) for t in at]
    return on, off


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--requests", type=int, default=30000)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument(
        "--intervals",
        default="1,0.1",
        help="scrape intervals in seconds, comma-separated (default 1,0.1)",
    )
    ap.add_argument("--repeat", type=int, default=50, help="timings of the page alone")
    ap.add_argument(
        "--stall-seconds",
        type=float,
        default=3.0,
        help="the idle-loop stall measurement, with and without the sampler (0: skip it)",
    )
    args = ap.parse_args()
    intervals = [float(x) for x in args.intervals.split(",")]
    variants = [Variant("off", "off")] + [Variant(f"{x:g}s", f"{x:g}") for x in intervals]
    load0 = os.getloadavg()
    server = start_server(0, 0, record=False, metrics=True)
    try:
        alone = time_scrapes(server.url, args.repeat)
        stalls = loop_stalls(server.url, args.stall_seconds, 0.1) if args.stall_seconds else None
        t0 = time.perf_counter()
        for i in range(args.rounds):
            for variant in variants if i % 2 == 0 else variants[::-1]:
                variant.run_once(server.url, args.requests)
        took = time.perf_counter() - t0
    finally:
        server.stop()
    load1 = os.getloadavg()

    def fmt_load(load: tuple[float, float, float]) -> str:
        return " ".join(f"{x:.2f}" for x in load)

    def med(xs: list[float]) -> float:
        return statistics.median(xs)

    print(
        f"machine: {platform.machine()}, {os.cpu_count()} CPUs, Python "
        f"{platform.python_version()}, load average (1/5/15 min): before {fmt_load(load0)}, "
        f"after {fmt_load(load1)}"
    )
    print(
        f"max-throughput, {CONCURRENCY} concurrent {TOKENS}-token streams, "
        f"{args.requests} requests x {args.rounds} rounds x {len(variants)} variants "
        f"({took:.0f} s), zero-delay benchmark server with a vLLM-sized /metrics"
    )
    pk, pa, sc = alone["parse_keep"], alone["parse_all"], alone["scrape"]
    print(
        f"  the page: {alone['bytes'] / 1024:.1f} KiB, {alone['lines']} lines, "
        f"{alone['samples']} samples, family {alone['family']} "
        f"({alone['kept']} metrics kept by the sampler)"
    )
    print(
        f"  alone, ms (best / median wall, median process CPU, {args.repeat} times): "
        f"sampler's parse {pk[0]:.2f} / {pk[1]:.2f} / {pk[2]:.2f}; whole-page parse "
        f"{pa[0]:.2f} / {pa[1]:.2f} / {pa[2]:.2f}; a scrape (GET + parse) "
        f"{sc[0]:.2f} / {sc[1]:.2f} / {sc[2]:.2f}"
    )
    if stalls is not None:
        on, off = stalls

        def dist(xs: list[float]) -> str:
            if not xs:
                return "none"
            xs = sorted(xs)
            return (
                f"median {med(xs):.1f} ms, p90 {xs[int(0.9 * (len(xs) - 1))]:.1f} ms, "
                f"longest {xs[-1]:.1f} ms ({len(xs)})"
            )

        print(
            f"  idle event loop, {args.stall_seconds:g} s with the sampler every 0.1 s: its "
            f"longest turn at each scrape's parse {dist(on)}; at the same instants without "
            f"the sampler {dist(off)}"
        )
    base = variants[0]
    for v in variants:
        print(
            f"  {v.label:>5}: req/s best {max(v.rates):6.0f} median {med(v.rates):6.0f} "
            f"(the run's own request_throughput median {med(v.reported):6.0f}) | "
            f"CPU/request best {min(v.cpu_us):5.1f} µs median {med(v.cpu_us):5.1f} µs"
        )
        if v.scrapes:
            print(
                f"         {med(v.scrapes):.0f} scrapes a run; execute() waits for the start "
                f"scrape {med(v.start_ms):.0f} ms, for the end scrape {med(v.stop_ms):.0f} ms; "
                f"CPU of the sampler's threads {med(v.parse_cpu_ms):.0f} ms (its own: parses) + "
                f"{med(v.get_cpu_ms):.0f} ms (its client's loop: GETs) a run"
            )
        print(
            "         rounds: req/s "
            + " ".join(f"{r:.0f}" for r in v.rates)
            + " | CPU µs "
            + " ".join(f"{c:.1f}" for c in v.cpu_us)
        )
        for note in sorted(v.notes):
            print(f"         note: {note}")
    fit: list[tuple[float, float]] = []  # (scrapes a run, the sampler threads' CPU a run, ms)
    for v in variants[1:]:
        for what, mine, theirs in (
            ("req/s", v.rates, base.rates),
            ("run's own req/s", v.reported, base.reported),
            ("CPU/request", v.cpu_us, base.cpu_us),
        ):
            ratios = [y / x for x, y in zip(theirs, mine, strict=True)]
            head = f"{v.label}/off" if what == "req/s" else ""
            print(
                f"  {head:>9} {what:>15} per round "
                + " ".join(f"{r:.3f}" for r in ratios)
                + f" (median {med(ratios):.3f})"
            )
        threads = [a + b for a, b in zip(v.parse_cpu_ms, v.get_cpu_ms, strict=True)]
        fit.append((med(v.scrapes), med(threads)))
    if len(fit) >= 2:
        (s1, c1), (s2, c2) = fit[0], fit[-1]
        per = (c2 - c1) / (s2 - s1) if s2 != s1 else float("nan")
        print(
            "  the sampler's threads, CPU a run (median): "
            + ", ".join(f"{c:.0f} ms with {s:.0f} scrapes" for s, c in fit)
            + f" = about {c1 - per * s1:.0f} ms a run (its client's set-up) + {per:.1f} ms "
            "a scrape"
        )


if __name__ == "__main__":
    main()
