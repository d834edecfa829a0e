"""Token events per client core on long streams: LoadRun vs bare aiohttp vs bare httptools.

Issue 29, first bullet. A model server under a real gate streams hundreds of
tokens to hundreds of users: what decides whether one client process can load
it is the client's cost per **token event**. This script streams 1,024-token
answers (server ITL 0 ms, all in one write, and 10 ms, one write per token) at
64, 512 and 2,048 concurrent streams from ``benchmarks/streaming_server.py``
(in a process of its own) and measures, in the same run and interleaved round
by round (the order rotates), three clients, each in a fresh process:

- ``llmperf``: the project's ``LoadRun``, closed loop at that concurrency
  (its own HTTP/1.1 client, SSE and JSON parsing of every event, the metrics);
- ``aiohttp``: a bare aiohttp loop, one task per stream, ``iter_any()`` reads;
- ``httptools``: a bare ``asyncio.Protocol`` + ``httptools.HttpResponseParser``
  (``on_body`` is a list's ``append``, as in the project's ``client/http1.py``):
  the least a correct Python SSE reader does.

Both bare loops are minimal but correct SSE readers: they keep the partial
tail between reads, split events on blank lines, count an event as a token
event when it is a ``data:`` line carrying ``"delta"`` (not the usage chunk,
not ``[DONE]``), take one ``monotonic_ns`` per read and keep TTFT (first token
event minus the request's send) and ITL (one gap per token event; the events
of one read are 0 apart, kept as a count). They decode **no JSON**
(``httptools-json``, not in the default set, adds ``json.loads`` of every
token event, for the cost of that alone). ``aiohttp-lines``, not in the default
set either, reads the stream line by line (``async for line in
resp.content``, stamped per line), as most hand-written SSE clients and
vLLM's ``benchmark_serving`` do: a far slower baseline than ``iter_any()``.

Per client and configuration:

- ``ev/s``: token events over the client's wall time (one process, so at most
  one core; the server needs the other);
- ``ev/CPU-s``: token events per second of *client* CPU (``time.process_time``
  of the client's process only: token events per second per client core, the
  figure a busy neighbour disturbs least), and ``CPU µs/ev`` its inverse
  (``usr``/``sys``: the ``getrusage`` split); CPU and wall cover the client's
  whole run after a small warm-up run in the same process (imports, first-call
  costs): for ``LoadRun`` its connects and its result included, while the bare
  loops open their connections first and leave that out (aiohttp has no
  pre-connect: a small ``GET`` on each), so no measured request of any client
  includes a connect and the comparison errs in the bare loops' favour;
- TTFT and ITL error: the client's p50 / p99 minus the server's own (its
  ``monotonic_ns`` at each request's arrival and each token write, ``GET /truth``;
  CLOCK_MONOTONIC is system-wide). At ITL 0 the server's one-write path records
  no truth of its own, so this script's server (``--serve``, the benchmark
  server with that path stamped) records arrival and the write's return; the
  true ITL there is 0 (all tokens in one write);
- ``ev/read``: token events per read (a slower client reads more events at a
  time, and so pays fewer reads per event): with ``--syscalls``, per ``recvfrom``
  or ``read`` system call of the measured run, counted by ``perf stat``
  (``syscall_count.py``), for every client alike; without, the bare loops' own
  count of reads and ``LoadRun``'s reads that delivered a token event (its token
  events less its ITL gaps of 0);
- with ``--syscalls``, system calls per token event, per round: reads, epoll
  waits, writes, ``epoll_ctl`` and all (issue 42);
- ``others``: CPU cores busy outside the client and the server during the run
  (``/proc/stat`` less the two), with the load average: the neighbours' share.

Each round runs every client once; the table shows the best round (CPU per
event; the highest ev/s) and the median, the TTFT/ITL errors as the median
over the rounds, and the per-round ratio to bare aiohttp. The machine is
shared: figures are indicative.

Reading the errors: a closed loop of equal-length streams sends in waves (all
slots finish together and send again together). The bare loops send a wave in
one turn of the event loop; ``LoadRun`` sends and accounts 4 slots a turn
(``loadgen/issue/turn_budget.py``) so the first answers are read as they come.
At ITL 0 every client is CPU-bound and reads each socket about once per wave,
so its TTFT error is the time to get through a wave (tens to hundreds of ms); at
ITL 10 ms it includes the server reading a wave's requests late.
At ITL 10 ms the server writes once per token per stream, and from 512 streams
on a 2-core machine it is the bottleneck itself (see its achieved ITL on the
"server truth" line): a run then lasts as long as the server takes (2,048
streams: over five minutes a round of three clients).

    python benchmarks/loadgen_events.py --quick              # smoke run, ~30 s
    python benchmarks/loadgen_events.py --concurrency 512 --itl 0 --rounds 3
    python benchmarks/loadgen_events.py --concurrency 64 --itl 10 --per-stream 1
    python benchmarks/loadgen_events.py --concurrency 512 --itl 0 \
        --clients llmperf,aiohttp,httptools,httptools-json
    python benchmarks/loadgen_events.py --profile /tmp/ev.prof --concurrency 512 \
        --itl 0 --per-stream 1
    python benchmarks/loadgen_events.py --micro              # per-event pieces, no socket

A client may be named with its event loop, ``CLIENT:uvloop`` (default
``asyncio``): ``--clients llmperf,llmperf:uvloop,aiohttp`` measures the project's
client on both loops in the same rounds (issue 42, item 2). ``CLIENT@MS``
(``llmperf@2``, ``llmperf:uvloop@10``) makes that client's event loop sleep
``MS`` at the end of every turn, so its connections are read less often and
each read finds more (issue 42, item 1's experiment: system calls saved per
event against the timestamps' error; the sleep is not CPU time). The script prints
the machine's system-call cost first (``syscall_cost.py``).

``--per-stream`` is the requests per stream slot in a run (default 2: the
run holds ``concurrency x per-stream`` requests). ``--profile FILE`` runs
``LoadRun`` once under cProfile instead (the first ``--concurrency`` and
``--itl``) and prints the top functions by own and by cumulative time, in µs
per token event and as a share of the profiled run (cProfile's overhead is
included: read the shares, not the absolute figures; ``--micro`` gives the
per-event pieces without a profiler). The default (every concurrency at both
ITLs) takes far more than three minutes: pick one of each per invocation.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import syscall_count  # noqa: E402
from loops import LOOPS, run_on  # noqa: E402
from streaming_server import Connection, ServerProcess, StreamingServer  # noqa: E402
from syscall_cost import line as syscall_cost_line  # noqa: E402

MODEL = "bench-model"
CLIENTS = ("llmperf", "aiohttp", "httptools")
EXTRA_CLIENTS = ("httptools-json", "aiohttp-lines")
WARMUP = (4, 16, 64)  # the warm-up run in each client process: concurrency, requests, tokens


# -- the server: the benchmark server, its zero-delay path stamped as well ------------------


class StampedConnection(Connection):
    """The benchmark server's connection; a zero-delay stream (one write) records its truth.

    ``streaming_server.py`` writes a zero-TTFT, zero-ITL stream in one write and
    records nothing for it; here the request's arrival and the instant that write
    returned are kept (TTFT = write - arrival, as its paced path stamps after each
    write). The ITL of such a stream is 0 by construction and is not stored.
    """

    def stream(self, n: int, arrival: int) -> None:
        srv = self.server
        if srv.ttft_ns or srv.itl_ns or self.transport is None:
            super().stream(n, arrival)
            return
        super().stream(n, arrival)
        now = time.monotonic_ns()
        if srv.record:
            srv.truth.ttft_ns.append(now - arrival)
            srv.truth.arrival_ns.append(arrival)
            srv.truth.first_write_ns.append(now)


async def _serve(itl_ms: float) -> None:
    server = StreamingServer(0.0, itl_ms, True)
    loop = asyncio.get_running_loop()
    srv = await loop.create_server(lambda: StampedConnection(server), "127.0.0.1", 0, backlog=4096)
    print(f"LISTENING http://127.0.0.1:{srv.sockets[0].getsockname()[1]}", flush=True)
    reader = asyncio.StreamReader()
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    await reader.read()  # the parent closed our stdin: exit
    srv.close()


def start_server(itl_ms: float) -> ServerProcess:
    cmd = [sys.executable, os.path.abspath(__file__), "--serve", "--itl", str(itl_ms)]
    proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    assert proc.stdout is not None
    line = proc.stdout.readline().decode().strip()
    if not line.startswith("LISTENING "):
        proc.kill()
        raise RuntimeError(f"benchmark server did not start: {line!r}")
    return ServerProcess(proc, line.split(" ", 1)[1])


# -- the clients (each in a process of its own) ---------------------------------------------


@dataclass
class Tally:
    """What a bare client measured: counts, TTFT per request, ITL gaps per token event."""

    events: int = 0
    requests: int = 0
    errors: int = 0
    ttft_ns: list[int] = field(default_factory=list)
    gaps_ns: list[int] = field(default_factory=list)
    zero_gaps: int = 0  # ITL samples of 0: the 2nd.. token events of one read
    reads: int = 0  # reads (body pieces handed to the SSE reader) that held any bytes
    setup_cpu_s: float = 0.0  # opening the connections: left out of the run's CPU and wall
    setup_wall_s: float = 0.0

    def setup_done(self, cpu0: float, wall0: float) -> None:
        self.setup_cpu_s = time.process_time() - cpu0
        self.setup_wall_s = time.perf_counter() - wall0


def _body(tokens: int) -> bytes:
    return json.dumps(
        {
            "model": MODEL,
            "messages": [{"role": "user", "content": "hello there"}],
            "max_tokens": tokens,
            "stream": True,
        },
        separators=(",", ":"),
    ).encode()


class _Stream:
    """One response's SSE reading for the bare clients: split, count, stamp (no JSON)."""

    __slots__ = ("decode", "last", "t_send", "tail", "tally")

    def __init__(self, tally: Tally, t_send: int, decode: bool) -> None:
        self.tally = tally
        self.t_send = t_send
        self.tail = b""
        self.last = 0
        self.decode = decode

    def line(self, now: int) -> None:
        """``aiohttp-lines``: one token event read as a line, stamped when it is read."""
        tally = self.tally
        tally.reads += 1
        tally.events += 1
        if self.last:
            tally.gaps_ns.append(now - self.last)
        else:
            tally.ttft_ns.append(now - self.t_send)
        self.last = now

    def feed(self, data: bytes, now: int) -> None:
        self.tally.reads += 1
        *events, self.tail = (self.tail + data).split(b"\n\n")
        n = 0
        if self.decode:
            for ev in events:
                if ev.startswith(b"data:") and b'"delta"' in ev:
                    json.loads(ev[5:])["choices"][0]["delta"]
                    n += 1
        else:
            for ev in events:
                if ev.startswith(b"data:") and b'"delta"' in ev:
                    n += 1
        if n:
            tally = self.tally
            tally.events += n
            if self.last:
                tally.gaps_ns.append(now - self.last)
            else:
                tally.ttft_ns.append(now - self.t_send)  # the first token event: no gap
            tally.zero_gaps += n - 1  # the read's other token events: 0 after the first
            self.last = now


