"""The simulator's HTTP front end (aiohttp.web): every API over one back end.

The handlers parse and admit a request (wire.py), decide its output length and
its faults, submit it to the back end (fixed-latency model or the
continuous-batching engine) and stream each token at the instant the back end
planned for it. A client that disconnects cancels its handler (aiohttp's
``handler_cancellation``), and the ``finally`` releases the request in the
engine, as vLLM aborts a request whose client went away.

The jobs around that live in their own modules: request strictness
(validation.py), vLLM's ``/tokenize`` (tokenization.py), the delta shapes of
other servers (deltas.py), the socket writers of the engine's fan-out
(sink.py), and serving the app on a port (serving.py). The Responses and
Messages APIs (apis.py, events.py) share the chat path — admission, faults, the
back end, both token paths — and differ only in their parsing and bytes;
embeddings (embeddings.py) submit each input as a prefill-only request; images
in prompts are charged as prompt tokens (images.py). What a request's tokens
say — filler words, schema-valid JSON, a tool call, a greedy or changed output —
is decided before it is submitted (outputs.py, json_outputs.py) and rendered by
the same chunk sources (deltas.py, tool_calls.py, events.py); a request naming a
LoRA adapter carries it to the back end (adapters.py).
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import random
from typing import Any

from aiohttp import web
from aiohttp.typedefs import Handler

from ..tokens import split_tokens
from .apis import api_error_body, parse_messages, parse_responses
from .clock import TIMING_MODES, sleep_until
from .deltas import ChunkSource, DeltaPlan, ShapedChunks, plain_plan, plan_deltas, split_text
from .embeddings import parse_embeddings
from .events import MessagesEvents, ResponsesEvents
from .faults import FaultPlan, plan_faults
from .fixed import FixedBackend
from .gc_control import GcControl
from .kv_cache import KVCache, prompt_block_hashes
from .outputs import PLAIN, OutputPlan, changed_output, output_salt, plan_output, read_output_ask
from .profiles import Profile
from .prometheus import ServerCounters, render_metrics
from .sink import ShapedSocketSink, SocketSink
from .streams import Backend, Submission, TokenStream, WritableTokenStream, writes_itself
from .text import token_text
from .tokenization import Tokenization
from .tool_calls import ToolCallChunks, chat_tool_call
from .validation import request_policy
from .wire import (
    DONE,
    ChunkWriter,
    ParsedRequest,
    WireError,
    models_body,
    parse_request,
    per_request_metrics,
)

__all__ = ["SIM_VERSION", "SimApp"]

MAX_REQUEST_BYTES = 256 * 1024 * 1024  # what one request body may hold
_MIB = 1024 * 1024

SIM_VERSION = "pytest-llmperf-sim 0.1"
MALFORMED_FRAME = b'data: {"id": "malformed", "choices": [{"index": 0, "delta": {"content": \n\n'
KEEPALIVE_FRAME = b": keep-alive\n\n"


def make_backend(
    profile: Profile,
    seed: int,
    speedup: float,
    timing: str = "block",
    gc_control: GcControl | None = None,
) -> Backend:
    """The back end a profile asks for."""
    if profile.kind == "fixed":
        return FixedBackend(profile, speedup, timing)
    from .realtime import EngineBackend

    return EngineBackend(profile, seed=seed, speedup=speedup, timing=timing, gc_control=gc_control)


def _prefix_cache(backend: Backend) -> KVCache | None:
    """The engine's KV cache, where the back end has one (the fixed one has none)."""
    engine = getattr(backend, "engine", None)
    kv = getattr(engine, "kv", None)
    return kv if isinstance(kv, KVCache) else None


