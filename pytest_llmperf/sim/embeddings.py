"""``POST /v1/embeddings``: parsing, deterministic vectors, the answer body.

Retrieval deployments are gated on embeddings latency and inputs per second, so
the simulator serves them like a pooling server: vLLM runs each input of a request
as its own prefill-only request in the engine and answers when the last one is
done. The server (server.py) submits one back-end request per input with its
prompt tokens and a single output "token" (the pooled vector, ready at the end of
the step that completes the prefill), so embeddings queue and batch with
everything else and their latency follows the profile's prefill model: on an
engine profile ``β0 + β1·prompt`` per step they share; on ``fixed``, ``ttft_ms``
(plus ``ttft_per_active_ms`` per request in flight).

Vectors are a pure function of the input (a seeded hash of its text or token ids,
scaled to unit length): the same input always gets the same vector, another input
another one, and their length is the profile's ``embedding_dim`` (or the request's
``dimensions``, the first ones re-normalised, as a Matryoshka model truncates).
``usage.prompt_tokens`` counts the inputs with the simulator's tokenizer, as the
chat endpoint counts a prompt.
"""

from __future__ import annotations

import base64
import hashlib
import math
import struct
import time
import uuid
from dataclasses import dataclass
from typing import Any

from ..tokens import split_tokens
from .wire import WireError

__all__ = ["ENCODING_FORMATS", "EmbeddingsRequest", "embedding_vector", "parse_embeddings"]

ENCODING_FORMATS = ("float", "base64")


@dataclass(frozen=True)
class EmbeddingsRequest:
    """What the simulator needs from an embeddings request."""

    model: str
    token_counts: tuple[int, ...]  # per input
    keys: tuple[bytes, ...]  # per input: what its vector is derived from
    encoding_format: str
    dimensions: int
    priority: int = 0

    @property
    def prompt_tokens(self) -> int:
        return sum(self.token_counts)

    def body(self) -> dict[str, Any]:
        """The answer: ``data`` (one ``embedding`` per input, by ``index``), ``usage``."""
        data = []
        for index, key in enumerate(self.keys):
            vector = embedding_vector(key, self.dimensions)
            value: list[float] | str = vector
            if self.encoding_format == "base64":
                value = base64.b64encode(struct.pack(f"<{len(vector)}f", *vector)).decode()
            data.append({"index": index, "object": "embedding", "embedding": value})
        total = self.prompt_tokens
        return {
            "id": "embd-" + uuid.uuid4().hex,
            "object": "list",
            "created": int(time.time()),
            "model": self.model,
            "data": data,
            "usage": {"prompt_tokens": total, "total_tokens": total},
        }


def embedding_vector(key: bytes, dim: int) -> list[float]:
    """A unit vector of ``dim`` numbers drawn from ``key`` (SHAKE-256 as the generator)."""
    raw = hashlib.shake_256(key).digest(2 * dim)
    values = struct.unpack(f"<{dim}h", raw)
    norm = math.sqrt(sum(v * v for v in values)) or 1.0
    return [v / norm for v in values]


def _input_key(value: Any, where: str) -> tuple[int, bytes]:
    if isinstance(value, str):
        return len(split_tokens(value)), b"text:" + value.encode()
    if (
        isinstance(value, list)
        and value
        and all(isinstance(t, int) and not isinstance(t, bool) for t in value)
    ):
        return len(value), b"ids:" + ",".join(map(str, value)).encode()
    raise WireError(
        400,
        f"{where} must be a string, a list of strings, or token ids (a list of integers, "
        "or a list of such lists)",
        "input",
    )


def parse_embeddings(
    body: Any, served_model: str, embedding_dim: int, max_model_len: int
) -> EmbeddingsRequest:
    """A ``POST /v1/embeddings`` body: ``input`` (a string, a list of strings, a list of
    token ids, or a list of such lists), ``model``, ``encoding_format`` (``float`` or
    ``base64``), ``dimensions`` (1 … ``embedding_dim``); WireError as vLLM answers."""
    if not isinstance(body, dict):
        raise WireError(400, "request body must be a JSON object")
    model = body.get("model", served_model)
    if model != served_model:
        raise WireError(404, f"The model `{model}` does not exist.", "model")
    given = body.get("input")
    if given is None:
        raise WireError(400, "input is required", "input")
    if isinstance(given, str) or (
        isinstance(given, list) and given and all(isinstance(t, int) for t in given)
    ):
        items: list[Any] = [given]
    elif isinstance(given, list) and given:
        items = given
    else:
        raise WireError(400, "input must be a string or a non-empty list", "input")
    counts: list[int] = []
    keys: list[bytes] = []
    for k, item in enumerate(items):
        n, key = _input_key(item, f"input[{k}]")
        if n > max_model_len:
            raise WireError(
                400,
                f"This model's maximum context length is {max_model_len} tokens. However, "
                f"you requested {n} tokens in the input for embedding generation. "
                "Please reduce the length of the input.",
                "input",
            )
        counts.append(n)
        keys.append(key)
    fmt = body.get("encoding_format") or "float"
    if fmt not in ENCODING_FORMATS:
        raise WireError(
            400, f"encoding_format must be 'float' or 'base64', got {fmt!r}", "encoding_format"
        )
    dims = body.get("dimensions")
    if dims is None:
        dims = embedding_dim
    elif isinstance(dims, bool) or not isinstance(dims, int) or not 1 <= dims <= embedding_dim:
        raise WireError(
            400,
            f"dimensions must be an integer from 1 to {embedding_dim}, got {dims!r}",
            "dimensions",
        )
    priority = body.get("priority", 0)
    if isinstance(priority, bool) or not isinstance(priority, int):
        raise WireError(400, f"priority must be an integer, got {priority!r}", "priority")
    return EmbeddingsRequest(
        model=str(model),
        token_counts=tuple(counts),
        keys=tuple(keys),
        encoding_format=str(fmt),
        dimensions=dims,
        priority=priority,
    )