async def bare_aiohttp(
    url: str,
    concurrency: int,
    requests: int,
    tokens: int,
    decode: bool = False,
    lines: bool = False,
) -> Tally:
    import aiohttp

    body = _body(tokens)
    headers = {"Content-Type": "application/json", "Accept": "text/event-stream"}
    tally = Tally()
    left = requests
    connector = aiohttp.TCPConnector(limit=concurrency)
    timeout = aiohttp.ClientTimeout(total=None, sock_read=120)
    async with aiohttp.ClientSession(connector=connector, timeout=timeout) as session:
        # Open the pool first (aiohttp has no pre-connect: a small GET on each connection),
        # so that no measured request includes a connect, as in LoadRun and the httptools loop.
        cpu0, wall0 = time.process_time(), time.perf_counter()

        async def touch() -> None:
            async with session.get(url + "/v1/models") as resp:
                await resp.read()

        await asyncio.gather(*(touch() for _ in range(concurrency)))
        tally.setup_done(cpu0, wall0)

        async def worker() -> None:
            nonlocal left
            while left > 0:
                left -= 1
                t_send = time.monotonic_ns()
                async with session.post(
                    url + "/v1/chat/completions", data=body, headers=headers
                ) as resp:
                    stream = _Stream(tally, t_send, decode)
                    if lines:  # as most hand-written SSE clients read: line by line
                        async for line in resp.content:
                            if line.startswith(b"data:") and b'"delta"' in line:
                                stream.line(time.monotonic_ns())
                    else:
                        async for data in resp.content.iter_any():
                            stream.feed(data, time.monotonic_ns())
                    tally.requests += 1
                    if resp.status != 200 or stream.last == 0:
                        tally.errors += 1

        await asyncio.gather(*(worker() for _ in range(concurrency)))
    return tally


