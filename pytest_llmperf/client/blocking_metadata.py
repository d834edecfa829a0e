"""The metadata client for synchronous code: :class:`BlockingMetadataClient`.

Synchronous callers (the server tokenizer sizing prompts, the metrics
sampler's scrapes, a ``/metrics`` URL of the user's) may run inside another
event loop's thread, where no loop can be started. This wrapper runs
:class:`~pytest_llmperf.client.metadata.MetadataClient`'s calls on a private
loop in a daemon thread instead: the deadlines, retries and messages are the
async client's, enforced by cancellation. Kept apart from the client so that
module holds one job (what a call is); this one holds the other (where it runs).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import threading
import weakref
from typing import Any

from pytest_llmperf.client.endpoint import Endpoint
from pytest_llmperf.client.metadata import (
    BODY_LIMIT,
    Answer,
    CallFailure,
    CallLimits,
    MetadataCallError,
    MetadataClient,
    Read,
    call_name,
    server_root,
)

__all__ = ["BlockingMetadataClient"]

_GRACE_S = 5.0  # a blocking caller's own backstop beyond the call's deadline


class BlockingMetadataClient:
    """:class:`MetadataClient` for synchronous code, on a private event loop in a daemon thread.

    Synchronous callers (the server tokenizer sizing prompts, tokenizer
    discovery, the identity probe) may run inside another event loop's thread,
    where no loop can be started; the calls run on this client's own loop
    instead, so their deadlines are enforced by cancellation exactly as for
    async callers, and one connection pool serves many calls. Pickles as its
    endpoint and limits (a worker process opens its own loop when it calls).
    """

    def __init__(self, endpoint: Endpoint, *, limits: CallLimits | None = None) -> None:
        self.endpoint = endpoint
        self.limits = limits or CallLimits.of(endpoint.timeouts)
        self._reset()

    def _reset(self) -> None:
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._clients: list[MetadataClient] = []  # the one client living on the loop, once made
        self._stop: weakref.finalize[Any, Any] | None = None

    def __enter__(self) -> BlockingMetadataClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __getstate__(self) -> dict[str, Any]:
        return {"endpoint": self.endpoint, "limits": self.limits}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.endpoint = state["endpoint"]
        self.limits = state["limits"]
        self._reset()

    def with_limits(self, limits: CallLimits) -> BlockingMetadataClient:
        """A client of the same endpoint under other limits (its own loop)."""
        return BlockingMetadataClient(self.endpoint, limits=limits)

    def url(self, route: str) -> str:
        return self.endpoint.base_url + route

    def root_url(self, route: str) -> str:
        return server_root(self.endpoint.base_url) + route

    def call(
        self,
        method: str,
        url: str,
        *,
        what: str = "",
        json: Any = None,
        read: Read = Read.BODY,
        retry: bool = True,
        max_bytes: int = BODY_LIMIT,
        hint: str = "",
    ) -> Answer:
        """:meth:`MetadataClient.call`, waited for (same arguments, same errors)."""
        loop = self._running()
        kwargs: dict[str, Any] = {
            "what": what,
            "json": json,
            "read": read,
            "retry": retry,
            "max_bytes": max_bytes,
            "hint": hint,
        }
        future = asyncio.run_coroutine_threadsafe(self._call(method, url, kwargs), loop)
        try:
            return future.result(timeout=self.limits.total_s + _GRACE_S)
        except concurrent.futures.TimeoutError:  # the call's own deadline failed: a bug
            future.cancel()
            name = call_name(method, url, what)
            raise MetadataCallError(
                f"{name} at {self.endpoint.label} did not end within its "
                f"{self.limits.total_s:g} s limit",
                call=name,
                failure=CallFailure.OUT_OF_TIME,
            ) from None

    async def _call(self, method: str, url: str, kwargs: dict[str, Any]) -> Answer:
        if not self._clients:
            self._clients.append(MetadataClient(self.endpoint, limits=self.limits))
        return await self._clients[0].call(method, url, **kwargs)

    def _running(self) -> asyncio.AbstractEventLoop:
        with self._lock:
            if self._loop is None:
                loop = asyncio.new_event_loop()
                thread = threading.Thread(
                    target=_serve, args=(loop,), name="llmperf-metadata", daemon=True
                )
                thread.start()
                self._loop, self._clients = loop, []
                # closed when this client is (or is collected, or at exit): never a stray socket
                self._stop = weakref.finalize(self, _shut_down, loop, thread, self._clients)
            return self._loop

    def close(self) -> None:
        """Close the connections and stop the loop (idempotent; a later call starts anew)."""
        with self._lock:
            stop, self._loop, self._stop = self._stop, None, None
        if stop is not None:
            stop()


def _serve(loop: asyncio.AbstractEventLoop) -> None:
    """The loop thread: run until stopped, then close the loop (its own thread closes it)."""
    try:
        loop.run_forever()
    finally:
        loop.close()


def _shut_down(
    loop: asyncio.AbstractEventLoop, thread: threading.Thread, clients: list[MetadataClient]
) -> None:
    """Close the loop's client, stop the loop, join its thread (from any thread)."""
    if loop.is_closed():
        return
    if threading.current_thread() is thread:  # collected on the loop itself: no waiting there
        task = loop.create_task(_close(clients))
        task.add_done_callback(lambda _: loop.stop())
        return
    with contextlib.suppress(Exception):
        asyncio.run_coroutine_threadsafe(_close(clients), loop).result(timeout=_GRACE_S)
    with contextlib.suppress(RuntimeError):  # closed meanwhile
        loop.call_soon_threadsafe(loop.stop)
    thread.join(_GRACE_S)


async def _close(clients: list[MetadataClient]) -> None:
    for client in clients:
        with contextlib.suppress(Exception):
            await client.aclose()
