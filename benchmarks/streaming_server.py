"""A deterministic, purpose-built OpenAI streaming server for the load-generator benchmarks.

Why not the embedded simulator: the benchmarks must measure the *client*,
so the server has to be cheaper than the client and must say exactly when
it did things. This one is a bare ``asyncio.Protocol`` (no web framework):
it answers ``POST /v1/chat/completions`` with ``max_tokens`` content chunks,
the first ``ttft_ms`` after the request's last byte arrived and then one
every ``itl_ms`` (zero: everything in one write), followed by a usage chunk
and ``[DONE]``. It records, per request, ``time.monotonic_ns()`` at the
arrival of the request and at the write of each content chunk. On Linux
``CLOCK_MONOTONIC`` is system-wide, so these server-side instants are on
the same clock as the client's readings in another process: ``GET /truth``
returns the server's own TTFT and ITL (and ``POST /truth/reset`` clears
them), the ground truth the client's measurements are compared with.

Run: ``python benchmarks/streaming_server.py --ttft-ms 50 --itl-ms 10``
prints ``LISTENING http://127.0.0.1:PORT``; or use :func:`start_server`.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass, field

__all__ = ["ServerProcess", "start_server"]

_HEAD = (
    b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
    b"Cache-Control: no-cache\r\nTransfer-Encoding: chunked\r\n\r\n"
)
_MODELS = b'{"object":"list","data":[{"id":"bench-model","object":"model"}]}'


def _chunk(payload: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(payload), payload)


def _event(obj: dict) -> bytes:
    return _chunk(b"data: " + json.dumps(obj, separators=(",", ":")).encode() + b"\n\n")


def _token_event(i: int, last: bool) -> bytes:
    return _event(
        {
            "id": "b",
            "object": "chat.completion.chunk",
            "choices": [
                {
                    "index": 0,
                    "delta": {"content": f"t{i} "},
                    "finish_reason": "length" if last else None,
                }
            ],
        }
    )


_DONE = _chunk(b"data: [DONE]\n\n") + b"0\r\n\r\n"


def _plain(status: str, body: bytes, ctype: bytes = b"application/json") -> bytes:
    return b"HTTP/1.1 %s\r\nContent-Type: %s\r\nContent-Length: %d\r\n\r\n%s" % (
        status.encode(),
        ctype,
        len(body),
        body,
    )


@dataclass
class Truth:
    """Server-side instants (monotonic ns) of the requests served since the last reset."""

    ttft_ns: list[int] = field(default_factory=list)
    itl_ns: list[int] = field(default_factory=list)
    arrival_ns: list[int] = field(default_factory=list)
    first_write_ns: list[int] = field(default_factory=list)


class StreamingServer:
    """Shared state: latencies to serve and the truth recorded so far."""

    def __init__(self, ttft_ms: float, itl_ms: float, record: bool) -> None:
        self.ttft_ns = int(ttft_ms * 1e6)
        self.itl_ns = int(itl_ms * 1e6)
        self.record = record
        self.truth = Truth()
        self.token_cache: dict[tuple[int, bool], bytes] = {}

    def token(self, i: int, last: bool) -> bytes:
        key = (i, last)
        got = self.token_cache.get(key)
        if got is None:
            got = self.token_cache[key] = _token_event(i, last)
        return got

    def truth_body(self) -> bytes:
        t = self.truth
        return json.dumps(
            {
                "ttft_ns": t.ttft_ns,
                "itl_ns": t.itl_ns,
                "arrival_ns": t.arrival_ns,
                "first_write_ns": t.first_write_ns,
            }
        ).encode()


class Connection(asyncio.Protocol):
    """One keep-alive HTTP/1.1 connection; requests are handled one at a time."""

    def __init__(self, server: StreamingServer) -> None:
        self.server = server
        self.buf = b""
        self.transport: asyncio.Transport | None = None
        self.busy = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def connection_lost(self, exc: Exception | None) -> None:
        self.transport = None

    def data_received(self, data: bytes) -> None:
        arrival = time.monotonic_ns()
        self.buf += data
        while not self.busy:
            end = self.buf.find(b"\r\n\r\n")
            if end < 0:
                return
            head = self.buf[:end].decode("latin-1")
            length = 0
            for line in head.split("\r\n")[1:]:
                name, _, value = line.partition(":")
                if name.strip().lower() == "content-length":
                    length = int(value)
            if len(self.buf) < end + 4 + length:
                return
            body = self.buf[end + 4 : end + 4 + length]
            self.buf = self.buf[end + 4 + length :]
            method, path = head.split(" ", 2)[:2]
            self.handle(method, path, body, arrival)

    def handle(self, method: str, path: str, body: bytes, arrival: int) -> None:
        t = self.transport
        if t is None:
            return
        if path.endswith("/models"):
            t.write(_plain("200 OK", _MODELS))
        elif path == "/truth":
            t.write(_plain("200 OK", self.server.truth_body()))
        elif path == "/truth/reset":
            self.server.truth = Truth()
            t.write(_plain("200 OK", b"{}"))
        elif method == "POST" and path.endswith("/completions"):
            n = int(json.loads(body).get("max_tokens") or 16)
            self.stream(n, arrival)
        else:
            t.write(_plain("404 Not Found", b'{"error":{"message":"not found"}}'))

    def stream(self, n: int, arrival: int) -> None:
        srv = self.server
        t = self.transport
        assert t is not None
        if srv.ttft_ns == 0 and srv.itl_ns == 0:
            parts = [_HEAD, *(srv.token(i, i == n - 1) for i in range(n)), _usage(n), _DONE]
            t.write(b"".join(parts))
            return
        self.busy = True
        t.write(_HEAD)
        loop = asyncio.get_running_loop()
        # loop.time() and monotonic_ns share CLOCK_MONOTONIC on Linux.
        base = arrival / 1e9 + srv.ttft_ns / 1e9
        state = {"i": 0, "last": 0}

        def emit() -> None:
            tr = self.transport
            if tr is None:
                self.busy = False
                return
            i = state["i"]
            tr.write(srv.token(i, i == n - 1))
            now = time.monotonic_ns()
            if srv.record:
                if i == 0:
                    srv.truth.ttft_ns.append(now - arrival)
                    srv.truth.arrival_ns.append(arrival)
                    srv.truth.first_write_ns.append(now)
                else:
                    srv.truth.itl_ns.append(now - state["last"])
            state["last"] = now
            state["i"] = i + 1
            if i + 1 < n:
                loop.call_at(base + (i + 1) * srv.itl_ns / 1e9, emit)
            else:
                tr.write(_usage(n) + _DONE)
                self.busy = False
                if self.buf:
                    self.data_received(b"")

        loop.call_at(base, emit)


def _usage(n: int) -> bytes:
    return _event(
        {
            "id": "b",
            "object": "chat.completion.chunk",
            "choices": [],
            "usage": {"prompt_tokens": 8, "completion_tokens": n, "total_tokens": n + 8},
        }
    )


async def serve(ttft_ms: float, itl_ms: float, port: int, record: bool) -> None:
    server = StreamingServer(ttft_ms, itl_ms, record)
    loop = asyncio.get_running_loop()
    srv = await loop.create_server(lambda: Connection(server), "127.0.0.1", port, backlog=1024)
    real_port = srv.sockets[0].getsockname()[1]
    print(f"LISTENING http://127.0.0.1:{real_port}", flush=True)
    reader = asyncio.StreamReader()
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    await reader.read()  # parent closed our stdin: exit
    srv.close()


@dataclass
class ServerProcess:
    """A running benchmark server: ``.url``, ``.truth()``, ``.reset()``, ``.stop()``."""

    proc: subprocess.Popen[bytes]
    url: str

    def truth(self) -> dict[str, list[int]]:
        import urllib.request

        with urllib.request.urlopen(self.url + "/truth") as r:
            return json.loads(r.read())

    def reset(self) -> None:
        import urllib.request

        with urllib.request.urlopen(self.url + "/truth/reset") as r:
            r.read()

    def stop(self) -> None:
        if self.proc.stdin:
            self.proc.stdin.close()
        try:
            self.proc.wait(5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def start_server(
    ttft_ms: float = 0.0, itl_ms: float = 0.0, *, record: bool = True
) -> ServerProcess:
    """Start the server in a child process and wait until it listens."""
    cmd = [sys.executable, os.path.abspath(__file__), "--ttft-ms", str(ttft_ms)]
    cmd += ["--itl-ms", str(itl_ms)]
    if not record:
        cmd.append("--no-record")
    proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    assert proc.stdout is not None
    line = proc.stdout.readline().decode().strip()
    if not line.startswith("LISTENING "):
        proc.kill()
        raise RuntimeError(f"benchmark server did not start: {line!r}")
    return ServerProcess(proc, line.split(" ", 1)[1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ttft-ms", type=float, default=0.0)
    ap.add_argument("--itl-ms", type=float, default=0.0)
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--no-record", action="store_true")
    args = ap.parse_args()
    asyncio.run(serve(args.ttft_ms, args.itl_ms, args.port, not args.no_record))


if __name__ == "__main__":
    main()