class SimApp:
    """Request handling state shared by all connections of one simulator."""

    def __init__(
        self,
        profile: Profile,
        *,
        seed: int = 0,
        speedup: float = 1.0,
        record_emit_lag: bool = False,
        timing: str = "block",
        quiet_gc: bool = False,
    ) -> None:
        if speedup <= 0:
            raise ValueError(f"speedup must be positive, got {speedup!r}")
        if timing not in TIMING_MODES:
            raise ValueError(f"timing must be one of {TIMING_MODES}, got {timing!r}")
        self.profile = profile
        self.seed = seed
        self.speedup = speedup
        self.timing = timing
        # quiet_gc: this process is the simulator's own; see gc_control.py
        self.gc = GcControl(managed=profile.kind == "engine") if quiet_gc else None
        self.backend = make_backend(profile, seed, speedup, timing, self.gc)
        self.poll = self.backend.poll
        self.counters = ServerCounters()
        self.policy = request_policy(profile)  # None: every field accepted, as vLLM does
        self.tokenization = Tokenization(
            profile.model, profile.max_model_len, profile.lora_adapters
        )
        self.next_index = 0
        self.leaked: list[bytes] = []  # leak_mb_per_request: kept for the process's life
        self.emit_lags: list[float] | None = [] if record_emit_lag else None
        self.emit_planned: list[float] = []  # planned loop time of each lag sample
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
                web.post("/v1/chat/completions", self.chat),
                web.post("/v1/completions", self.completions),
                web.post("/v1/responses", self.responses),
                web.post("/v1/messages", self.messages),
                web.post("/v1/embeddings", self.embeddings),
                web.post("/tokenize", self.tokenization.tokenize),
                web.post("/detokenize", self.tokenization.detokenize),
            ]
        )
        # the LoRA adapters' ids in the back end (adapters.py): 1, 2, … in profile order
        self._lora_ids = {name: k + 1 for k, name in enumerate(profile.lora_adapters)}
        self._kv = _prefix_cache(self.backend)
        if self._kv is not None:  # vLLM's (development mode) reset, where there is a cache
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
        await self.backend.start()
        if self.gc is not None:
            self.gc.start()

    async def _on_cleanup(self, _app: web.Application) -> None:
        if self.gc is not None:
            self.gc.stop()
        await self.backend.stop()

    def _leak(self) -> None:
        """The ``leak_mb_per_request`` fault: keep that many MB, every page written (a
        repeated byte is a memset, so the resident set really grows; a zeroed buffer
        would stay on the kernel's shared zero page), for the rest of the process's life."""
        mb = self.profile.leak_mb_per_request
        if mb > 0:
            self.leaked.append(b"\x01" * int(mb * _MIB))

    # -- simple endpoints -------------------------------------------------
    async def models(self, _request: web.Request) -> web.Response:
        p = self.profile
        return web.json_response(models_body(p.model, p.max_model_len, p.lora_adapters))

    async def health(self, _request: web.Request) -> web.Response:
        return web.Response(status=200)

    async def version(self, _request: web.Request) -> web.Response:
        return web.json_response({"version": SIM_VERSION, "profile": self.profile.name})

    async def metrics(self, _request: web.Request) -> web.Response:
        text = render_metrics(self.profile.model, self.backend.stats(), self.counters)
        return web.Response(text=text, content_type="text/plain", charset="utf-8")

    async def reset_prefix_cache(self, _request: web.Request) -> web.Response:
        """vLLM's ``POST /reset_prefix_cache``: ``{"success": bool}``, false while blocks
        are in use (see :meth:`KVCache.reset_prefix_cache`)."""
        assert self._kv is not None  # routed only where there is a cache
        return web.json_response({"success": self._kv.reset_prefix_cache()})

    async def chat(self, request: web.Request) -> web.StreamResponse:
        return await self._handle(request, "chat")

    async def completions(self, request: web.Request) -> web.StreamResponse:
        return await self._handle(request, "completions")

    async def responses(self, request: web.Request) -> web.StreamResponse:
        return await self._handle(request, "responses")

    async def messages(self, request: web.Request) -> web.StreamResponse:
        return await self._handle(request, "messages")

    # -- completions ------------------------------------------------------
    def _error(
        self,
        status: int,
        message: str,
        param: str | None = None,
        retry_after: int | None = None,
        api: str = "chat",
    ) -> web.Response:
        """An error answer in ``api``'s shape (Anthropic's for ``messages``)."""
        self.counters.errors += 1
        headers = {"Retry-After": str(retry_after)} if retry_after is not None else None
        body = api_error_body(api, status, message, param)
        return web.json_response(body, status=status, headers=headers)

    def _parse(self, api: str, body: object) -> ParsedRequest:
        p = self.profile
        if api == "responses":
            return parse_responses(body, p.model, p.image_token_px, p.lora_adapters)
        if api == "messages":
            return parse_messages(body, p.model, p.image_token_px, p.lora_adapters)
        return parse_request(api, body, p.model, p.image_token_px, p.lora_adapters)

    def _output(
        self, parsed: ParsedRequest, body: Any, index: int, n_out: int, finish: str
    ) -> OutputPlan:
        """What the request's tokens say (outputs.py): the plain filler words of old, or
        JSON, a tool call, a greedy output, a changed one; WireError(400) if its output
        fields are malformed. A deterministic (greedy or seeded) output's early stop is
        drawn from its salt, so it too is the same for the same prompt."""
        p = self.profile
        ask = read_output_ask(parsed.api, body)
        if ask is PLAIN and not p.output_change_rate:
            if p.early_stop_prob:
                n_out, finish = self._early_stop(parsed, f"{self.seed}:{index}", n_out, finish)
            return OutputPlan(n_out, finish, index * 13, None)
        salt = output_salt(ask, parsed.model, parsed.prompt_tokens, index)
        if ask.schema is None and not ask.tools and p.early_stop_prob:
            key = f"{self.seed}:{index}" if ask.plain else f"{self.seed}:g{salt}"
            n_out, finish = self._early_stop(parsed, key, n_out, finish)
        return plan_output(
            ask,
            api=parsed.api,
            n_cap=n_out,
            finish_cap=finish,
            salt=salt,
            reasoning=p.reasoning_tokens if parsed.api != "completions" else 0,
            changed=changed_output(p.output_change_rate, self.seed, salt),
            sim_seed=self.seed,
            constrained=p.constrain_outputs,
        )

    def _early_stop(
        self, parsed: ParsedRequest, key: str, n_out: int, finish: str
    ) -> tuple[int, str]:
        """``early_stop_prob``: a request without ``ignore_eos`` stops at a seeded shorter
        length (drawn from ``key``)."""
        if parsed.ignore_eos or n_out <= 1:
            return n_out, finish
        rng = random.Random(f"eos:{key}")
        if rng.random() < self.profile.early_stop_prob:
            return rng.randint(1, n_out - 1), "stop"
        return n_out, finish

    def _admit(self, parsed: ParsedRequest) -> tuple[int, str]:
        """Output length and finish reason, or WireError(400) if it cannot fit."""
        p = self.profile
        n_prompt = parsed.num_prompt_tokens
        prompt_param = _PROMPT_PARAMS[parsed.api]
        max_param = "max_output_tokens" if parsed.api == "responses" else "max_tokens"
        if parsed.max_tokens is None:
            n_out, finish = min(p.default_max_tokens, max(1, p.max_model_len - n_prompt)), "stop"
        else:
            n_out, finish = parsed.max_tokens, "length"
        total = max(1, n_prompt) + n_out
        if total > p.max_model_len:
            raise WireError(
                400,
                f"This model's maximum context length is {p.max_model_len} tokens. "
                f"However, you requested "
                f"{total} tokens ({n_prompt} in the {prompt_param}, {n_out} in the completion). "
                "Please reduce the length of the messages or completion.",
                prompt_param if parsed.max_tokens is None else max_param,
            )
        if p.kind == "engine" and -(-total // p.block_size) > p.num_blocks:
            raise WireError(
                400,
                f"The request needs {total} tokens of KV cache but the whole cache holds "
                f"{p.kv_capacity_tokens} tokens.",
                prompt_param,
            )
        return n_out, finish

    async def _accepted_body(self, request: web.Request, api: str) -> Any:
        """The request's JSON body, or the answer that refuses it (not JSON, or a field the
        strict profile's policy refuses) as a :class:`web.Response`."""
        try:
            body = await request.json()
        except (json.JSONDecodeError, UnicodeDecodeError):
            return self._error(400, "request body is not valid JSON", api=api)
        if self.policy is not None:
            rejection = self.policy.check(api, body)
            if rejection is not None:
                self.counters.errors += 1
                return web.json_response(rejection.body, status=rejection.status)
        return body

    async def _handle(self, request: web.Request, api: str) -> web.StreamResponse:
        body = await self._accepted_body(request, api)
        if isinstance(body, web.StreamResponse):
            return body
        # Between its pieces of work a handler lets the engine emit whatever fell due:
        # a burst of arrivals must not hold back the tokens of running requests.
        poll = self.poll
        poll()
        index = self.next_index
        self.next_index += 1
        self._leak()
        if self.gc is not None:
            self.gc.request_served(index)
        try:
            parsed = self._parse(api, body)
            n_out, finish = self._admit(parsed)
            out = self._output(parsed, body, index, n_out, finish)
        except WireError as exc:
            return self._error(exc.status, exc.message, exc.param, api=api)
        n_out = out.n
        poll()
        faults = plan_faults(self.profile, self.seed, index, n_out, self.speedup)
        if faults.error_status is not None:
            status = faults.error_status
            if parsed.stream and api in _EVENT_APIS and self.profile.stream_error_events:
                return await self._stream_error(request, parsed, status)
            return self._error(
                status,
                _FAULT_MESSAGES[status],
                None,
                faults.retry_after_s if status in (429, 503) else None,
                api=api,
            )
        hashes: tuple[int, ...] = ()
        if self.profile.kind == "engine" and self.profile.enable_prefix_caching:
            # the whole sequence, so a later turn that quotes this reply hits the cache too
            if out.pieces is None:
                output = [token_text(j, out.salt)[1:] for j in range(n_out)]
            else:
                output = split_tokens(split_text(None, 0, n_out, out.pieces)[1])
            adapter = parsed.model if parsed.model != self.profile.model else None
            hashes = prompt_block_hashes(
                parsed.prompt_tokens + output, self.profile.block_size, adapter
            )
            poll()
        try:
            stream = self.backend.submit(
                Submission(
                    prompt_tokens=max(1, parsed.num_prompt_tokens),
                    output_tokens=n_out,
                    block_hashes=hashes,
                    priority=parsed.priority,
                    image_tokens=parsed.image_tokens,
                    lora=self._lora_ids.get(parsed.model, 0),
                )
            )
        except RuntimeError as exc:  # the engine died (a simulator bug, already on stderr)
            return self._error(500, str(exc), api=api)
        self.counters.prompt_tokens += parsed.num_prompt_tokens
        deltas = plan_deltas(self.profile, self.seed, index, n_out, parsed.api)
        if (
            deltas is not None
            and out.text is not None
            and n_out
            and deltas.empty[-1]
            and not deltas.blank
        ):
            # JSON and tool arguments are ASCII: no partial character is held back at the
            # end (outputs.py), so their last token always sends its text
            deltas = dataclasses.replace(deltas, empty=deltas.empty[:-1] + b"\x00")
        try:
            if parsed.stream:
                return await self._stream(request, parsed, stream, out, faults, deltas)
            try:
                return await self._full(request, parsed, stream, out, faults, deltas)
            except RuntimeError as exc:  # the engine died while we waited
                return self._error(500, str(exc), api=api)
        finally:
            stream.close()

    async def _stall(
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

    def _cut(self, request: web.Request) -> None:
        """Drop the connection mid-response (no [DONE], no chunked terminator)."""
        if request.transport is not None:
            request.transport.abort()

    async def _stream(
        self,
        request: web.Request,
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
        w = ChunkWriter(parsed.api, parsed.model, self.profile.reasoning_field)
        events = self._events(parsed, deltas, out)
        if isinstance(events, ResponsesEvents):
            await resp.write(events.opening())
        elif isinstance(events, MessagesEvents):
            await resp.write(events.opening(parsed.num_prompt_tokens))
        elif parsed.api == "chat":
            await resp.write(w.role_chunk())
        lags = self.emit_lags if not faults.delays_tokens else None
        counters = self.counters
        shaped: ChunkSource | None = events
        if events is None and out.tool is not None:
            shaped = ToolCallChunks(w, deltas, out, finish)
        elif events is None and (deltas is not None or out.pieces is not None):
            plan = deltas if deltas is not None else plain_plan(n_out)
            shaped = ShapedChunks(w, plan, salt, finish, out.pieces)
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
            await self._write_directly(
                request, w, stream, n_out, finish, salt, arrival, lags, shaped
            )
        elif not await self._write_tokens(
            request, resp, w, stream, n_out, finish, faults, salt, arrival, lags, shaped
        ):
            return resp  # cut mid-stream: no [DONE], no chunked terminator
        counters.finished(out.engine_finish, n_out, stream.served_times(), loop.time() - arrival)
        if isinstance(events, ResponsesEvents):
            await resp.write(
                events.closing(
                    parsed.num_prompt_tokens,
                    stream.cached_tokens,
                    _reasoning_tokens(deltas),
                    self._request_metrics(stream, n_out),
                )
            )
            await resp.write_eof()  # no [DONE] on this API
            return resp
        if isinstance(events, MessagesEvents):
            await resp.write(events.closing(parsed.num_prompt_tokens, stream.cached_tokens))
            await resp.write_eof()
            return resp
        if parsed.include_usage:
            await resp.write(
                w.usage_chunk(
                    parsed.num_prompt_tokens,
                    n_out,
                    stream.cached_tokens,
                    _reasoning_tokens(deltas),
                    self._request_metrics(stream, n_out),
                )
            )
        await resp.write(DONE)
        await resp.write_eof()
        return resp

    async def _write_tokens(
        self,
        request: web.Request,
        resp: web.StreamResponse,
        w: ChunkWriter,
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
        False if the stream was cut (nothing more may be written)."""
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
                await self._stall(resp, faults.stall_first_s, faults)
            if faults.stall_mid_at is not None and i <= faults.stall_mid_at < i + size:
                await self._stall(resp, faults.stall_mid_s, faults)
            if faults.cut_at is not None and i <= faults.cut_at < i + size:
                self._cut(request)
                return False
            if faults.per_chunk:
                if faults.keepalive():
                    await resp.write(KEEPALIVE_FRAME)
                if faults.malformed():
                    await resp.write(MALFORMED_FRAME)
            if shaped is not None:
                chunk = shaped.chunk(i, size)
            elif size == 1:
                chunk = w.token_chunk(token_text(i, salt), finish if i + 1 == n_out else None)
            else:
                text = "".join(token_text(j, salt) for j in range(i, i + size))
                chunk = w.token_chunk(text, finish if i + size == n_out else None)
            i += size
            now = loop.time()
            if lags is not None:
                lags.append(now - planned)
                self.emit_planned.append(planned)
            if chunk:  # empty: a dropped empty delta (events.py) sends nothing
                await resp.write(chunk)
            if last:
                counters.itl.observe(now - last)
            else:
                counters.ttft.observe(now - arrival)
            last = now
        return True

    async def _write_directly(
        self,
        request: web.Request,
        w: ChunkWriter,
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

    async def _full(
        self,
        request: web.Request,
        parsed: ParsedRequest,
        stream: TokenStream,
        out: OutputPlan,
        faults: FaultPlan,
        deltas: DeltaPlan | None,
    ) -> web.StreamResponse:
        loop = asyncio.get_running_loop()
        arrival = loop.time()
        n_out, finish = out.n, out.finish
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
            await self._stall(None, stall, faults)
        if faults.cut_at is not None:
            self._cut(request)
            return web.Response(status=200)
        self.counters.ttft.observe(first - arrival)
        if n_out > 1:
            # one pooled observation per gap would need every time; use the mean gap per token
            gap = (last - first) / (n_out - 1)
            for _ in range(n_out - 1):
                self.counters.itl.observe(gap)
        self.counters.finished(out.engine_finish, n_out, stream.served_times(), last - arrival)
        reasoning, text = split_text(deltas, out.salt, n_out, out.pieces)
        metrics = self._request_metrics(stream, n_out)
        events = self._events(parsed, deltas, out)
        if isinstance(events, ResponsesEvents):
            return web.json_response(
                events.full_body(
                    reasoning,
                    text,
                    parsed.num_prompt_tokens,
                    stream.cached_tokens,
                    _reasoning_tokens(deltas),
                    metrics,
                )
            )
        if isinstance(events, MessagesEvents):
            return web.json_response(
                events.full_body(reasoning, text, parsed.num_prompt_tokens, stream.cached_tokens)
            )
        w = ChunkWriter(parsed.api, parsed.model, self.profile.reasoning_field)
        body = w.full_body(
            text,
            finish,
            parsed.num_prompt_tokens,
            n_out,
            stream.cached_tokens,
            reasoning,
            _reasoning_tokens(deltas),
            metrics,
        )
        if out.tool is not None:  # the call in place of the answer text (vLLM's message)
            message = body["choices"][0]["message"]
            message["content"] = None
            message["tool_calls"] = [chat_tool_call(out.tool.call_id, out.tool.name, text)]
        return web.json_response(body)

    def _events(
        self, parsed: ParsedRequest, deltas: DeltaPlan | None, out: OutputPlan
    ) -> ResponsesEvents | MessagesEvents | None:
        """The event renderer of a Responses or Messages answer (None for the others)."""
        model = parsed.model
        if parsed.api == "responses":
            return ResponsesEvents(
                model,
                deltas,
                out.salt,
                out.n,
                out.finish,
                max_output_tokens=parsed.max_tokens,
                incomplete_event=self.profile.responses_incomplete_event,
                pieces=out.pieces,
                tool=out.tool,
            )
        if parsed.api == "messages":
            return MessagesEvents(
                model, deltas, out.salt, out.n, out.finish, pieces=out.pieces, tool=out.tool
            )
        return None

    async def _stream_error(
        self, request: web.Request, parsed: ParsedRequest, status: int
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
        if parsed.api == "responses":
            ev = ResponsesEvents(self.profile.model, None, 0, 0, "stop", max_output_tokens=None)
            await resp.write(ev.opening() + ev.failed(message))
        else:
            ev_m = MessagesEvents(self.profile.model, None, 0, 0, "stop")
            await resp.write(
                ev_m.opening(parsed.num_prompt_tokens) + MessagesEvents.error(status, message)
            )
        await resp.write_eof()
        return resp

    # -- embeddings -------------------------------------------------------
    async def embeddings(self, request: web.Request) -> web.StreamResponse:
        """``POST /v1/embeddings``: each input a prefill-only request of the back end
        (embeddings.py); the answer when the last of them is done."""
        api = "embeddings"
        p = self.profile
        body = await self._accepted_body(request, api)
        if isinstance(body, web.StreamResponse):
            return body
        self.poll()
        index = self.next_index
        self.next_index += 1
        self._leak()
        if self.gc is not None:
            self.gc.request_served(index)
        try:
            parsed = parse_embeddings(body, p.model, p.embedding_dim, p.max_model_len)
        except WireError as exc:
            return self._error(exc.status, exc.message, exc.param, api=api)
        if p.kind == "engine":
            longest = max(parsed.token_counts)
            if -(-(max(1, longest) + 1) // p.block_size) > p.num_blocks:
                return self._error(
                    400,
                    f"An input needs {longest} tokens of KV cache but the whole cache holds "
                    f"{p.kv_capacity_tokens} tokens.",
                    "input",
                    api=api,
                )
        faults = plan_faults(p, self.seed, index, 1, self.speedup)
        if faults.error_status is not None:
            status = faults.error_status
            return self._error(
                status,
                _FAULT_MESSAGES[status],
                None,
                faults.retry_after_s if status in (429, 503) else None,
                api=api,
            )
        loop = asyncio.get_running_loop()
        arrival = loop.time()
        streams: list[TokenStream] = []
        try:
            for n in parsed.token_counts:
                streams.append(
                    self.backend.submit(
                        Submission(
                            prompt_tokens=max(1, n), output_tokens=1, priority=parsed.priority
                        )
                    )
                )
            self.counters.prompt_tokens += parsed.prompt_tokens
            for stream in streams:
                await stream.next_token()
        except RuntimeError as exc:  # the engine died (a simulator bug, already on stderr)
            return self._error(500, str(exc), api=api)
        finally:
            for stream in streams:
                stream.close()
        if faults.stall_first_s:
            await self._stall(None, faults.stall_first_s, faults)
        answer = parsed.body()
        self.counters.finished("stop", 0, None, loop.time() - arrival)
        return web.json_response(answer)

    def _request_metrics(self, stream: TokenStream, n_out: int) -> dict[str, float] | None:
        """vLLM's per-request ``metrics`` of a finished request (profile key
        ``per_request_metrics``, as vLLM's ``--enable-per-request-metrics``), from the
        back end's own clock; None when off."""
        if not self.profile.per_request_metrics:
            return None
        times = stream.served_times()
        return None if times is None else per_request_metrics(times, n_out)


_PROMPT_PARAMS = {
    "chat": "messages",
    "completions": "prompt",
    "responses": "input",
    "messages": "messages",
}
_EVENT_APIS = ("responses", "messages")
_FAULT_MESSAGES = {
    429: "Too many requests (simulated).",
    500: "Internal server error (simulated).",
    503: "Service unavailable (simulated).",
}


def _reasoning_tokens(deltas: DeltaPlan | None) -> int | None:
    """``completion_tokens_details.reasoning_tokens`` to report, if the answer reasons."""
    return deltas.n_reasoning if deltas is not None and deltas.n_reasoning else None
