"""OpenAI chat completions (``POST /v1/chat/completions``): the ``chat`` format.

A streamed body of ``messages`` (a sample's images as content parts of its last user
turn), read chunk by chunk by :class:`~pytest_llmperf.apis.chunk_shapes.ChunkReader`
(the OpenAI chunk's rules: :mod:`~pytest_llmperf.apis.chunks`); a ``finish_reason``
or ``[DONE]`` ends the stream. An output contract adds ``response_format``
(``json_schema``), ``tools`` and greedy decoding.
"""

from __future__ import annotations

from typing import Any

from pytest_llmperf.apis.chunk_shapes import ChunkReader
from pytest_llmperf.apis.chunks import STREAM_END, answer_text, read_output, stream_body
from pytest_llmperf.apis.fields import (
    DEFAULT_FIELDS,
    EVERY_FIELD,
    RequestFields,
    apply_extra,
    apply_output_fields,
)
from pytest_llmperf.apis.format import ApiFormat
from pytest_llmperf.apis.names import Api
from pytest_llmperf.apis.samples import ContractLike, SampleLike

__all__ = ["CHAT", "build_body", "chat_messages", "output_fields"]


def build_body(
    model: str, sample: SampleLike, fields: RequestFields = DEFAULT_FIELDS
) -> dict[str, Any]:
    """The streaming chat body for ``sample``, with only the fields ``fields`` allows.

    A sample's own ``extra_body`` (e.g. ``ignore_eos: False`` from a workload
    that lets the model stop early) overrides the negotiated defaults, and
    the user's fields override both; a sample may not re-add ``ignore_eos``
    to a server that refused it. A sample's images go with its last user
    turn (:func:`chat_messages`). A sample's output contract adds its fields
    (:func:`output_fields`).
    """
    body = stream_body(model, sample, fields)
    body["messages"] = chat_messages(sample) if sample.images else sample.messages()
    if sample.contract is not None:
        apply_output_fields(body, sample.contract, output_fields(sample.contract))
    return apply_extra(body, sample, fields, ignore_eos=fields.ignore_eos)


def output_fields(contract: ContractLike) -> dict[str, Any]:
    """What a chat body adds for ``contract``: ``response_format`` (``json_schema``,
    strict), ``tools`` as given and the normalised ``tool_choice``; greedy decoding
    (``temperature`` 0, ``top_p`` 1, the workload's ``seed``)."""
    out: dict[str, Any] = {}
    if contract.schema is not None:
        out["response_format"] = {
            "type": "json_schema",
            "json_schema": {
                "name": contract.schema_name,
                "schema": contract.schema,
                "strict": True,
            },
        }
    if contract.tools:
        out["tools"] = list(contract.tools)
        if contract.tool_choice is not None:
            out["tool_choice"] = contract.tool_choice
    if contract.greedy:
        out.update(temperature=0.0, top_p=1.0, seed=contract.greedy_seed)
    return out


def chat_messages(sample: SampleLike) -> list[dict[str, Any]]:
    """``sample``'s chat messages with its images after the text of the last user turn,
    as OpenAI content parts (``image_url`` with the image's ``data:`` URL)."""
    parts: list[dict[str, Any]] = [{"type": "text", "text": sample.prompt}]
    parts += [{"type": "image_url", "image_url": {"url": i.data_url}} for i in sample.images]
    return [*map(dict, sample.history), {"role": "user", "content": parts}]


CHAT = ApiFormat(
    name=Api.CHAT,
    path="/chat/completions",
    build_body=build_body,
    takes_images=True,
    field_rules=EVERY_FIELD,
    event_reader=ChunkReader,  # one per stream: it learns the stream's common chunk
    finish_ends=True,
    stream_end=STREAM_END,
    answer_text=answer_text,
    read_output=read_output,
    contract_fields={
        "structured": ("response_format",),
        "tools": ("tools", "tool_choice"),
        "greedy": ("temperature", "top_p", "seed"),
    },
)


# -- the simulator's side (pytest_llmperf.sim serves this format with what follows) --
