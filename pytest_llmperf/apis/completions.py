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
from pytest_llmperf.apis.fields import DEFAULT_FIELDS, FieldRules, RequestFields, finish_body
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
    return finish_body(body, sample, fields, output_fields)


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
# The completions request as the simulator's request (the prompt: a string, or token
# ids, one prompt per request) and its answer framed in chunks (served_chunks.py); no
# reasoning field: reasoning is text, as vLLM sends it.

from collections.abc import Collection  # noqa: E402

from pytest_llmperf.apis.served import AnswerPlan, ServedTokens, serve  # noqa: E402
from pytest_llmperf.apis.served_chunks import ChunkAnswer, openai_stream_fields  # noqa: E402
from pytest_llmperf.apis.server_wire import (  # noqa: E402
    ParsedRequest,
    WireError,
    check_model,
    int_field,
)
from pytest_llmperf.tokens import split_tokens  # noqa: E402

__all__ += ["COMPLETIONS_FIELDS", "SERVED_COMPLETIONS", "ServedCompletions"]

# OpenAI's API reference of the legacy completions (what a strict profile accepts)
COMPLETIONS_FIELDS = frozenset(
    {
        "model",
        "prompt",
        "best_of",
        "echo",
        "frequency_penalty",
        "logit_bias",
        "logprobs",
        "max_tokens",
        "n",
        "presence_penalty",
        "seed",
        "stop",
        "stream",
        "stream_options",
        "suffix",
        "temperature",
        "top_p",
        "user",
    }
)


class ServedCompletions(ServedTokens):
    """``POST /v1/completions`` as vLLM serves it."""

    prompt_param = "prompt"
    reasons = False  # no reasoning field: the reasoning tokens are text (vLLM)
    known_fields = COMPLETIONS_FIELDS

    def parse(
        self, body: Any, served_model: str, image_px: int, adapters: Collection[str] = ()
    ) -> ParsedRequest:
        """Validate a completions body; WireError (400/404) as vLLM would."""
        if not isinstance(body, dict):
            raise WireError(400, "request body must be a JSON object")
        model = check_model(body, served_model, adapters)
        text = body.get("prompt")
        if isinstance(text, list) and len(text) == 1 and isinstance(text[0], str):
            text = text[0]
        if isinstance(text, str):
            tokens = split_tokens(text)
        elif isinstance(text, list) and text and all(isinstance(t, int) for t in text):
            tokens = [str(t) for t in text]
        else:
            raise WireError(
                400,
                "prompt must be a string or a list of token ids (one prompt per request)",
                "prompt",
            )
        max_tokens = int_field(body, "max_tokens", 1)
        stream, include_usage, priority = openai_stream_fields(body)
        return ParsedRequest(
            api=Api.COMPLETIONS,
            model=model,
            prompt_tokens=tokens,
            max_tokens=max_tokens,
            ignore_eos=bool(body.get("ignore_eos", False)),
            stream=stream,
            include_usage=include_usage,
            priority=priority,
        )

    def answer(self, plan: AnswerPlan) -> ChunkAnswer:
        return ChunkAnswer(Api.COMPLETIONS, plan, role_first=False)


SERVED_COMPLETIONS = serve(Api.COMPLETIONS, ServedCompletions())