class _BareConnection(asyncio.Protocol):
    """A keep-alive connection read by llhttp; one response at a time."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.pieces: list[bytes] = []
        self.complete = False
        self.stream: _Stream | None = None
        self.done: asyncio.Future[None] | None = None
        callbacks = SimpleNamespace(
            on_body=self.pieces.append, on_message_complete=self._on_message_complete
        )
        from httptools import HttpResponseParser

        self.parser = HttpResponseParser(callbacks)

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def _on_message_complete(self) -> None:
        self.complete = True

    def data_received(self, data: bytes) -> None:
        now = time.monotonic_ns()
        self.parser.feed_data(data)
        pieces = self.pieces
        if pieces and self.stream is not None:
            self.stream.feed(pieces[0] if len(pieces) == 1 else b"".join(pieces), now)
        pieces.clear()
        if self.complete:
            self.complete = False
            if self.done is not None and not self.done.done():
                self.done.set_result(None)

    def connection_lost(self, exc: Exception | None) -> None:
        if self.done is not None and not self.done.done():
            self.done.set_exception(ConnectionError("server closed the connection"))

    async def exchange(self, request: bytes, stream: _Stream) -> int:
        assert self.transport is not None
        self.stream = stream
        self.done = asyncio.get_running_loop().create_future()
        stream.t_send = time.monotonic_ns()
        self.transport.write(request)
        await self.done
        return int(self.parser.get_status_code())


async def bare_httptools(
    url: str, concurrency: int, requests: int, tokens: int, decode: bool = False
) -> Tally:
    host, port = url.split("//", 1)[1].split(":")
    body = _body(tokens)
    request = (
        b"POST /v1/chat/completions HTTP/1.1\r\nHost: %s:%s\r\nContent-Type: application/json\r\n"
        b"Accept: text/event-stream\r\nContent-Length: %d\r\n\r\n%s"
        % (host.encode(), port.encode(), len(body), body)
    )
    tally = Tally()
    left = requests
    loop = asyncio.get_running_loop()

    cpu0, wall0 = time.process_time(), time.perf_counter()
    conns = await asyncio.gather(
        *(loop.create_connection(_BareConnection, host, int(port)) for _ in range(concurrency))
    )
    tally.setup_done(cpu0, wall0)

    async def worker(conn: _BareConnection) -> None:
        nonlocal left
        try:
            while left > 0:
                left -= 1
                stream = _Stream(tally, 0, decode)
                status = await conn.exchange(request, stream)
                tally.requests += 1
                if status != 200 or stream.last == 0:
                    tally.errors += 1
        finally:
            if conn.transport is not None:
                conn.transport.close()

    await asyncio.gather(*(worker(conn) for _, conn in conns))
    return tally


async def llmperf(url: str, concurrency: int, requests: int, tokens: int) -> dict[str, Any]:
    from pytest_llmperf.client.endpoint import Endpoint
    from pytest_llmperf.client.records import RequestRecord
    from pytest_llmperf.loadgen import LoadRun
    from pytest_llmperf.metrics.histogram import LatencyHistogram
    from pytest_llmperf.specs.load import LoadSpec
    from pytest_llmperf.specs.run import RunSpec

    spec = RunSpec(
        "synthetic",
        {"input_tokens": 4, "output_tokens": tokens},
        0,
        LoadSpec.parse("concurrency", {"concurrency": concurrency}),
        requests=requests,
    )
    seen = {"events": 0, "errors": 0}

    def observe(record: RequestRecord) -> None:
        seen["events"] += record.token_events
        seen["errors"] += record.error is not None

    run = LoadRun(
        Endpoint(url + "/v1", model=MODEL), spec, observers=[observe], handle_sigint=False
    )
    result = await run.execute()
    ttft, itl = result.metrics["ttft"], result.metrics["itl"]
    assert isinstance(ttft, LatencyHistogram) and isinstance(itl, LatencyHistogram)
    # the gaps of 0 are the 2nd.. token events of one read: the rest came each in a read
    # of its own (those reads, not the reads that held no token event: a lower bound)
    zero_gaps, _ = itl.split_at_ms(0.001)
    return {
        "event_reads": seen["events"] - zero_gaps,
        "events": seen["events"],
        "requests": result.counts["completed"] + result.counts.get("failed", 0),
        "errors": seen["errors"],
        "ttft_ms": [ttft.p(50), ttft.p(99)],
        "itl_ms": [itl.p(50), itl.p(99)],
    }


def _tally_summary(tally: Tally) -> dict[str, Any]:
    from pytest_llmperf.metrics.histogram import LatencyHistogram

    ttft, itl = LatencyHistogram(), LatencyHistogram()
    ttft.record_many_ns(tally.ttft_ns)
    itl.record_many_ns(tally.gaps_ns)
    if tally.zero_gaps:
        itl.record_ns(0, tally.zero_gaps)
    return {
        "events": tally.events,
        "requests": tally.requests,
        "errors": tally.errors,
        "reads": tally.reads,
        "ttft_ms": [ttft.p(50), ttft.p(99)],
        "itl_ms": [itl.p(50), itl.p(99)],
    }


def split_client(name: str) -> tuple[str, str]:
    """``httptools:uvloop@2`` -> (``httptools``, ``uvloop``); no loop named: asyncio's."""
    client, _, loop = name.partition("@")[0].partition(":")
    return client, loop or "asyncio"


