"""Token writers for the engine's fan-out: each response's chunks straight to its socket.

At a step's planned instant the engine writes every due token with one
``transport.write`` per stream (realtime.py, ``_fan_out``). For that the next
chunk of every stream must be ready before the instant: a sink holds it in
``frame``, framed for chunked transfer encoding, and prepares the following one
in :meth:`SocketSink.wrote`, which runs after the whole step is out. The plain
sink builds each chunk from three pre-rendered byte strings and the
pre-encoded word; :class:`ShapedSocketSink` (reasoning, empty deltas, a
separate finish chunk: deltas.py) is a separate class so that the plain path
pays nothing for those modes.
"""

from __future__ import annotations

import asyncio

from ..apis.filler_text import WORDS_JSON
from ..apis.served import ChunkSource
from .prometheus import ServerCounters

__all__ = ["ShapedSocketSink", "SocketSink"]


class SocketSink:
    """Writes one response's token chunks straight to its connection (a TokenWriter).

    The engine's fan-out writes ``frame`` — the next chunk, framed for chunked
    transfer encoding in advance from ready-made bytes (``ChunkWriter.token_template``)
    — at the step's planned instant with one ``transport.write`` (one ``send``; the
    transport buffers only if the socket is full, and aiohttp drains before
    ``[DONE]``), then calls :meth:`wrote` once the whole step is out.
    """

    __slots__ = (
        "counters",
        "done",
        "frame",
        "head",
        "k",
        "lags",
        "last",
        "last_tail",
        "n",
        "planned_log",
        "salt",
        "tail",
        "tr",
    )

    def __init__(
        self,
        tr: asyncio.WriteTransport,
        head: bytes,
        tail: bytes,
        last_tail: bytes,
        n: int,
        salt: int,
        arrival: float,
        counters: ServerCounters,
        lags: list[float] | None,
        planned_log: list[float],
        done: asyncio.Future[None],
    ) -> None:
        self.tr = tr
        self.head = head
        self.tail = tail
        self.last_tail = last_tail
        self.n = n
        self.salt = salt
        self.k = 0
        self.last = arrival
        self.counters = counters
        self.lags = lags
        self.planned_log = planned_log
        self.done = done
        self.frame: bytes | None = self._frame(0)

    def _frame(self, k: int) -> bytes:
        data = (
            self.head
            + _WORDS_JSON[(self.salt + k * 7) % _NWORDS]  # text.token_index, inlined
            + (self.tail if k + 1 < self.n else self.last_tail)
        )
        return b"%x\r\n%b\r\n" % (len(data), data)

    def wrote(self, planned: float, now: float) -> None:
        """Token ``k`` (planned at ``planned``) was written at ``now``."""
        k = self.k
        self.k = k + 1
        lags = self.lags
        if lags is not None:
            lags.append(now - planned)
            self.planned_log.append(planned)
        if k:
            self.counters.itl.observe(now - self.last)
        else:
            self.counters.ttft.observe(now - self.last)
        self.last = now
        if k + 1 == self.n:
            self.frame = None
            # Not done already, unless the handler was cancelled (its client went away:
            # aiohttp cancels the handler and the future it awaits) and its cleanup has
            # not yet taken the request out of the engine: raising here would kill the
            # engine for every request. On a busy machine that window is wide.
            if not self.done.done():
                self.done.set_result(None)
        elif self.tr.is_closing():
            self.fail(ConnectionResetError("client went away"))
        else:
            self.frame = self._frame(k + 1)

    def fail(self, exc: BaseException) -> None:
        self.frame = None
        if not self.done.done():
            self.done.set_exception(exc)


class ShapedSocketSink(SocketSink):
    """A :class:`SocketSink` whose chunks come from a request's chunk source: its
    :class:`~pytest_llmperf.sim.deltas.ShapedChunks` (reasoning deltas, empty deltas, a
    separate finish chunk) or its Responses / Messages events (apis/). A token
    that sends nothing (a dropped empty delta) gets an empty frame, which the fan-out's
    ``write`` skips: an empty chunk would be the chunked-encoding terminator."""

    __slots__ = ("shaped",)

    def __init__(
        self,
        tr: asyncio.WriteTransport,
        shaped: ChunkSource,
        n: int,
        salt: int,
        arrival: float,
        counters: ServerCounters,
        lags: list[float] | None,
        planned_log: list[float],
        done: asyncio.Future[None],
    ) -> None:
        self.shaped = shaped  # before the base class prepares the first frame
        super().__init__(tr, b"", b"", b"", n, salt, arrival, counters, lags, planned_log, done)

    def _frame(self, k: int) -> bytes:
        data = self.shaped.chunk(k)
        return b"%x\r\n%b\r\n" % (len(data), data) if data else b""


_WORDS_JSON = WORDS_JSON
_NWORDS = len(WORDS_JSON)
