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
from pytest_llmperf.apis.fields import DEFAULT_FIELDS, EVERY_FIELD, RequestFields, finish_body
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
    return finish_body(body, sample, fields, output_fields)


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
# The chat request as the simulator's request (the prompt: each message content's text
# tokens, each image_url part's image tokens where it stands), and its answer framed in
# chunks (served_chunks.py). chat_prompt_texts is shared with the simulator's /tokenize.

from collections.abc import Collection, Mapping  # noqa: E402

from pytest_llmperf.apis.output_asks import OutputFields, json_format, openai_tools  # noqa: E402
from pytest_llmperf.apis.prompt_images import (  # noqa: E402
    DEFAULT_IMAGE_TOKEN_PX,
    ImageError,
    PromptTokens,
    decode_data_url,
)
from pytest_llmperf.apis.served import AnswerPlan, ServedTokens, serve  # noqa: E402
from pytest_llmperf.apis.served_chunks import ChunkAnswer, openai_stream_fields  # noqa: E402
from pytest_llmperf.apis.server_wire import (  # noqa: E402
    ParsedRequest,
    WireError,
    check_model,
    int_field,
    prompt_request,
)
from pytest_llmperf.tokens import split_tokens  # noqa: E402

__all__ += [
    "CHAT_FIELDS",
    "SERVED_CHAT",
    "ServedChat",
    "chat_prompt",
    "chat_prompt_texts",
    "chat_prompt_tokens",
]


def _content_text(content: Any) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for part in content:
            if isinstance(part, dict) and part.get("type") == "text":
                parts.append(str(part.get("text", "")))
        return "\n".join(parts)
    raise WireError(400, "message content must be a string or a list of content parts", "messages")


def chat_prompt_texts(messages: list[Any]) -> list[str]:
    """The text of every message of a chat prompt, in order (WireError if malformed).

    Shared by the chat endpoint and ``/tokenize``, so that a client counting a
    prompt with the server's tokenizer gets exactly ``usage.prompt_tokens``.
    """
    texts: list[str] = []
    for msg in messages:
        if not isinstance(msg, dict):
            raise WireError(400, "each message must be an object", "messages")
        texts.append(_content_text(msg.get("content")))
    return texts


def chat_prompt_tokens(messages: list[Any]) -> list[str]:
    """The approximate tokens of a chat prompt: every message content's, in order."""
    return [tok for text in chat_prompt_texts(messages) for tok in split_tokens(text)]


def chat_prompt(messages: list[Any], image_px: int = DEFAULT_IMAGE_TOKEN_PX) -> PromptTokens:
    """A chat prompt's tokens with its images: each message content's text tokens and,
    for an ``image_url`` part (``{"url": "data:..."}``), the image's tokens where it
    stands (prompt_images.py). Text-only prompts count exactly as :func:`chat_prompt_tokens`."""
    prompt = PromptTokens(image_px)
    for msg in messages:
        if not isinstance(msg, dict):
            raise WireError(400, "each message must be an object", "messages")
        content = msg.get("content")
        if content is None:
            continue
        if isinstance(content, str):
            prompt.add_text(content)
        elif isinstance(content, list):
            for part in content:
                if not isinstance(part, dict):
                    continue
                kind = part.get("type")
                if kind == "text":
                    prompt.add_text(str(part.get("text", "")))
                elif kind == "image_url":
                    ref = part.get("image_url")
                    url = ref.get("url") if isinstance(ref, dict) else ref
                    if not isinstance(url, str):
                        raise WireError(
                            400, "an image_url part needs image_url.url (a data: URL)", "messages"
                        )
                    try:
                        prompt.add_image(decode_data_url(url))
                    except ImageError as exc:
                        raise WireError(400, f"bad image in messages: {exc}", "messages") from None
        else:
            raise WireError(
                400, "message content must be a string or a list of content parts", "messages"
            )
    return prompt


# The request fields of OpenAI's own API reference, nothing that only vLLM or another
# server adds (what a strict profile accepts: sim/validation.py).
CHAT_FIELDS = frozenset(
    {
        "messages",
        "model",
        "audio",
        "frequency_penalty",
        "function_call",
        "functions",
        "logit_bias",
        "logprobs",
        "max_completion_tokens",
        "max_tokens",
        "metadata",
        "modalities",
        "n",
        "parallel_tool_calls",
        "prediction",
        "presence_penalty",
        "prompt_cache_key",
        "prompt_cache_retention",
        "reasoning_effort",
        "response_format",
        "safety_identifier",
        "seed",
        "service_tier",
        "stop",
        "store",
        "stream",
        "stream_options",
        "temperature",
        "tool_choice",
        "tools",
        "top_logprobs",
        "top_p",
        "user",
        "verbosity",
        "web_search_options",
    }
)


def _chat_tool(tool: dict[str, Any], where: str) -> tuple[Any, Any]:
    fn = tool.get("function")
    if tool.get("type", "function") != "function" or not isinstance(fn, dict):
        raise WireError(400, f"{where}: only function tools are served", "tools")
    return fn.get("name"), fn.get("parameters", {})


def _chat_schema(body: Mapping[str, Any]) -> Any:
    fmt = body.get("response_format")
    param = "response_format"
    if fmt is None:
        return None
    if not isinstance(fmt, dict):
        raise WireError(400, f"{param} must be an object", param)
    inner = fmt.get("json_schema")
    return json_format(fmt, inner.get("schema") if isinstance(inner, dict) else None, param)


class ServedChat(ServedTokens):
    """``POST /v1/chat/completions`` as vLLM serves it."""

    prompt_param = "messages"
    known_fields = CHAT_FIELDS
    refuses_max_tokens = True  # OpenAI's newer models: max_completion_tokens only

    def output_fields(self, body: Mapping[str, Any]) -> OutputFields:
        """``response_format`` (``json_schema``, ``json_object``, ``text``), ``tools``
        (``{"type": "function", "function": {name, parameters}}``), ``tool_choice``."""
        schema = _chat_schema(body)
        return (schema, *openai_tools(body, _chat_tool))

    def parse(
        self,
        body: Any,
        served_model: str,
        image_px: int = DEFAULT_IMAGE_TOKEN_PX,
        adapters: Collection[str] = (),
    ) -> ParsedRequest:
        """Validate a chat body; WireError (400/404) as vLLM would. The prompt's token
        count is the sum of each content's ``count_tokens``, plus each image's tokens."""
        if not isinstance(body, dict):
            raise WireError(400, "request body must be a JSON object")
        model = check_model(body, served_model, adapters)
        messages = body.get("messages")
        if not isinstance(messages, list) or not messages:
            raise WireError(400, "messages must be a non-empty list", "messages")
        prompt = chat_prompt(messages, image_px)
        max_tokens = int_field(body, "max_completion_tokens", 1)
        if max_tokens is None:
            max_tokens = int_field(body, "max_tokens", 1)
        stream, include_usage, priority = openai_stream_fields(body)
        return prompt_request(
            Api.CHAT, model, prompt, body, max_tokens, stream, include_usage, priority
        )

    def answer(self, plan: AnswerPlan) -> ChunkAnswer:
        return ChunkAnswer(Api.CHAT, plan, role_first=True)


SERVED_CHAT = serve(Api.CHAT, ServedChat())
