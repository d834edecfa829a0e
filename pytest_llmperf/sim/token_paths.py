"""Each token written at the instant the back end planned for it: the two token paths.

The engine's fan-out writes a token's ready-made chunk straight to the socket
(:meth:`TokenPaths.write_directly`, sink.py): no coroutine resumed per token, which
matters when a step emits 64 at once. The general path (:meth:`TokenPaths.write_tokens`)
awaits each token and applies the faults that shape a stream (chunks of several
tokens, stalls with keep-alive comments, a malformed frame, a cut connection). A
non-streamed answer waits for all its tokens (:meth:`TokenPaths.await_all`). Every
path counts the time to first token and the gaps between tokens for ``/metrics``.
The chunks' bytes come from the API's renderer; this module only times them.
"""

from __future__ import annotations

import asyncio
from typing import cast

from aiohttp import web

from ..apis.filler_text import token_text
from ..apis.served import ChunkSource, PlainChunks
from .clock import sleep_until
from .faults import FaultPlan
from .prometheus import ServerCounters
from .sink import ShapedSocketSink, SocketSink
from .streams import TokenStream, WritableTokenStream

__all__ = ["KEEPALIVE_FRAME", "MALFORMED_FRAME", "TokenPaths"]

MALFORMED_FRAME = b'data: {"id": "malformed", "choices": [{"index": 0, "delta": {"content": \n\n'
KEEPALIVE_FRAME = b": keep-alive\n\n"


class TokenPaths:
    """The token timing of one simulator: its counters, emit-lag record and clock."""

    def __init__(self, counters: ServerCounters, emit_planned: list[float], timing: str) -> None:
        self.counters = counters
        self.emit_planned = emit_planned
        self.timing = timing

    async def stall(
        self, resp: web.StreamResponse | None, seconds: float, faults: FaultPlan
    ) -> None:
        """Hold the stream for ``seconds``, with comment lines if configured."""
        loop = asyncio.get_running_loop()
        end = loop.time() + seconds
        if resp is not None and faults.keepalive_interval_s > 0:
            while end - loop.time() > faults.keepalive_interval_s:
                await asyncio.sleep(faults.keepalive_interval_s)
                await resp.write(KEEPALIVE_FRAME)
        await sleep_until(end, self.timing)

    @staticmethod
    def cut(request: web.Request) -> None:
        """Drop the connection mid-response (no [DONE], no chunked terminator)."""
        if request.transport is not None:
            request.transport.abort()

    async def write_tokens(
        self,
        request: web.Request,
        resp: web.StreamResponse,
        w: PlainChunks | None,
        stream: TokenStream,
        n_out: int,
        finish: str,
        faults: FaultPlan,
        salt: int,
        arrival: float,
        lags: list[float] | None,
        shaped: ChunkSource | None,
    ) -> bool:
        """The general path: await each token, apply the faults, write through aiohttp.
        False if the stream was cut (nothing more may be written); ``w`` renders the
        plain chunks where there is no ``shaped`` renderer."""
        assert shaped is not None or w is not None
        plain = cast(PlainChunks, w)  # used only where there is no ``shaped``
        loop = asyncio.get_running_loop()
        counters = self.counters
        last = 0.0
        i = 0
        while i < n_out:
            size = min(faults.chunk_size(), n_out - i) if faults.per_chunk else 1
            if shaped is not None:
                size = shaped.clip(i, size)
            planned = 0.0
            for _ in range(size):
                got = await stream.next_token()
                if got is None:  # pragma: no cover - back end ended early
                    raise RuntimeError("back end ended a stream early")
                planned = got
            if i == 0 and faults.stall_first_s:
                await self.stall(resp, faults.stall_first_s, faults)
            if faults.stall_mid_at is not None and i <= faults.stall_mid_at < i + size:
                await self.stall(resp, faults.stall_mid_s, faults)
            if faults.cut_at is not None and i <= faults.cut_at < i + size:
                self.cut(request)
                return False
            if faults.per_chunk:
                if faults.keepalive():
                    await resp.write(KEEPALIVE_FRAME)
                if faults.malformed():
                    await resp.write(MALFORMED_FRAME)
            if shaped is not None:
                chunk = shaped.chunk(i, size)
            elif size == 1:
                chunk = plain.token_chunk(token_text(i, salt), finish if i + 1 == n_out else None)
            else:
                text = "".join(token_text(j, salt) for j in range(i, i + size))
                chunk = plain.token_chunk(text, finish if i + size == n_out else None)
            i += size
            now = loop.time()
            if lags is not None:
                lags.append(now - planned)
                self.emit_planned.append(planned)
            if chunk:  # empty: a dropped empty delta (a typed event) sends nothing
                await resp.write(chunk)
            if last:
                counters.itl.observe(now - last)
            else:
                counters.ttft.observe(now - arrival)
            last = now
        return True

    async def write_directly(
        self,
        request: web.Request,
        w: PlainChunks | None,
        stream: WritableTokenStream,
        n_out: int,
        finish: str,
        salt: int,
        arrival: float,
        lags: list[float] | None,
        shaped: ChunkSource | None,
    ) -> None:
        """Let the back end's fan-out write every token (see sink.py)."""
        assert request.transport is not None
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        tr: asyncio.WriteTransport = request.transport
        sink: SocketSink
        if shaped is None:
            assert w is not None
            head, tail, last_tail = w.token_template(finish)
            sink = SocketSink(
                tr,
                head,
                tail,
                last_tail,
                n_out,
                salt,
                arrival,
                self.counters,
                lags,
                self.emit_planned,
                done,
            )
        else:
            sink = ShapedSocketSink(
                tr, shaped, n_out, salt, arrival, self.counters, lags, self.emit_planned, done
            )
        if request.transport.is_closing():
            raise ConnectionResetError("client went away")
        stream.attach_writer(sink, sink.fail)
        await done

    async def await_all(
        self, request: web.Request, stream: TokenStream, n_out: int, faults: FaultPlan
    ) -> tuple[float, float, float] | None:
        """A non-streamed answer: wait for every token, then its stalls; ``(arrival,
        first, last)`` loop times, the time to first token and the mean gap counted, or
        None if the connection was cut (nothing more may be written)."""
        loop = asyncio.get_running_loop()
        arrival = loop.time()
        first = last = 0.0
        for _ in range(n_out):
            await stream.next_token()
            last = loop.time()
            if not first:
                first = last
        stall = faults.stall_first_s + (
            faults.stall_mid_s if faults.stall_mid_at is not None else 0.0
        )
        if stall:
            await self.stall(None, stall, faults)
        if faults.cut_at is not None:
            self.cut(request)
            return None
        self.counters.ttft.observe(first - arrival)
        if n_out > 1:
            # one pooled observation per gap would need every time; use the mean gap per token
            gap = (last - first) / (n_out - 1)
            for _ in range(n_out - 1):
                self.counters.itl.observe(gap)
        return arrival, first, last