def hold_ms(name: str) -> float:
    """``llmperf@2`` -> 2.0: the client's event loop holds 2 ms each turn (see :func:`_held`)."""
    return float(name.partition("@")[2] or 0)


async def _held(coro: Coroutine[Any, Any, Any], hold_s: float) -> Any:
    """Run ``coro`` with the loop made to read less often: every turn of the loop ends in a
    ``time.sleep(hold_s)`` (a callback that sleeps and schedules itself again), so each
    connection's bytes accumulate for ``hold_s`` before its next read. The experiment of
    issue 42 item 1: what reading less often saves in system calls per event, and what it
    costs in timestamp truth (an event's time is the read that delivered it). The sleep is
    not CPU time."""
    loop = asyncio.get_running_loop()
    sleep = time.sleep
    on = True

    def hold() -> None:
        if on:
            sleep(hold_s)
            loop.call_soon(hold)

    loop.call_soon(hold)
    try:
        return await coro
    finally:
        on = False


def _client_call(
    client: str, url: str, concurrency: int, requests: int, tokens: int
) -> Coroutine[Any, Any, Any]:
    if client == "llmperf":
        return llmperf(url, concurrency, requests, tokens)
    decode = client.endswith("-json")
    if client.startswith("aiohttp"):
        return bare_aiohttp(url, concurrency, requests, tokens, decode, client.endswith("-lines"))
    return bare_httptools(url, concurrency, requests, tokens, decode)


