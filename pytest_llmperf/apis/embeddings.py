"""Embeddings (``POST /v1/embeddings``): the ``embeddings`` format, one JSON answer per
request, checked whole.

An embeddings request streams nothing: its one measurement is when the whole
answer has been read (``e2e``), and its answer is only worth that time if it is
what was asked for. So the answer is checked before the request counts as
completed: ``data`` holds one item per input (placed by ``index`` where given,
each index once), every ``embedding`` a non-empty list of finite numbers — or
a base64 string of little-endian float32s, as ``encoding_format: "base64"``
answers — and all of one length. Anything else is a failed request whose
message says what was wrong ("embeddings answer has 7 vectors for 8 inputs").

What real servers answer, read in their sources: vLLM
(``entrypoints/pooling/embed/protocol.py``, ``serving.py``): ``data[i]``
``{"index", "object", "embedding": list[float] | str}``, ``usage`` with
``prompt_tokens``; ``encoding_format`` ``float`` or ``base64`` (JSON), or
``bytes``. llama.cpp's server (``tools/server/server-common.cpp``
``format_embeddings_response_oaicompat``): ``index`` numbered in order, usage
``prompt_tokens`` (the tokens evaluated); it refuses an ``encoding_format``
other than ``float``/``base64`` with HTTP 400.
"""

from __future__ import annotations

import base64
import binascii
import json
import math
import sys
from array import array
from collections.abc import Callable
from functools import partial
from typing import Any

from pytest_llmperf.apis.events import error_message
from pytest_llmperf.apis.fields import DEFAULT_FIELDS, FieldRules, RequestFields, apply_extra
from pytest_llmperf.apis.format import AnswerFault, ApiFormat, WholeAnswer
from pytest_llmperf.apis.names import Api
from pytest_llmperf.apis.samples import SampleLike

__all__ = [
    "EMBEDDINGS",
    "EmbeddingsAnswer",
    "EmbeddingsFault",
    "build_payload",
    "check_answer",
    "inputs_of",
]

# An answer that checked out, and one that did not (the format's whole-answer types).
EmbeddingsAnswer = WholeAnswer
EmbeddingsFault = AnswerFault

_NUMBERS = frozenset({float, int})


def inputs_of(sample: SampleLike) -> list[str]:
    """The texts one request embeds: ``sample.inputs``, or its prompt alone."""
    return list(sample.inputs) if sample.inputs else [sample.prompt]


def build_payload(
    model: str, sample: SampleLike, fields: RequestFields = DEFAULT_FIELDS
) -> dict[str, Any]:
    """The embeddings body of ``sample``: ``model``, ``input`` (a list of strings) and
    ``encoding_format: "float"``, then the sample's and the user's extra fields. None of
    the optional generation fields: there is nothing to generate (a sample's
    ``ignore_eos`` is dropped; the user's own fields are sent as given)."""
    body: dict[str, Any] = {
        "model": model,
        "input": inputs_of(sample),
        "encoding_format": "float",
    }
    return apply_extra(body, sample, fields, ignore_eos=False)


def check_answer(raw: bytes | str, inputs: int) -> WholeAnswer | AnswerFault:
    """``raw`` (a whole 2xx answer's body) checked against ``inputs`` texts sent."""
    try:
        obj = json.loads(raw)
    except ValueError:
        shown = raw[:80] if isinstance(raw, str) else raw[:80].decode("utf-8", "replace")
        return EmbeddingsFault(f"embeddings answer is not JSON: {shown!r}")
    if not isinstance(obj, dict):
        return EmbeddingsFault(f"embeddings answer is not a JSON object: {type(obj).__name__}")
    if obj.get("error"):
        return EmbeddingsFault(error_message(obj), server_error=True)
    data = obj.get("data")
    if not isinstance(data, list):
        return EmbeddingsFault("embeddings answer has no 'data' list")
    if len(data) != inputs:
        return EmbeddingsFault(
            f"embeddings answer has {len(data)} vector{'s' * (len(data) != 1)} "
            f"for {inputs} input{'s' * (inputs != 1)}"
        )
    seen: set[int] = set()
    dimensions = 0
    for position, item in enumerate(data):
        if not isinstance(item, dict):
            return EmbeddingsFault(f"embeddings answer item {position} is not an object")
        index = item.get("index", position)
        if index.__class__ is not int or not 0 <= index < inputs:
            return EmbeddingsFault(
                f"embeddings answer item {position} has index {index!r} for {inputs} inputs"
            )
        if index in seen:
            return EmbeddingsFault(f"embeddings answer repeats index {index}")
        seen.add(index)
        size = _vector_size(item.get("embedding"))
        if isinstance(size, str):
            return EmbeddingsFault(f"embeddings answer vector {index} {size}")
        if dimensions and size != dimensions:
            return EmbeddingsFault(
                f"embeddings answer has vectors of unequal dimensions "
                f"({dimensions} and {size}, vector {index})"
            )
        dimensions = size
    usage = obj.get("usage")
    prompt = usage.get("prompt_tokens") if isinstance(usage, dict) else None
    return EmbeddingsAnswer(inputs, dimensions, prompt if prompt.__class__ is int else None)


