"""OpenAI completions (``POST /v1/completions``): the ``completions`` format.

A streamed body of one ``prompt`` (the history's turns, each on a line of its own,
then the prompt; no images: a prompt is text), read chunk by chunk as chat is
(:mod:`~pytest_llmperf.apis.chunks`: a choice's ``text``). An output contract adds
greedy decoding only (collection refuses the rest here).
"""

from __future__ import annotations

from typing import Any

from pytest_llmperf.apis.chunk_shapes import ChunkReader
from pytest_llmperf.apis.chunks import STREAM_END, answer_text, read_output, stream_body
from pytest_llmperf.apis.fields import (
    DEFAULT_FIELDS,
    FieldRules,
    RequestFields,
    apply_extra,
    apply_output_fields,
)
from pytest_llmperf.apis.format import ApiFormat
from pytest_llmperf.apis.names import Api
from pytest_llmperf.apis.samples import ContractLike, SampleLike

__all__ = ["COMPLETIONS", "build_body", "output_fields"]


def build_body(
    model: str, sample: SampleLike, fields: RequestFields = DEFAULT_FIELDS
) -> dict[str, Any]:
    """The streaming completions body for ``sample``: the history's turns and the prompt
    as one ``prompt``, then the contract's, the sample's and the user's fields (as
    :func:`pytest_llmperf.apis.chat.build_body` orders them)."""
    body = stream_body(model, sample, fields)
    history = "".join(f"{turn['content']}\n" for turn in sample.history)
    body["prompt"] = history + sample.prompt
    if sample.contract is not None:
        apply_output_fields(body, sample.contract, output_fields(sample.contract))
    return apply_extra(body, sample, fields, ignore_eos=fields.ignore_eos)


def output_fields(contract: ContractLike) -> dict[str, Any]:
    """What a completions body adds for ``contract``: greedy decoding only
    (``temperature`` 0, ``top_p`` 1, the workload's ``seed``)."""
    if contract.greedy:
        return {"temperature": 0.0, "top_p": 1.0, "seed": contract.greedy_seed}
    return {}


COMPLETIONS = ApiFormat(
    name=Api.COMPLETIONS,
    path="/completions",
    build_body=build_body,
    field_rules=FieldRules(frozenset({"ignore_eos", "stream_options"}), "max_tokens"),
    event_reader=ChunkReader,
    finish_ends=True,
    stream_end=STREAM_END,
    answer_text=answer_text,
    read_output=read_output,
    contract_fields={"greedy": ("temperature", "top_p", "seed")},
)


# -- the simulator's side (pytest_llmperf.sim serves this format with what follows) --