def child(
    name: str,
    url: str,
    concurrency: int,
    requests: int,
    tokens: int,
    profile: str,
    syscalls: bool = False,
) -> None:
    """One client run in this (fresh) process, on its event loop; prints one JSON line.

    ``syscalls``: count the measured run's system calls with ``perf stat`` (started after
    the warm-up, stopped after the run; ``syscall_count.py``).
    """
    from pytest_llmperf.client.fdlimits import ensure_descriptors

    client, loop = split_client(name)

    _big = bytes(4 << 20)  # see below
    ensure_descriptors(concurrency, what="benchmark streams")
    # glibc serves an allocation above its mmap threshold (128 KiB at start) with mmap, and
    # raises the threshold when such a block is freed. asyncio reads into a 256 KiB buffer:
    # until something freed a larger block, each read costs an mmap, mremap and munmap (3
    # syscalls; seen in the bare httptools loop, whose process had not). A process that has
    # run for a while has freed one; so has every client here, the same way, before it starts.
    del _big
    c, r, t = WARMUP
    run_on(loop, _client_call(client, url, c, r, t))  # imports, first calls: not measured
    counting = syscall_count.start() if syscalls else None
    profiler = None
    if profile:
        import cProfile

        profiler = cProfile.Profile()
    ru0 = resource.getrusage(resource.RUSAGE_SELF)
    c0, t0 = time.process_time(), time.perf_counter()
    if profiler is not None:
        profiler.enable()
    call = _client_call(client, url, concurrency, requests, tokens)
    if hold_ms(name):
        call = _held(call, hold_ms(name) / 1000)
    got: Any = run_on(loop, call)
    if profiler is not None:
        profiler.disable()
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    ru1 = resource.getrusage(resource.RUSAGE_SELF)
    counts = counting.stop() if counting is not None else None
    if isinstance(got, Tally):  # the bare loops leave their connects out; LoadRun cannot
        wall -= got.setup_wall_s
        cpu -= got.setup_cpu_s
    out = got if isinstance(got, dict) else _tally_summary(got)
    if profiler is not None:
        profiler.dump_stats(profile)
    user, system = ru1.ru_utime - ru0.ru_utime, ru1.ru_stime - ru0.ru_stime
    scale = cpu / (user + system) if user + system > 0 else 1.0  # less the connects, if left out
    out.update(
        wall_s=wall,
        cpu_s=cpu,
        user_s=user * scale,
        sys_s=system * scale,
        nvcsw=ru1.ru_nvcsw - ru0.ru_nvcsw,
        nivcsw=ru1.ru_nivcsw - ru0.ru_nivcsw,
        syscalls=counts,  # the bare loops' connects included (a few per connection)
    )
    print(json.dumps(out))


# -- the parent: rounds, truth, the table ---------------------------------------------------


def _busy_ticks() -> int:
    """Jiffies the whole machine spent busy (not idle, not waiting for I/O) so far."""
    with open("/proc/stat") as f:
        fields = [int(x) for x in f.readline().split()[1:]]
    return sum(fields) - fields[3] - fields[4]


def _proc_ticks(pid: int) -> int:
    with open(f"/proc/{pid}/stat") as f:
        after = f.read().rsplit(")", 1)[1].split()
    return int(after[11]) + int(after[12])  # utime, stime


@dataclass
class Round:
    client: str
    out: dict[str, Any]
    truth_ttft_ms: tuple[float, float]
    truth_itl_ms: tuple[float, float]
    loadavg: float
    others_cores: float

    @property
    def cpu_us(self) -> float:
        return float(self.out["cpu_s"]) / max(1, int(self.out["events"])) * 1e6

    @property
    def rate(self) -> float:
        return float(self.out["events"]) / float(self.out["wall_s"])


def _truth(server: ServerProcess) -> tuple[tuple[float, float], tuple[float, float]]:
    from pytest_llmperf.metrics.histogram import LatencyHistogram

    truth = server.truth()
    ttft, itl = LatencyHistogram(), LatencyHistogram()
    ttft.record_many_ns(truth["ttft_ns"])
    itl.record_many_ns(truth["itl_ns"])
    itl_ms = (itl.p(50), itl.p(99)) if itl.count else (0.0, 0.0)  # ITL 0: one write
    return (ttft.p(50), ttft.p(99)), itl_ms