def _vector_size(embedding: Any) -> int | str:
    """The length of one ``embedding``, or what is wrong with it (a phrase)."""
    if isinstance(embedding, list):
        if not embedding:
            return "is empty"
        if not set(map(type, embedding)) <= _NUMBERS:  # bool, str, None, a nested list: no
            return "holds values that are not numbers"
        if not math.isfinite(sum(embedding)):  # NaN or Infinity (json.loads takes them)
            return "holds values that are not finite"
        return len(embedding)
    if isinstance(embedding, str):  # encoding_format "base64": little-endian float32s
        try:
            packed = base64.b64decode(embedding, validate=True)
        except (binascii.Error, ValueError):
            return "is a string that is not base64"
        if not packed or len(packed) % 4:
            return f"is {len(packed)} base64 bytes, not a whole number of float32s"
        floats = array("f", packed)
        if sys.byteorder == "big":
            floats.byteswap()
        if not math.isfinite(sum(floats)):
            return "holds values that are not finite"
        return len(floats)
    return f"is {type(embedding).__name__}, not a list of numbers"


def answer_check(sample: SampleLike) -> Callable[[bytes], WholeAnswer | AnswerFault]:
    """The check of the answer to ``sample``'s request: one vector per text it sent."""
    return partial(check_answer, inputs=len(inputs_of(sample)))


EMBEDDINGS = ApiFormat(
    name=Api.EMBEDDINGS,
    path="/embeddings",
    build_body=build_payload,
    streams_tokens=False,
    field_rules=FieldRules(frozenset(), None),
    stream_end="its JSON answer",
    answer_check=answer_check,
)


# -- the simulator's side (pytest_llmperf.sim serves this format with what follows) --
# The embeddings request as the simulator's request: each input, with its token count
# (the simulator's tokenizer, as the chat endpoint counts a prompt) and the key its
# vector is derived from; the simulator submits each as its own prefill-only request,
# as vLLM's pooling runner does, and answers when the last is done. Vectors are a pure
# function of the input (a seeded hash of its text or token ids, scaled to unit
# length): the same input always gets the same vector, of the profile's
# ``embedding_dim`` or the request's ``dimensions`` (the first ones re-normalised, as a
# Matryoshka model truncates).

import hashlib  # noqa: E402
import struct  # noqa: E402
import time  # noqa: E402
import uuid  # noqa: E402
from dataclasses import dataclass  # noqa: E402

from pytest_llmperf.apis.served import ServedPooling, serve  # noqa: E402
from pytest_llmperf.apis.server_wire import WireError  # noqa: E402
from pytest_llmperf.tokens import split_tokens  # noqa: E402

__all__ += [
    "EMBEDDINGS_FIELDS",
    "ENCODING_FORMATS",
    "SERVED_EMBEDDINGS",
    "EmbeddingsRequest",
    "ServedEmbeddings",
    "embedding_vector",
    "parse_embeddings",
]

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


# OpenAI's embeddings reference (what a strict profile accepts)
EMBEDDINGS_FIELDS = frozenset({"model", "input", "dimensions", "encoding_format", "user"})


class ServedEmbeddings(ServedPooling):
    """``POST /v1/embeddings`` as a pooling server answers it."""

    known_fields = EMBEDDINGS_FIELDS

    def parse(
        self, body: Any, served_model: str, embedding_dim: int, max_model_len: int
    ) -> EmbeddingsRequest:
        return parse_embeddings(body, served_model, embedding_dim, max_model_len)


SERVED_EMBEDDINGS = serve(Api.EMBEDDINGS, ServedEmbeddings())
