"""vLLM's shapes the simulator answers with beside its formats: ``GET /v1/models`` and
the per-request ``metrics``.

Each format's request parsing and answer framing is that format's server half
(:mod:`pytest_llmperf.apis`, the end of each format's module; the chunks of chat
and completions in :mod:`~pytest_llmperf.apis.served_chunks`). With
``--enable-per-request-metrics`` vLLM adds the request's own timings
(:func:`per_request_metrics`) as ``metrics`` to the usage chunk and to a
non-streamed body; so does the simulator (profile key ``per_request_metrics``, on
by default). The names that lived here before (``ChunkWriter``, ``ParsedRequest``,
``WireError``, ``parse_request``, ...) stay importable from here.
"""

from __future__ import annotations

import time
from collections.abc import Collection, Sequence
from typing import Any

from ..apis.chat import chat_prompt, chat_prompt_texts, chat_prompt_tokens
from ..apis.prompt_images import DEFAULT_IMAGE_TOKEN_PX
from ..apis.served import ServedTokens
from ..apis.served_chunks import DONE, ChunkWriter
from ..apis.server_table import served_half
from ..apis.server_wire import (
    ParsedRequest,
    WireError,
    check_model,
    error_body,
    int_field,
    usage_body,
)
from .streams import ServedTimes

__all__ = [
    "DONE",
    "ChunkWriter",
    "ParsedRequest",
    "WireError",
    "chat_prompt",
    "chat_prompt_texts",
    "chat_prompt_tokens",
    "check_model",
    "error_body",
    "int_field",
    "models_body",
    "parse_request",
    "per_request_metrics",
    "usage_body",
]


def models_body(model: str, max_model_len: int, adapters: Sequence[str] = ()) -> dict[str, Any]:
    """Body of ``GET /v1/models`` for a server that serves ``model``, and its LoRA
    ``adapters`` after it as vLLM lists them (``parent`` the base model)."""
    created = int(time.time())
    data: list[dict[str, Any]] = [
        {
            "id": name,
            "object": "model",
            "created": created,
            "owned_by": "pytest-llmperf-sim",
            "root": name,
            "parent": None if name == model else model,
            "max_model_len": max_model_len,
            "permission": [],
        }
        for name in (model, *adapters)
    ]
    return {"object": "list", "data": data}


def parse_request(
    api: str,
    body: Any,
    served_model: str,
    image_px: int = DEFAULT_IMAGE_TOKEN_PX,
    adapters: Collection[str] = (),
) -> ParsedRequest:
    """A request body of the token-streaming format ``api``, parsed by that format's
    server half; WireError (400/404) as vLLM would."""
    half = served_half(api)
    if not isinstance(half, ServedTokens):
        raise ValueError(f"the simulator serves no token-streaming API {api!r}")
    return half.parse(body, served_model, image_px, adapters)


def per_request_metrics(times: ServedTimes, completion_tokens: int) -> dict[str, float]:
    """vLLM's per-request ``metrics`` object (``build_per_request_timing_metrics``, vLLM
    0.32) from the back end's own times: ``queue_time_ms`` queued -> first scheduled,
    ``time_to_first_token_ms`` scheduled -> first token (the prefill, not the client's
    TTFT), ``generation_time_ms`` first -> last token, ``mean_itl_ms`` that over the
    tokens less one (2+ tokens), ``tokens_per_second`` all tokens over scheduled -> last
    token. Fields vLLM would leave null are left out, as its stream chunks do."""
    out = {
        "time_to_first_token_ms": (times.first_token - times.scheduled) * 1000.0,
        "generation_time_ms": (times.last_token - times.first_token) * 1000.0,
        "queue_time_ms": (times.scheduled - times.queued) * 1000.0,
    }
    if completion_tokens > 1:
        out["mean_itl_ms"] = out["generation_time_ms"] / (completion_tokens - 1)
    inference_s = times.last_token - times.scheduled
    if inference_s > 0:
        out["tokens_per_second"] = completion_tokens / inference_s
    return out