def run_round(
    server: ServerProcess,
    client: str,
    concurrency: int,
    requests: int,
    tokens: int,
    profile: str = "",
    syscalls: bool = False,
) -> Round:
    server.reset()
    cmd = [sys.executable, os.path.abspath(__file__), "--child", client, server.url]
    cmd += [str(concurrency), str(requests), str(tokens), profile or "-", str(int(syscalls))]
    busy0, srv0, wall0 = _busy_ticks(), _proc_ticks(server.proc.pid), time.monotonic()
    kids0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
    kids1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    busy1, srv1, wall1 = _busy_ticks(), _proc_ticks(server.proc.pid), time.monotonic()
    load = os.getloadavg()[0]
    if done.returncode != 0:
        raise SystemExit(f"{client} failed:\n{done.stderr[-3000:]}")
    out = json.loads(done.stdout.strip().splitlines()[-1])
    if out["errors"] or out["events"] != requests * tokens:
        print(
            f"  warning: {client}: {out['errors']} errors, {out['events']} token events "
            f"of {requests * tokens}",
            file=sys.stderr,
        )
    ttft, itl = _truth(server)
    # Others: the machine's busy time less the server's and the whole client process's
    # (start-up and warm-up included), over the client process's lifetime, in cores.
    hz = os.sysconf("SC_CLK_TCK")
    client_s = (kids1.ru_utime - kids0.ru_utime) + (kids1.ru_stime - kids0.ru_stime)
    others_s = (busy1 - busy0 - (srv1 - srv0)) / hz - client_s
    others = max(0.0, others_s) / (wall1 - wall0)
    return Round(client, out, ttft, itl, load, others)


def _fmt_err(rounds: list[Round], key: str) -> str:
    truth_key = "truth_ttft_ms" if key == "ttft_ms" else "truth_itl_ms"
    p50 = statistics.median(r.out[key][0] - getattr(r, truth_key)[0] for r in rounds)
    p99 = statistics.median(r.out[key][1] - getattr(r, truth_key)[1] for r in rounds)
    return f"{p50:+8.3f} {p99:+9.3f}"


def report(concurrency: int, itl: float, tokens: int, by_client: dict[str, list[Round]]) -> None:
    every = [r for rounds in by_client.values() for r in rounds]
    loads = [r.loadavg for r in every]
    others = [r.others_cores for r in every]
    truth = every[0]
    print(
        f"\n{concurrency} concurrent {tokens}-token streams, server ITL {itl:g} ms, "
        f"{every[0].out['requests']} requests a run, {len(by_client[next(iter(by_client))])} "
        f"rounds; load average {min(loads):.1f}-{max(loads):.1f}, other processes "
        f"{min(others):.1f}-{max(others):.1f} cores busy"
    )
    print(
        f"  server truth (round 1): TTFT p50 {truth.truth_ttft_ms[0]:.3f} p99 "
        f"{truth.truth_ttft_ms[1]:.3f} ms; ITL p50 {truth.truth_itl_ms[0]:.3f} p99 "
        f"{truth.truth_itl_ms[1]:.3f} ms"
    )
    print(
        "  client          ev/s best   median | ev/CPU-s best  median | CPU µs/ev best "
        "median (usr/sys) | CPU share | ev/read | TTFT err p50    p99 | ITL err p50    p99 ms"
    )
    for client, rounds in by_client.items():
        rates = [r.rate for r in rounds]
        per_cpu = [1e6 / r.cpu_us for r in rounds]
        cpu_us = [r.cpu_us for r in rounds]
        best = min(rounds, key=lambda r: r.cpu_us)
        ev = max(1, int(best.out["events"]))
        usr, sys_ = best.out["user_s"] / ev * 1e6, best.out["sys_s"] / ev * 1e6
        share = statistics.median(r.out["cpu_s"] / r.out["wall_s"] for r in rounds)
        reads = [r.out["events"] / n for r in rounds if (n := _reads(r.out))]
        per_read = f"{statistics.median(reads):7.2f}" if reads else "      -"
        print(
            f"  {client:14s} {max(rates):9.0f} {statistics.median(rates):8.0f} | "
            f"{max(per_cpu):13.0f} {statistics.median(per_cpu):7.0f} | "
            f"{min(cpu_us):9.2f} {statistics.median(cpu_us):6.2f} ({usr:.2f}/{sys_:.2f}) | "
            f"{share:9.2f} | {per_read} | {_fmt_err(rounds, 'ttft_ms')} | "
            f"{_fmt_err(rounds, 'itl_ms')}"
        )
    for client, rounds in by_client.items():
        counted = [r for r in rounds if r.out.get("syscalls")]
        if counted:
            print(f"  {client}: system calls per token event, per round: " + _per_event(counted))
    base_name = next((c for c in by_client if split_client(c)[0] == "aiohttp"), "")
    if base_name:
        base = by_client[base_name]
        for client, rounds in by_client.items():
            if client == base_name:
                continue
            ratios = sorted(b.cpu_us / r.cpu_us for r, b in zip(rounds, base, strict=True))
            print(
                f"  {client} / {base_name}, events per CPU-second, per round: "
                + " ".join(f"{x:.2f}" for x in ratios)
                + f" (median {statistics.median(ratios):.2f})"
            )


def _reads(out: dict[str, Any]) -> int:
    """The run's reads: counted system calls where ``--syscalls`` counted them, else the
    bare loops' own count, else ``LoadRun``'s reads that delivered a token event."""
    counts = out.get("syscalls")
    if counts:
        return sum(counts.get(c, 0) for c in syscall_count.GROUPS["reads"])
    return int(out.get("reads") or out.get("event_reads") or 0)


