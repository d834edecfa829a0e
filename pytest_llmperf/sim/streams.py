"""The interface between the HTTP front end and a token-producing back end.

The server does not care whether tokens come from the fixed-latency model or
from the continuous-batching engine: it submits a request and then awaits, one
by one, the planned emission instant of each output token. Keeping that
interface tiny is what lets both back ends share every wire-format and fault
code path.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol, TypeGuard

__all__ = [
    "Backend",
    "BackendStats",
    "ServedTimes",
    "Submission",
    "TokenStream",
    "TokenWriter",
    "WritableTokenStream",
    "writes_itself",
]


@dataclass(frozen=True)
class Submission:
    """A request as the back end sees it."""

    prompt_tokens: int
    output_tokens: int  # exactly this many tokens are produced
    block_hashes: tuple[int, ...] = ()  # chained hashes of the prompt's full KV blocks
    priority: int = 0
    image_tokens: int = 0  # of prompt_tokens, those standing for images (apis/prompt_images.py)
    lora: int = 0  # the LoRA adapter (1 = the profile's first lora_adapters name); 0 = base
    replica: int = 0  # which replica serves it (replicas.py; the router's choice, router.py)
    decode: int = -1  # disaggregated (disagg.py): the decode engine; replica = the prefill one


@dataclass(frozen=True)
class ServedTimes:
    """When the back end queued, first scheduled, and produced the first and last token
    of one request, in loop time (seconds, ``time.monotonic``): the server's own clock,
    which vLLM's per-request ``metrics`` report (wire.py :func:`per_request_metrics`)."""

    queued: float
    scheduled: float
    first_token: float
    last_token: float


class TokenStream(Protocol):
    """Planned emission times of one request's output tokens.

    A back end may also offer ``attach_writer(writer, fail)`` (a
    :class:`WritableTokenStream`): from then on it writes each token's ready-made chunk
    to the socket itself at the planned instant, with no task switch (the engine back
    end does, one callback per step for the whole batch; see realtime.py and server.py).
    """

    @property
    def cached_tokens(self) -> int: ...

    async def next_token(self) -> float | None:
        """Wait for the next token; return its planned loop time, or None when done."""

    def close(self) -> None:
        """Release the request (abort it if unfinished). Idempotent."""

    def served_times(self) -> ServedTimes | None:
        """The request's engine times once its last token is out (None before)."""


class TokenWriter(Protocol):
    """Writes one response's token chunks; the server provides it (sink.py).

    ``frame`` is the next token's chunk, ready-made (None once the stream is done or
    gone), so that at the planned instant the fan-out only calls ``tr.write(frame)``;
    ``wrote(planned, now)`` then does the bookkeeping and prepares the next frame,
    after the whole step has been written."""

    tr: asyncio.WriteTransport
    frame: bytes | None

    def wrote(self, planned: float, now: float) -> None: ...


class WritableTokenStream(TokenStream, Protocol):
    """A token stream whose back end writes each chunk itself (the engine's, realtime.py)."""

    def attach_writer(self, writer: TokenWriter, fail: Callable[[BaseException], None]) -> None:
        """From now on write each token's chunk through ``writer``; ``fail`` if the engine dies."""


def writes_itself(stream: TokenStream) -> TypeGuard[WritableTokenStream]:
    """Whether ``stream``'s back end writes its chunks itself (offers ``attach_writer``)."""
    return hasattr(stream, "attach_writer")


@dataclass
class BackendStats:
    """Gauges and counters the back end reports for ``/metrics``."""

    running: int = 0
    waiting: int = 0
    kv_usage: float = 0.0
    preemptions: int = 0
    prefix_hit_tokens: int = 0
    prefix_query_tokens: int = 0


class Backend(Protocol):
    """Produces token streams, in real time, inside the running event loop."""

    async def start(self) -> None: ...

    async def stop(self) -> None: ...

    def submit(self, sub: Submission) -> TokenStream: ...

    def poll(self) -> None:
        """Do now whatever fell due (called by the handlers between pieces of work)."""

    def stats(self) -> BackendStats: ...

    @property
    def in_flight(self) -> int:
        """Requests submitted and not yet released (what a ``least_loaded`` router reads)."""
