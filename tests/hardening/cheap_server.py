"""A minimal OpenAI-style streaming server for scale tests: cheap per token, counts connections.

Raw asyncio, pre-encoded chunks, HTTP/1.1 keep-alive, no model of anything:
each answer is ``--tokens`` content chunks ``--itl-ms`` apart, so thousands of
streams stay open at once while the server spends almost no CPU. ``GET
/stats`` reports connections accepted, open and the peak open, so a test can
prove the client really held N streams at once and reused its connections.

Run as a child process: ``python cheap_server.py [--tokens N] [--itl-ms MS]``
prints ``LISTENING http://127.0.0.1:PORT`` and exits when stdin closes (so it
cannot outlive the test that started it).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path

__all__ = ["CheapServer", "start_cheap_server"]

_CHUNK = (
    b'data: {"id":"c","object":"chat.completion.chunk","model":"cheap",'
    b'"choices":[{"index":0,"delta":{"content":"tok "},"finish_reason":null}]}\n\n'
)


def _http_chunk(data: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(data), data)


class CheapServer:
    def __init__(self, tokens: int, itl_s: float) -> None:
        self.tokens = tokens
        self.itl_s = itl_s
        self.accepted = 0
        self.open = 0
        self.peak_open = 0
        self.requests = 0
        finish = json.dumps(
            {
                "id": "c",
                "object": "chat.completion.chunk",
                "model": "cheap",
                "choices": [{"index": 0, "delta": {}, "finish_reason": "length"}],
                "usage": {"prompt_tokens": 8, "completion_tokens": tokens},
            }
        ).encode()
        self.head = (
            b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
            b"Transfer-Encoding: chunked\r\n\r\n"
        )
        self.token = _http_chunk(_CHUNK)
        self.tail = (
            _http_chunk(b"data: " + finish + b"\n\n")
            + _http_chunk(b"data: [DONE]\n\n")
            + b"0\r\n\r\n"
        )

    async def serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.accepted += 1
        self.open += 1
        self.peak_open = max(self.peak_open, self.open)
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = 0
                for line in head.split(b"\r\n"):
                    if line[:15].lower() == b"content-length:":
                        length = int(line[15:])
                if length:
                    await reader.readexactly(length)
                if head.startswith(b"GET /stats"):
                    body = json.dumps(self.stats()).encode()
                    writer.write(
                        b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                        b"Content-Length: %d\r\n\r\n%s" % (len(body), body)
                    )
                    await writer.drain()
                    continue
                if head.startswith(b"GET "):
                    body = b'{"object":"list","data":[{"id":"cheap"}]}'
                    writer.write(
                        b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                        b"Content-Length: %d\r\n\r\n%s" % (len(body), body)
                    )
                    await writer.drain()
                    continue
                self.requests += 1
                writer.write(self.head)
                for _ in range(self.tokens):
                    writer.write(self.token)
                    await writer.drain()
                    await asyncio.sleep(self.itl_s)
                writer.write(self.tail)
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError, asyncio.LimitOverrunError):
            pass
        finally:
            self.open -= 1
            writer.transport.abort()

    def stats(self) -> dict[str, int]:
        return {
            "accepted": self.accepted,
            "open": self.open,
            "peak_open": self.peak_open,
            "requests": self.requests,
        }


async def _main(tokens: int, itl_ms: float) -> None:
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    from pytest_llmperf.client.fdlimits import raise_nofile_limit

    raise_nofile_limit(1 << 16)
    app = CheapServer(tokens, itl_ms / 1000)
    server = await asyncio.start_server(app.serve, "127.0.0.1", 0, backlog=16384)
    port = server.sockets[0].getsockname()[1]
    print(f"LISTENING http://127.0.0.1:{port}", flush=True)
    loop = asyncio.get_running_loop()
    await loop.run_in_executor(None, sys.stdin.buffer.read)  # returns at EOF: parent gone
    server.close()
    os._exit(0)


def start_cheap_server(tokens: int = 10, itl_ms: float = 20.0) -> tuple[subprocess.Popen, str]:
    """Start the server as a child; ``(process, url)``. Close its stdin to stop it."""
    proc = subprocess.Popen(
        [sys.executable, __file__, "--tokens", str(tokens), "--itl-ms", str(itl_ms)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
    )
    assert proc.stdout is not None
    line = proc.stdout.readline().decode().strip()
    if not line.startswith("LISTENING "):
        proc.kill()
        raise RuntimeError(f"cheap server did not start: {line!r}")
    return proc, line.split(" ", 1)[1]


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--tokens", type=int, default=10)
    ap.add_argument("--itl-ms", type=float, default=20.0)
    args = ap.parse_args()
    asyncio.run(_main(args.tokens, args.itl_ms))
