"""Stub HTTP servers shaped like vLLM and llama.cpp's server (aiohttp on 127.0.0.1, in a
thread of the test process), each answering what the real one answers to a fingerprint's
probes (shapes from their sources and docs/servers.md).

A plain module (not conftest) so test modules can import its helpers by a unique name."""

from __future__ import annotations

import time
from typing import Any

from aiohttp import web
from loopback import ServeApp

Serve = ServeApp


class Calls:
    """The calls a stub received (``"GET /version"``), and the ``Server`` header it sends."""

    def __init__(self, server: str) -> None:
        self.seen: list[str] = []
        self.server = server

    @web.middleware
    async def record(self, request: web.Request, handler: Any) -> web.StreamResponse:
        self.seen.append(f"{request.method} {request.path}")
        try:
            response: web.StreamResponse = await handler(request)
        except web.HTTPException as exc:
            exc.headers["Server"] = self.server
            raise
        response.headers["Server"] = self.server
        return response


def cache_config_metrics(**labels: str) -> str:
    """A vLLM ``/metrics`` page with ``vllm:cache_config_info`` (one engine), as vLLM 0.32
    exports it: every CacheConfig field a label (``engine`` and a private one too)."""
    config = {
        "block_size": "16",
        "cache_dtype": "auto",
        "enable_prefix_caching": "True",
        "gpu_memory_utilization": "0.92",
        "num_gpu_blocks": "1000",
        "num_cpu_blocks": "None",
        "prefix_caching_hash_algo": "sha256",
        "sliding_window": "None",
        "_block_size_resolved": "True",
        **labels,
        "engine": "0",
    }
    text = ",".join(f'{k}="{v}"' for k, v in sorted(config.items()))
    return (
        "# HELP vllm:num_requests_running Number of requests in model execution batches.\n"
        "# TYPE vllm:num_requests_running gauge\n"
        'vllm:num_requests_running{engine="0",model_name="tiny-llama"} 0.0\n'
        "# HELP vllm:cache_config_info Information of the LLMEngine CacheConfig\n"
        "# TYPE vllm:cache_config_info gauge\n"
        f"vllm:cache_config_info{{{text}}} 1.0\n"
        "# HELP vllm:prompt_tokens_total Number of prefill tokens processed.\n"
        "# TYPE vllm:prompt_tokens_total counter\n"
        'vllm:prompt_tokens_total{engine="0",model_name="tiny-llama"} 1234.0\n'
    )


def vllm_app(
    calls: Calls,
    *,
    version: str = "0.32.0",
    max_model_len: int = 2048,
    template: str = "<|user|>{}<|end|>",
    metrics: str | None = None,
    **cache_config: str,
) -> web.Application:
    """vLLM's ``/version``, ``/v1/models`` (its ModelCard), ``/metrics`` and a ``/tokenize``
    that renders ``messages`` through ``template`` (one token string per word)."""
    page = cache_config_metrics(**cache_config) if metrics is None else metrics

    async def show_version(_r: web.Request) -> web.Response:
        return web.json_response({"version": version})

    async def models(_r: web.Request) -> web.Response:
        card = {
            "id": "tiny-llama",
            "object": "model",
            "created": int(time.time()),  # a new value every call: noise
            "owned_by": "vllm",
            "root": "/models/tiny-llama",
            "parent": None,
            "max_model_len": max_model_len,
            "permission": [{"id": f"modelperm-{time.monotonic_ns()}"}],
        }
        return web.json_response({"object": "list", "data": [card]})

    async def show_metrics(_r: web.Request) -> web.Response:
        return web.Response(text=page, content_type="text/plain")

    async def tokenize(request: web.Request) -> web.Response:
        body = await request.json()
        text = "".join(template.format(m["content"]) for m in body["messages"])
        pieces = text.split()
        return web.json_response(
            {
                "count": len(pieces),
                "max_model_len": max_model_len,
                "tokens": list(range(len(pieces))),
                "token_strs": pieces if body.get("return_token_strs") else None,
            }
        )

    app = web.Application(middlewares=[calls.record])
    app.add_routes(
        [
            web.get("/version", show_version),
            web.get("/v1/models", models),
            web.get("/metrics", show_metrics),
            web.post("/tokenize", tokenize),
        ]
    )
    return app


LLAMA_TEMPLATE = "{% for m in messages %}<|{{ m.role }}|>{{ m.content }}{% endfor %}"


def llamacpp_app(
    calls: Calls, *, n_ctx: int = 1024, template: str = LLAMA_TEMPLATE, build: str = "b1-0c1e570"
) -> web.Application:
    """llama.cpp's server: ``/v1/models`` with ``meta``, ``/props``, no ``/version``, and
    ``/metrics`` without ``--metrics`` (501)."""

    async def models(_r: web.Request) -> web.Response:
        meta = {
            "vocab_type": 2,
            "n_vocab": 512,
            "n_ctx": n_ctx,
            "n_ctx_train": 2048,
            "n_embd": 256,
            "n_params": 1574144,
            "size": 6296576,
            "ftype": "all F32",
        }
        card = {
            "id": "tiny.gguf",
            "aliases": ["tiny.gguf"],
            "tags": [],
            "object": "model",
            "created": int(time.time()),
            "owned_by": "llamacpp",
            "meta": meta,
        }
        listing = {"models": [{"name": "tiny.gguf", "model": "tiny.gguf"}], "object": "list"}
        return web.json_response({**listing, "data": [card]})

    async def props(_r: web.Request) -> web.Response:
        return web.json_response(
            {
                "default_generation_settings": {
                    "id": 0,
                    "n_ctx": n_ctx,
                    "params": {"temperature": 0.8, "top_k": 40, "n_predict": -1},
                },
                "total_slots": 2,
                "model_alias": "tiny.gguf",
                "model_path": "/tmp/model-gguf/tiny.gguf",
                "chat_template": template,
                "bos_token": "<s>",
                "eos_token": "</s>",
                "build_info": build,
                "endpoint_metrics": False,
                "is_sleeping": False,
            }
        )

    async def no_metrics(_r: web.Request) -> web.Response:
        error = {"code": 501, "message": "This server does not support metrics endpoint."}
        return web.json_response({"error": error}, status=501)

    app = web.Application(middlewares=[calls.record])
    app.add_routes(
        [
            web.get("/v1/models", models),
            web.get("/props", props),
            web.get("/metrics", no_metrics),
        ]
    )
    return app