def _per_event(rounds: list[Round]) -> str:
    parts = []
    for r in rounds:
        counts, events = r.out["syscalls"], max(1, int(r.out["events"]))
        groups = {
            name: sum(counts.get(c, 0) for c in calls)
            for name, calls in syscall_count.GROUPS.items()
        }
        body = " ".join(f"{name} {n / events:.3f}" for name, n in groups.items())
        parts.append(f"[{body}, all {counts.get('total', 0) / events:.3f}]")
    return " ".join(parts)


def profile_run(
    concurrency: int, itl: float, requests: int, tokens: int, out: str, top: int
) -> None:
    import pstats

    server = start_server(itl)
    try:
        r = run_round(server, "llmperf", concurrency, requests, tokens, out)
    finally:
        server.stop()
    events = int(r.out["events"])
    print(
        f"cProfile of LoadRun: {concurrency} streams x {tokens} tokens, ITL {itl:g} ms, "
        f"{requests} requests, {events} token events; load average {r.loadavg:.1f}, others "
        f"{r.others_cores:.1f} cores; under the profiler {r.cpu_us:.2f} CPU µs/event "
        f"(wall {r.out['wall_s']:.1f} s)"
    )
    stats = pstats.Stats(out)
    rows: list[tuple[str, int, float, float]] = []
    raw: dict[Any, Any] = stats.stats  # type: ignore[attr-defined]
    for (path, line, name), (_cc, nc, tt, ct, _callers) in raw.items():
        short = f"{os.path.basename(path)}:{line}({name})" if line else name
        rows.append((short, nc, tt, ct))
    total = max(ct for _, _, _, ct in rows)  # the whole profiled run (asyncio.run)
    for title, own in (("own time (tottime)", True), ("cumulative (cumtime)", False)):
        print(f"\n  top {top} by {title}; µs per token event, share of profiled time, calls/event")
        for short, nc, tt, ct in sorted(rows, key=lambda x: -(x[2] if own else x[3]))[:top]:
            v = tt if own else ct
            print(f"    {v / events * 1e6:7.3f} µs  {v / total:6.1%}  {nc / events:6.3f}  {short}")


def micro(tokens: int, repeat: int) -> None:
    """The per-event path's pieces on the server's own stream, no profiler, no socket."""
    import timeit

    from pytest_llmperf.apis.chunk_shapes import ChunkReader
    from pytest_llmperf.apis.chunks import _SCAN, parse_chunk
    from pytest_llmperf.client.records import RequestRecord
    from pytest_llmperf.client.request import _on_event
    from pytest_llmperf.client.sse import SSEParser

    srv = StreamingServer(0.0, 0.0, False)
    # the SSE bytes of one stream (its HTTP chunk framing removed), as on_body gets them
    events = [srv.token(i, i == tokens - 1).split(b"\r\n")[1] for i in range(tokens)]
    body = b"".join(events)
    payloads = SSEParser().feed(body)
    one = payloads[1]

    def per_event(fn: Callable[[], object], n: int) -> float:
        return min(timeit.repeat(fn, number=1, repeat=repeat)) / n * 1e6

    def on_events() -> None:
        record = RequestRecord(0, 0)
        for data in payloads:
            _on_event(data, 1, record, parse_chunk)

    def on_events_reader() -> None:
        record, reader = RequestRecord(0, 0), ChunkReader()
        for data in payloads:
            _on_event(data, 1, record, reader)

    def bare_split() -> None:
        n = 0
        for ev in body.split(b"\n\n"):
            if ev.startswith(b"data:") and b'"delta"' in ev:
                n += 1

    rows = [
        ("SSEParser.feed, whole stream in one read", lambda: SSEParser().feed(body)),
        (
            "SSEParser.feed, one read per event",
            lambda: [p.feed(e) for p in [SSEParser()] for e in events],
        ),
        ("parse_chunk per event", lambda: [parse_chunk(d) for d in payloads]),
        (
            "ChunkReader per event (the stream's shape learned)",
            lambda: [r(d) for r in [ChunkReader()] for d in payloads],
        ),
        ("  of which the C scanner (_SCAN)", lambda: [_SCAN(d, 0) for d in payloads]),
        ("  json.loads, for comparison", lambda: [json.loads(d) for d in payloads]),
        ("_on_event (parse_chunk + record)", on_events),
        ("_on_event (ChunkReader + record): the client's path", on_events_reader),
        ("bare split + token test (the bare loops)", bare_split),
        ("time.monotonic_ns()", lambda: [time.monotonic_ns() for _ in payloads]),
    ]
    print(
        f"per-event costs, {tokens}-token stream of {len(body)} bytes "
        f"({len(one)} bytes a payload), best of {repeat}; load average "
        f"{os.getloadavg()[0]:.1f}"
    )
    for label, fn in rows:
        print(f"  {per_event(fn, len(payloads)):6.3f} µs/event  {label}")
    print(f"  {_one_read_per_event(srv, tokens, repeat):6.3f} µs/event  {_ONE_READ}")


_ONE_READ = "a read per event, HTTP framing to record (buffer_updated + the response's sink)"


