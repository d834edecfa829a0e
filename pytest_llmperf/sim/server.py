"""The simulator's HTTP surface (aiohttp.web): the routes, one handler per API.

A handler reads a request's body, asks the API's served half (served_apis.py)
to parse it, hands it to the bridge to the engine (bridge.py: admission, faults,
what its tokens say, the back end) and writes the answer in the API's shape
(answers.py) as each token comes due (token_paths.py). Errors are rendered here,
in each API's shape. A client that disconnects cancels its handler (aiohttp's
``handler_cancellation``), and the ``finally`` releases the request in the
engine, as vLLM aborts a request whose client went away.

The jobs around that live in their own modules: request strictness
(validation.py), vLLM's ``/tokenize`` (tokenization.py), the delta shapes of
other servers (deltas.py), the socket writers of the engine's fan-out
(sink.py), and serving the app on a port (serving.py). Every token-streaming
API shares one path — admission, faults, the back end, both token paths — and
differs only in its parsing and bytes; embeddings submit each input as a
prefill-only request; images in prompts are charged as prompt tokens (images.py).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from typing import Any

from aiohttp import web
from aiohttp.typedefs import Handler

from .answers import Usage
from .bridge import EngineBridge
from .deltas import DeltaPlan, split_text
from .faults import FaultPlan
from .outputs import OutputPlan
from .prometheus import render_metrics
from .served_apis import EMBEDDINGS, SERVED, ServedApi, ServedEmbeddings
from .streams import TokenStream, writes_itself
from .tokenization import Tokenization
from .wire import ParsedRequest, WireError, models_body

__all__ = ["SIM_VERSION", "SimApp"]

MAX_REQUEST_BYTES = 256 * 1024 * 1024  # what one request body may hold

SIM_VERSION = "pytest-llmperf-sim 0.1"
_FAULT_MESSAGES = {
    429: "Too many requests (simulated).",
    500: "Internal server error (simulated).",
    503: "Service unavailable (simulated).",
}
_Route = Callable[[web.Request], Awaitable[web.StreamResponse]]


class SimApp:
    """The HTTP surface of one simulator, over its bridge to the engine (``sim``)."""

    def __init__(self, sim: EngineBridge) -> None:
        self.sim = sim
        self.profile = profile = sim.profile
        self.poll = sim.poll
        self.counters = sim.counters
        self.paths = sim.paths
        self.policy = sim.policy
        self.tokenization = Tokenization(
            profile.model, profile.max_model_len, profile.lora_adapters
        )
        # aiohttp refuses bodies over 1 MiB by default; two 512x512 PNGs in base64 are
        # 1.4 MiB, and vLLM (uvicorn) sets no limit: take what a vision prompt sends.
        self.app = web.Application(
            middlewares=[self._poll_around], client_max_size=MAX_REQUEST_BYTES
        )
        self.app.add_routes(
            [
                web.get("/v1/models", self.models),
                web.get("/health", self.health),
                web.get("/version", self.version),
                web.get("/metrics", self.metrics),
                *(web.post(served.path, self._handler(served)) for served in SERVED),
                web.post(EMBEDDINGS.path, self.embeddings),
                web.post("/tokenize", self.tokenization.tokenize),
                web.post("/detokenize", self.tokenization.detokenize),
            ]
        )
        if sim.kv is not None:  # vLLM's (development mode) reset, where there is a cache
            self.app.add_routes([web.post("/reset_prefix_cache", self.reset_prefix_cache)])
        self.app.on_startup.append(self._on_startup)
        self.app.on_cleanup.append(self._on_cleanup)

    @web.middleware
    async def _poll_around(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        """Let the engine emit what fell due before and after each request's handling."""
        self.poll()
        try:
            return await handler(request)
        finally:
            self.poll()

    async def _on_startup(self, _app: web.Application) -> None:
        await self.sim.start()

    async def _on_cleanup(self, _app: web.Application) -> None:
        await self.sim.stop()

    # -- simple endpoints -------------------------------------------------
    async def models(self, _request: web.Request) -> web.Response:
        p = self.profile
        return web.json_response(models_body(p.model, p.max_model_len, p.lora_adapters))

    async def health(self, _request: web.Request) -> web.Response:
        return web.Response(status=200)

    async def version(self, _request: web.Request) -> web.Response:
        return web.json_response({"version": SIM_VERSION, "profile": self.profile.name})

    async def metrics(self, _request: web.Request) -> web.Response:
        text = render_metrics(self.profile.model, self.sim.backend.stats(), self.counters)
        return web.Response(text=text, content_type="text/plain", charset="utf-8")

    async def reset_prefix_cache(self, _request: web.Request) -> web.Response:
        """vLLM's ``POST /reset_prefix_cache``: ``{"success": bool}``, false while blocks
        are in use (see :meth:`KVCache.reset_prefix_cache`)."""
        assert self.sim.kv is not None  # routed only where there is a cache
        return web.json_response({"success": self.sim.kv.reset_prefix_cache()})

    # -- reading and refusing ---------------------------------------------
    def _error(
        self,
        served: ServedApi | ServedEmbeddings,
        status: int,
        message: str,
        param: str | None = None,
        retry_after: int | None = None,
    ) -> web.Response:
        """An error answer in the API's shape (Anthropic's for Messages)."""
        self.counters.errors += 1
        headers = {"Retry-After": str(retry_after)} if retry_after is not None else None
        body = served.error_body(status, message, param)
        return web.json_response(body, status=status, headers=headers)

    def _fault_error(self, served: ServedApi | ServedEmbeddings, faults: FaultPlan) -> web.Response:
        """The error status a fault injects."""
        status = faults.error_status
        assert status is not None
        retry_after = faults.retry_after_s if status in (429, 503) else None
        return self._error(served, status, _FAULT_MESSAGES[status], None, retry_after)

    async def _accepted_body(
        self, request: web.Request, served: ServedApi | ServedEmbeddings
    ) -> Any:
        """The request's JSON body, or the answer that refuses it (not JSON, or a field the
        strict profile's policy refuses) as a :class:`web.Response`."""
        try:
            body = await request.json()
        except (json.JSONDecodeError, UnicodeDecodeError):
            return self._error(served, 400, "request body is not valid JSON")
        if self.policy is not None:
            rejection = self.policy.check(served.api, body)
            if rejection is not None:
                self.counters.errors += 1
                return web.json_response(rejection.body, status=rejection.status)
        return body

    # -- the token-streaming APIs -----------------------------------------
    def _handler(self, served: ServedApi) -> _Route:
        """The route of one token-streaming API."""

        async def handle(request: web.Request) -> web.StreamResponse:
            return await self._handle(request, served)

        handle.__name__ = served.api
        return handle

    async def _handle(self, request: web.Request, served: ServedApi) -> web.StreamResponse:
        body = await self._accepted_body(request, served)
        if isinstance(body, web.StreamResponse):
            return body
        # Between its pieces of work a handler lets the engine emit whatever fell due:
        # a burst of arrivals must not hold back the tokens of running requests.
        sim = self.sim
        poll = self.poll
        poll()
        index = sim.arrive()
        p = self.profile
        try:
            parsed = served.parse(body, p.model, p.image_token_px, p.lora_adapters)
            n_out, finish = sim.admit(parsed, served.prompt_param, served.max_param)
            out = sim.output(parsed, body, index, n_out, finish)
        except WireError as exc:
            return self._error(served, exc.status, exc.message, exc.param)
        poll()
        faults = sim.faults(index, out.n)
        if faults.error_status is not None:
            if parsed.stream and served.event_stream and p.stream_error_events:
                return await self._stream_error(request, served, parsed, faults.error_status)
            return self._fault_error(served, faults)
        try:
            stream = sim.submit(parsed, out)
        except RuntimeError as exc:  # the engine died (a simulator bug, already on stderr)
            return self._error(served, 500, str(exc))
        deltas = sim.deltas(index, out, parsed.api)
        try:
            if parsed.stream:
                return await self._stream(request, served, parsed, stream, out, faults, deltas)
            try:
                return await self._full(request, served, parsed, stream, out, faults, deltas)
            except RuntimeError as exc:  # the engine died while we waited
                return self._error(served, 500, str(exc))
        finally:
            stream.close()

    def _usage(
        self, parsed: ParsedRequest, stream: TokenStream, n_out: int, deltas: DeltaPlan | None
    ) -> Usage:
        reasoning = deltas.n_reasoning if deltas is not None and deltas.n_reasoning else None
        return Usage(
            parsed.num_prompt_tokens,
            n_out,
            stream.cached_tokens,
            reasoning,
            self.sim.request_metrics(stream, n_out),
        )

    async def _stream(
        self,
        request: web.Request,
        served: ServedApi,
        parsed: ParsedRequest,
        stream: TokenStream,
        out: OutputPlan,
        faults: FaultPlan,
        deltas: DeltaPlan | None,
    ) -> web.StreamResponse:
        loop = asyncio.get_running_loop()
        arrival = loop.time()
        n_out, finish, salt = out.n, out.finish, out.salt
        resp = web.StreamResponse(
            headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"}
        )
        writer = await resp.prepare(request)
        self.poll()
        p = self.profile
        answer = served.answer(parsed, deltas, out, p.reasoning_field, p.responses_incomplete_event)
        opening = answer.opening()
        if opening:
            await resp.write(opening)
        lags = self.sim.emit_lags if not faults.delays_tokens else None
        w, shaped = answer.writer, answer.shaped
        # A back end that writes tokens itself (the engine) gets a writer with each chunk
        # ready-made, and writes it straight to the socket from its fan-out: no coroutine
        # resumed per token, which matters when a step emits 64 at once. Faults that
        # shape the stream take the general path.
        if (
            writes_itself(stream)
            and not faults.per_chunk
            and not faults.delays_tokens
            and faults.cut_at is None
            and resp.headers.get("Transfer-Encoding") == "chunked"
            and request.transport is not None
        ):
            send_headers = getattr(writer, "send_headers", None)
            if send_headers is not None:  # aiohttp >= 3.10 may hold them for the first write
                send_headers()
            await self.paths.write_directly(
                request, w, stream, n_out, finish, salt, arrival, lags, shaped
            )
        elif not await self.paths.write_tokens(
            request, resp, w, stream, n_out, finish, faults, salt, arrival, lags, shaped
        ):
            return resp  # cut mid-stream: no [DONE], no chunked terminator
        self.counters.finished(
            out.engine_finish, n_out, stream.served_times(), loop.time() - arrival
        )
        for piece in answer.closing(
            self._usage(parsed, stream, n_out, deltas), parsed.include_usage
        ):
            await resp.write(piece)
        await resp.write_eof()
        return resp

    async def _full(
        self,
        request: web.Request,
        served: ServedApi,
        parsed: ParsedRequest,
        stream: TokenStream,
        out: OutputPlan,
        faults: FaultPlan,
        deltas: DeltaPlan | None,
    ) -> web.StreamResponse:
        n_out = out.n
        times = await self.paths.await_all(request, stream, n_out, faults)
        if times is None:
            return web.Response(status=200)  # cut: nothing more is written
        arrival, _first, last = times
        self.counters.finished(out.engine_finish, n_out, stream.served_times(), last - arrival)
        reasoning, text = split_text(deltas, out.salt, n_out, out.pieces)
        usage = self._usage(parsed, stream, n_out, deltas)
        p = self.profile
        answer = served.answer(parsed, deltas, out, p.reasoning_field, p.responses_incomplete_event)
        return web.json_response(answer.full_body(reasoning, text, usage))

    async def _stream_error(
        self, request: web.Request, served: ServedApi, parsed: ParsedRequest, status: int
    ) -> web.StreamResponse:
        """An injected error as a streamed Responses / Messages API sends one (profile
        key ``stream_error_events``): 200, the opening events, then ``response.failed``
        or an ``error`` event with the message."""
        self.counters.errors += 1
        resp = web.StreamResponse(
            headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"}
        )
        await resp.prepare(request)
        message = _FAULT_MESSAGES[status]
        await resp.write(served.stream_failure(parsed, self.profile.model, status, message))
        await resp.write_eof()
        return resp

    # -- embeddings -------------------------------------------------------
    async def embeddings(self, request: web.Request) -> web.StreamResponse:
        """``POST /v1/embeddings``: each input a prefill-only request of the back end
        (embeddings.py); the answer when the last of them is done."""
        served = EMBEDDINGS
        sim = self.sim
        p = self.profile
        body = await self._accepted_body(request, served)
        if isinstance(body, web.StreamResponse):
            return body
        self.poll()
        index = sim.arrive()
        try:
            parsed = served.parse(body, p.model, p.embedding_dim, p.max_model_len)
            sim.embeddings_fit(parsed)
        except WireError as exc:
            return self._error(served, exc.status, exc.message, exc.param)
        faults = sim.faults(index, 1)
        if faults.error_status is not None:
            return self._fault_error(served, faults)
        loop = asyncio.get_running_loop()
        arrival = loop.time()
        try:
            await sim.embed(parsed)
        except RuntimeError as exc:  # the engine died (a simulator bug, already on stderr)
            return self._error(served, 500, str(exc))
        if faults.stall_first_s:
            await self.paths.stall(None, faults.stall_first_s, faults)
        answer = parsed.body()
        self.counters.finished("stop", 0, None, loop.time() - arrival)
        return web.json_response(answer)
