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
    contract_fields={},
)


# -- the simulator's side (pytest_llmperf.sim serves this format with what follows) --
