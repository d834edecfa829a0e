"""The simulator's HTTP surface (aiohttp.web): the routes, one handler per API.

The routes are built from the registry of formats (:mod:`pytest_llmperf.apis`):
``POST /v1/<path>`` of each format that has a server half (the end of its
module), so the surface names no API. A handler reads a request's body, asks
the format's server half to parse it, hands it to the bridge to the engine
(bridge.py: admission, faults, what its tokens say, the back end) and writes
the answer in the format's framing as each token comes due (token_paths.py).
Errors are rendered here, in each API's shape. A client that disconnects
cancels its handler (aiohttp's ``handler_cancellation``), and the ``finally``
releases the request in the engine, as vLLM aborts a request whose client went
away.

The jobs around that live in their own modules: the routes beside the APIs
(``/v1/models``, ``/health``, ``/version``, ``/metrics``: info_routes.py),
request strictness (validation.py), vLLM's ``/tokenize`` (tokenization.py), the
delta shapes of other servers (deltas.py), the socket writers of the engine's
fan-out (sink.py), and serving the app on a port (serving.py). Every
token-streaming API shares one path — admission, faults, the back end, both
token paths — and differs only in its parsing and bytes; a pooling API
(embeddings) submits each input as a prefill-only request; images in prompts
are charged as prompt tokens (apis/prompt_images.py). With several engines each
request is routed once its body is parsed (router.py: a prefix-aware router reads its
prompt's blocks), and every answer to it names its engine in ``x-replica-id`` (and,
disaggregated, its prefill engine in ``x-prefill-replica-id``; set as the response is
prepared, streamed or not); its counts and histograms go to that engine's page (pages.py).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from typing import Any

from aiohttp import web
from aiohttp.typedefs import Handler

from ..apis.served import AnswerPlan, AnswerSettings, ServedPooling, ServedTokens
from ..apis.served_chunks import split_text
from ..apis.server_table import served_formats
from ..apis.server_wire import DeltaPlan, OutputPlan, ParsedRequest, Usage, WireError
from .bridge import EngineBridge
from .faults import FaultPlan
from .info_routes import SIM_VERSION, InfoRoutes
from .pages import Placement, SimPage
from .router import PREFILL_REPLICA_HEADER, REPLICA_HEADER
from .streams import TokenStream, writes_itself
from .tokenization import Tokenization

__all__ = ["SIM_VERSION", "SimApp"]

MAX_REQUEST_BYTES = 256 * 1024 * 1024  # what one request body may hold

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
        self.settings = AnswerSettings(profile.reasoning_field, profile.responses_incomplete_event)
        self.tokenization = Tokenization(
            profile.model, profile.max_model_len, profile.lora_adapters
        )
        info = InfoRoutes(sim)
        # aiohttp refuses bodies over 1 MiB by default; two 512x512 PNGs in base64 are
        # 1.4 MiB, and vLLM (uvicorn) sets no limit: take what a vision prompt sends.
        self.app = web.Application(
            middlewares=[self._poll_around], client_max_size=MAX_REQUEST_BYTES
        )
        self.app.add_routes(
            [
                *info.routes(),
                *self._api_routes(),
                web.post("/tokenize", self.tokenization.tokenize),
                web.post("/detokenize", self.tokenization.detokenize),
            ]
        )
        self.app.add_routes(info.cache_routes())
        if sim.fleet:  # several engines: every answer names its engine
            self.app.on_response_prepare.append(_name_replica)
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

    # -- reading and refusing ---------------------------------------------
    def _error(
        self,
        served: ServedTokens | ServedPooling,
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

    def _fault_error(self, served: ServedTokens | ServedPooling, faults: FaultPlan) -> web.Response:
        """The error status a fault injects."""
        status = faults.error_status
        assert status is not None
        retry_after = faults.retry_after_s if status in (429, 503) else None
        return self._error(served, status, _FAULT_MESSAGES[status], None, retry_after)

    async def _accepted_body(
        self, request: web.Request, name: str, served: ServedTokens | ServedPooling
    ) -> Any:
        """The request's JSON body, or the answer that refuses it (not JSON, or a field the
        strict profile's policy refuses) as a :class:`web.Response`."""
        try:
            body = await request.json()
        except (json.JSONDecodeError, UnicodeDecodeError):
            return self._error(served, 400, "request body is not valid JSON")
        if self.policy is not None:
            rejection = self.policy.check(served, body)
            if rejection is not None:
                self.counters.errors += 1
                return web.json_response(rejection.body, status=rejection.status)
        return body

    # -- the APIs -----------------------------------------------------------
    def _api_routes(self) -> list[web.RouteDef]:
        """``POST /v1/<path>`` of each format in the registry that has a server half,
        in the registry's order: one handler per API."""
        return [
            web.post("/v1" + path, self._handler(name, served))
            for name, path, served in served_formats()
        ]

    def _handler(self, name: str, served: ServedTokens | ServedPooling) -> _Route:
        """The handler of the API ``name``."""
        if isinstance(served, ServedTokens):

            async def handle(request: web.Request) -> web.StreamResponse:
                return await self._handle(request, name, served)

        else:

            async def handle(request: web.Request) -> web.StreamResponse:
                return await self._pooled(request, name, served)

        handle.__name__ = name
        return handle

    async def _handle(
        self, request: web.Request, name: str, served: ServedTokens
    ) -> web.StreamResponse:
        body = await self._accepted_body(request, name, served)
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
            # routed once parsed: a prefix-aware router reads the prompt's blocks
            placement = _routed(request, sim.route(request.headers, body, parsed))
            n_out, finish = sim.admit(parsed, served.prompt_param, served.max_param)
            out = sim.output(parsed, body, index, n_out, finish, served)
        except WireError as exc:
            if _PLACED not in request:  # not parsed: routed all the same, as a router would
                _routed(request, sim.route(request.headers, body, None))
            return self._error(served, exc.status, exc.message, exc.param)
        poll()
        faults = sim.faults(index, out.n)
        if faults.error_status is not None:
            if parsed.stream and served.event_stream and p.stream_error_events:
                return await self._stream_error(request, served, parsed, faults.error_status)
            return self._fault_error(served, faults)
        try:
            stream = sim.submit(parsed, out, placement)
        except RuntimeError as exc:  # the engine died (a simulator bug, already on stderr)
            return self._error(served, 500, str(exc))
        deltas = sim.deltas(index, out, parsed.api)
        page = sim.page_of(placement)
        try:
            if parsed.stream:
                return await self._stream(
                    request, served, parsed, stream, out, faults, deltas, page
                )
            try:
                return await self._full(request, served, parsed, stream, out, faults, deltas, page)
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
        served: ServedTokens,
        parsed: ParsedRequest,
        stream: TokenStream,
        out: OutputPlan,
        faults: FaultPlan,
        deltas: DeltaPlan | None,
        page: SimPage,
    ) -> web.StreamResponse:
        loop = asyncio.get_running_loop()
        arrival = loop.time()
        n_out, finish, salt = out.n, out.finish, out.salt
        resp = web.StreamResponse(
            headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"}
        )
        writer = await resp.prepare(request)
        self.poll()
        answer = served.answer(AnswerPlan(parsed, deltas, out, self.settings))
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
            await page.paths.write_directly(
                request, w, stream, n_out, finish, salt, arrival, lags, shaped
            )
        elif not await page.paths.write_tokens(
            request, resp, w, stream, n_out, finish, faults, salt, arrival, lags, shaped
        ):
            return resp  # cut mid-stream: no [DONE], no chunked terminator
        page.counters.finished(
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
        served: ServedTokens,
        parsed: ParsedRequest,
        stream: TokenStream,
        out: OutputPlan,
        faults: FaultPlan,
        deltas: DeltaPlan | None,
        page: SimPage,
    ) -> web.StreamResponse:
        n_out = out.n
        times = await page.paths.await_all(request, stream, n_out, faults)
        if times is None:
            return web.Response(status=200)  # cut: nothing more is written
        arrival, _first, last = times
        page.counters.finished(out.engine_finish, n_out, stream.served_times(), last - arrival)
        reasoning, text = split_text(deltas, out.salt, n_out, out.pieces)
        usage = self._usage(parsed, stream, n_out, deltas)
        answer = served.answer(AnswerPlan(parsed, deltas, out, self.settings))
        return web.json_response(answer.full_body(reasoning, text, usage))

    async def _stream_error(
        self, request: web.Request, served: ServedTokens, parsed: ParsedRequest, status: int
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

    # -- the pooling APIs (embeddings) ------------------------------------
    async def _pooled(
        self, request: web.Request, name: str, served: ServedPooling
    ) -> web.StreamResponse:
        """``POST /v1/embeddings``: each input a prefill-only request of the back end;
        the answer when the last of them is done."""
        sim = self.sim
        p = self.profile
        body = await self._accepted_body(request, name, served)
        if isinstance(body, web.StreamResponse):
            return body
        self.poll()
        placement = _routed(request, sim.route(request.headers, body, None))
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
            await sim.embed(parsed, placement)
        except RuntimeError as exc:  # the engine died (a simulator bug, already on stderr)
            return self._error(served, 500, str(exc))
        if faults.stall_first_s:
            await self.paths.stall(None, faults.stall_first_s, faults)
        answer = parsed.body()
        sim.page_of(placement).counters.finished("stop", 0, None, loop.time() - arrival)
        return web.json_response(answer)


# where a routed request keeps its placement (aiohttp >= 3.12 wants a typed key; a string
# on the older ones the project supports)
_PLACED: Any = (
    web.RequestKey("llmperf_placement", Placement) if hasattr(web, "RequestKey") else "placement"
)


def _routed(request: web.Request, placement: Placement | None) -> Placement | None:
    """Keep the router's choice on the request, for the answer's headers (None: one engine)."""
    if placement is not None:
        request[_PLACED] = placement
    return placement


async def _name_replica(request: web.Request, response: web.StreamResponse) -> None:
    """``x-replica-id: <name>`` on every answer of a request the router routed, and
    ``x-prefill-replica-id`` where a prefill engine ran its prompt (aiohttp's
    ``on_response_prepare``: before the headers go out, streamed or not)."""
    placement = request.get(_PLACED)
    if placement is not None:
        response.headers[REPLICA_HEADER] = placement.name
        if placement.prefill_name:
            response.headers[PREFILL_REPLICA_HEADER] = placement.prefill_name