def _one_read_per_event(srv: StreamingServer, tokens: int, repeat: int) -> float:
    """The connection's whole per-read path at a 10 ms stream's one event a read."""
    from pytest_llmperf.client.endpoint import Timeouts
    from pytest_llmperf.client.http1 import Http1Connection
    from pytest_llmperf.client.records import RequestRecord
    from pytest_llmperf.client.request import _Reading

    frames = [srv.token(i, i == tokens - 1) for i in range(tokens)]  # HTTP chunks
    head = (
        b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
    )

    class _Transport:  # what the connection asks of one: nothing is sent
        def write(self, data: bytes) -> None:
            pass

        def get_extra_info(self, name: str) -> None:
            return None

    # each read's bytes stand ready in a buffer of their own, as recv_into leaves them in
    # the connection's: the time is the connection's and the sink's, not a copy's
    reads = [memoryview(bytearray(frame)) for frame in frames]

    async def stream() -> float:
        conn = Http1Connection()
        conn.connection_made(_Transport())  # type: ignore[arg-type]
        record = RequestRecord(0, 1)
        conn.send(b"", _Reading(record, Timeouts.from_seconds(100), 1, api="chat"))
        conn._buffer = memoryview(bytearray(head))
        conn.buffer_updated(len(head))
        started = time.perf_counter()
        for view in reads:
            conn._buffer = view
            conn.buffer_updated(len(view))
        elapsed = time.perf_counter() - started
        assert record.token_events >= tokens - 1 and record.error is None, record.error_detail
        return elapsed / tokens * 1e6

    async def best() -> float:
        return min([await stream() for _ in range(repeat)])

    return asyncio.run(best())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--concurrency", default="64,512,2048", help="comma-separated")
    ap.add_argument("--itl", default="0,10", help="server ITL in ms, comma-separated")
    ap.add_argument("--tokens", type=int, default=1024)
    ap.add_argument("--per-stream", type=float, default=2, help="requests per stream slot in a run")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument(
        "--clients",
        default=",".join(CLIENTS),
        help=f"of {', '.join(CLIENTS + EXTRA_CLIENTS)}",
    )
    ap.add_argument("--quick", action="store_true", help="smoke run: 64 streams, 256 tokens")
    ap.add_argument("--profile", default="", help="cProfile LoadRun once into this file")
    ap.add_argument("--top", type=int, default=25)
    ap.add_argument(
        "--micro", action="store_true", help="per-event costs of the client's pieces, no socket"
    )
    ap.add_argument(
        "--syscalls",
        action="store_true",
        help="count each measured run's system calls with perf stat (reads, epoll waits, "
        "writes per token event; adds about 0.2-0.3 µs of sys time per system call)",
    )
    ap.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--child", nargs=7, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.serve:
        asyncio.run(_serve(float(args.itl)))
        return
    if args.child:
        client, url, conc, reqs, toks, prof, calls = args.child
        child(
            client, url, int(conc), int(reqs), int(toks), "" if prof == "-" else prof, calls == "1"
        )
        return
    if args.micro:
        micro(args.tokens, max(5, args.rounds * 5))
        return
    if args.quick:
        args.concurrency, args.tokens, args.rounds, args.per_stream = "64", 256, 1, 1
    levels = [int(x) for x in args.concurrency.split(",")]
    itls = [float(x) for x in args.itl.split(",")]
    clients = args.clients.split(",")
    unknown = {c for c in clients if split_client(c)[0] not in CLIENTS + EXTRA_CLIENTS} | {
        c for c in clients if split_client(c)[1] not in LOOPS
    }
    for c in clients:
        try:
            hold_ms(c)
        except ValueError:
            unknown.add(c)
    if unknown:
        raise SystemExit(f"unknown clients: {sorted(unknown)} (CLIENT[:LOOP][@HOLD_MS])")

    from pytest_llmperf.client.fdlimits import ensure_descriptors

    soft = ensure_descriptors(max(levels), what="benchmark streams")  # children inherit it
    print(
        f"machine: {platform.machine()}, {os.cpu_count()} CPUs, Python "
        f"{platform.python_version()}; RLIMIT_NOFILE soft {soft} (each side needs one per "
        f"stream); load average now {' '.join(f'{x:.2f}' for x in os.getloadavg())}"
    )
    print(syscall_cost_line())
    if args.profile:
        requests = round(levels[0] * args.per_stream)
        profile_run(levels[0], itls[0], requests, args.tokens, args.profile, args.top)
        return
    for itl in itls:
        server = start_server(itl)
        try:
            for conc in levels:
                requests = max(1, round(conc * args.per_stream))
                by_client: dict[str, list[Round]] = {c: [] for c in clients}
                for k in range(args.rounds):
                    order = clients[k % len(clients) :] + clients[: k % len(clients)]
                    for client in order:
                        by_client[client].append(
                            run_round(
                                server, client, conc, requests, args.tokens, "", args.syscalls
                            )
                        )
                report(conc, itl, args.tokens, by_client)
        finally:
            server.stop()


if __name__ == "__main__":
    main()
