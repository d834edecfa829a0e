"""The OpenAI wire format: request bodies out, stream chunks in.

Kept apart from the transport so the tolerance rules for what real servers
send (vLLM, SGLang, TGI, llama.cpp, gateways) live in one readable place:
a role-only first chunk carries no text; ``finish_reason`` may come with the
last token or on an empty chunk of its own; ``usage`` may ride on the last
chunk or on a chunk with ``choices: []``; one chunk may hold several tokens;
reasoning models stream ``reasoning_content`` before ``content``; an error may
arrive as a frame in the middle of a 200 stream.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from pytest_llmperf.client.api_kinds import API_PATHS, ApiKind
from pytest_llmperf.workloads.base import Sample

if TYPE_CHECKING:
    from pytest_llmperf.workloads.output_contract import OutputContract

__all__ = [
    "API_PATHS",
    "DEFAULT_FIELDS",
    "ApiKind",
    "ChunkInfo",
    "RequestFields",
    "answer_text",
    "apply_extra",
    "apply_output_fields",
    "build_openai_payload",
    "chat_messages",
    "error_message",
    "load_event",
    "output_fields",
    "parse_chunk",
]

# What each API sends of the optional fields (the rest it never sends, so the
# server can neither take nor refuse them): the report speaks of these only.
_SENDS: dict[str, frozenset[str]] = {
    "chat": frozenset({"ignore_eos", "stream_options", "max_tokens"}),
    "completions": frozenset({"ignore_eos", "stream_options"}),
    "responses": frozenset({"ignore_eos"}),
    "messages": frozenset({"ignore_eos"}),
    "embeddings": frozenset(),
}
# The field each API gives the output length in (embeddings generate none).
_LENGTH_FIELD: dict[str, str | None] = {
    "completions": "max_tokens",
    "responses": "max_output_tokens",
    "messages": "max_tokens",
    "embeddings": None,
}


@dataclass(frozen=True, slots=True)
class RequestFields:
    """What goes into every request body beyond the OpenAI API's required fields.

    ``ignore_eos`` (vLLM, SGLang) with ``max_tokens`` makes a server generate
    the planned output length, and ``stream_options.include_usage`` asks for
    the server's own token counts: both are this project's wishes, not the
    API's, and strict servers (the OpenAI API, ``transformers serve``,
    gateways on pydantic models with ``extra="forbid"``) refuse unknown
    fields. So they are negotiated at preflight
    (:mod:`pytest_llmperf.client.negotiation`) and dropped where refused;
    ``refused`` keeps the server's message for each, for the report.
    ``max_tokens_field`` is ``max_completion_tokens`` where a chat server
    refuses ``max_tokens``. ``extra`` holds the user's own fields
    (``--llm-request-extra``, ``llm_workload(extra_body=...)``), sent as given.
    """

    ignore_eos: bool = True
    include_usage: bool = True
    max_tokens_field: str = "max_tokens"
    extra: Mapping[str, Any] = field(default_factory=dict)
    refused: Mapping[str, str] = field(default_factory=dict)

    def with_extra(self, extra: Mapping[str, Any]) -> RequestFields:
        """These fields with ``extra`` merged over the current user fields."""
        if not extra:
            return self
        return replace(self, extra={**self.extra, **extra})

    def sends(self, api: str, name: str) -> bool:
        """Whether a request of ``api`` carries the optional field ``name`` (``ignore_eos``,
        ``stream_options``, ``max_tokens``) with these fields: the API must have it at all
        (the Responses API has no ``stream_options``; embeddings none of them), and it must
        not have been dropped."""
        if name not in _SENDS.get(api, ()):
            return False
        if name == "ignore_eos":
            return self.ignore_eos
        if name == "stream_options":
            return self.include_usage
        return self.max_tokens_field == "max_tokens"

    def notes(self, api: str = "chat") -> list[str]:
        """What each refusal means for the measurement, in the report's words; only of the
        fields ``api`` sends (nothing is said of a field the API never carries)."""
        sends = _SENDS.get(api, frozenset())
        length = self.length_field(api) or "max_tokens"
        out: list[str] = []
        if not self.ignore_eos and "ignore_eos" in sends:
            out.append(
                "server refused ignore_eos: output lengths are the server's "
                f"(the model may stop before {length}); see token_lengths"
            )
        if not self.include_usage and "stream_options" in sends:
            out.append(
                "server refused stream_options.include_usage: output tokens are counted "
                "as streamed token events (token_count_source 'events')"
            )
        if self.max_tokens_field != "max_tokens" and "max_tokens" in sends:
            out.append(f"server refused max_tokens: output length sent as {self.max_tokens_field}")
        return out

    def length_field(self, api: str = "chat") -> str | None:
        """The body field that carries the output length for ``api`` (None: embeddings)."""
        if api == "chat":
            return self.max_tokens_field
        return _LENGTH_FIELD.get(api)

    def describe(self, api: str = "chat") -> dict[str, Any]:
        """The report's ``endpoint["request_fields"]``: a field ``api`` never sends is
        ``None`` (neither taken nor refused), ``max_tokens_field`` the API's own."""
        sends = _SENDS.get(api, frozenset())
        return {
            "ignore_eos": self.ignore_eos if "ignore_eos" in sends else None,
            "include_usage": self.include_usage if "stream_options" in sends else None,
            "max_tokens_field": self.length_field(api),
            "extra": sorted(self.extra),
            "refused": {k: v for k, v in self.refused.items() if _refusable(k, sends)},
            "notes": self.notes(api),
        }


def _refusable(name: str, sends: frozenset[str]) -> bool:
    """Whether a refusal recorded under ``name`` concerns a field the API sends (the user's
    own fields, recorded under other names, always do)."""
    return name in sends or name not in {"ignore_eos", "stream_options", "max_tokens"}


DEFAULT_FIELDS = RequestFields()


def build_openai_payload(
    api: str, model: str, sample: Sample, fields: RequestFields = DEFAULT_FIELDS
) -> dict[str, Any]:
    """The streaming chat or completions body for ``sample``, with only the fields
    ``fields`` allows.

    A sample's own ``extra_body`` (e.g. ``ignore_eos: False`` from a workload
    that lets the model stop early) overrides the negotiated defaults, and
    the user's fields override both; a sample may not re-add ``ignore_eos``
    to a server that refused it. A chat sample's images go with its last user
    turn (:func:`chat_messages`); completions carry none (a prompt is text).
    A sample's output contract adds its fields (:func:`output_fields`).
    """
    body: dict[str, Any] = {
        "model": model,
        fields.max_tokens_field: sample.max_tokens,
        "stream": True,
        "temperature": 0.0,
    }
    if fields.include_usage:
        body["stream_options"] = {"include_usage": True}
    if fields.ignore_eos:
        body["ignore_eos"] = True
    if api == "chat":
        body["messages"] = chat_messages(sample) if sample.images else sample.messages()
    else:
        history = "".join(f"{turn['content']}\n" for turn in sample.history)
        body["prompt"] = history + sample.prompt
    if sample.contract is not None:
        apply_output_fields(body, sample.contract, output_fields(api, sample.contract))
    return apply_extra(body, sample, fields, ignore_eos=fields.ignore_eos)


def output_fields(api: str, contract: OutputContract) -> dict[str, Any]:
    """What a chat or completions body adds for ``contract``: chat's ``response_format``
    (``json_schema``, strict), ``tools`` as given and the normalised ``tool_choice``;
    greedy decoding on both (``temperature`` 0, ``top_p`` 1, the workload's ``seed``).
    Completions take greedy decoding only (collection refuses the rest there)."""
    out: dict[str, Any] = {}
    if api == "chat":
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


def apply_output_fields(
    body: dict[str, Any], contract: OutputContract, output: Mapping[str, Any]
) -> None:
    """Put a contract's ``output`` fields into ``body``, before the sample's and the
    user's own (which still win).

    An output that is checked (a schema, tools) goes without ``ignore_eos``: the
    grammar ends the JSON or the call, and a server made to decode past that end
    drives its grammar engine into a state it rejects (vLLM: "grammar rejected",
    vllm-project/vllm#49173); the output length is then the server's, as
    ``token_lengths`` shows. Greedy-only requests keep it (fixed lengths compare).
    """
    body.update(output)
    if contract.checks_output:
        body.pop("ignore_eos", None)


def chat_messages(sample: Sample) -> list[dict[str, Any]]:
    """``sample``'s chat messages with its images after the text of the last user turn,
    as OpenAI content parts (``image_url`` with the image's ``data:`` URL)."""
    parts: list[dict[str, Any]] = [{"type": "text", "text": sample.prompt}]
    parts += [{"type": "image_url", "image_url": {"url": i.data_url}} for i in sample.images]
    return [*map(dict, sample.history), {"role": "user", "content": parts}]


def apply_extra(
    body: dict[str, Any], sample: Sample, fields: RequestFields, *, ignore_eos: bool
) -> dict[str, Any]:
    """``body`` with the sample's ``extra_body`` and then the user's fields over it.

    ``ignore_eos``: whether the body may carry ``ignore_eos`` (negotiated, and an
    API that has it); a sample's ``ignore_eos`` goes only where it may, the user's
    own fields always (they are what the user wants measured).
    """
    if sample.extra_body:
        body.update(sample.extra_body)
        if not ignore_eos:
            body.pop("ignore_eos", None)
    if fields.extra:
        body.update(fields.extra)
    return body


@dataclass(slots=True)
class ChunkInfo:
    """What one decoded stream event means for the measurement.

    ``event`` is true for a token event (docs/measurement.md, "Token events"): a
    chunk whose delta carries ``content``, ``reasoning_content``/``reasoning``
    or ``tool_calls`` (an empty string included: vLLM streams a token that
    ends inside a multi-byte character as ``"content": ""``), or a
    completions ``text``; not the role-only opening chunk, not a chunk with
    only ``finish_reason``/``usage``, and not an empty string riding on the
    chunk that carries ``finish_reason`` (llama.cpp ends so). ``answer`` is
    true when the event carries non-empty answer content or a tool call
    (``ttfo``); ``reasoning`` when it carries reasoning text; ``output`` when
    it carries a non-empty piece of the reply — answer text, reasoning text or
    tool-call arguments — which an empty-string delta never is (a stream with no
    such piece is a *blank* reply where a token event or the usage says tokens were
    generated, ``empty_response`` where nothing does). ``blank_finish`` marks
    an empty string beside the finish: llama.cpp ends so, and vLLM when its last
    token is a partial character; only the usage at the end of the stream can
    tell the two apart (:mod:`pytest_llmperf.client.request` settles it there).
    ``timing`` is the server's own timing object of the request (vLLM's
    ``metrics``, llama.cpp's ``timings``; :mod:`pytest_llmperf.client.server_timing`),
    looked for only on a chunk with ``usage`` or a ``finish_reason``: the end of a
    stream, or a whole answer.
    """

    event: bool = False
    answer: bool = False
    reasoning: bool = False
    output: bool = False
    finish_reason: str | None = None
    usage: dict[str, Any] | None = None
    timing: dict[str, Any] | None = None
    error: str | None = None
    done: bool = False
    blank_finish: bool = False


_DONE = ChunkInfo(done=True)
_DECODER = json.JSONDecoder()
# The C scanner; raises StopIteration where raw_decode raises. A real attribute of every
# JSONDecoder (set in __init__), missing from typeshed's stubs: hence the ignore.
_SCAN: Callable[[str, int], tuple[Any, int]] = _DECODER.scan_once  # type: ignore[attr-defined]


def parse_chunk(data: str) -> ChunkInfo:
    """Interpret one SSE ``data`` payload; malformed JSON raises ``ValueError``.

    This runs for every chunk of every stream, so it is written flat: the JSON
    goes straight to the C scanner, skipping ``json.loads``'s whitespace
    regexes and wrapper calls (a payload with leading whitespace, or a broken
    one, still goes through ``loads`` for its result or its error), and one
    ``ChunkInfo`` is built at the end.
    """
    if data == "[DONE]":
        return _DONE
    try:
        obj, end = _SCAN(data, 0)  # raw_decode without its wrapper: once per chunk
    except StopIteration:
        if data.strip() == "[DONE]":
            return _DONE
        obj, end = json.loads(data), len(data)  # leading whitespace; or raises json's error
    if end != len(data) and not data[end:].isspace():
        json.loads(data)  # raises "Extra data" with json's own message
    if obj.__class__ is not dict:
        raise ValueError(f"stream chunk is not a JSON object: {data[:80]!r}")
    if obj.get("error"):
        return ChunkInfo(error=error_message(obj))
    usage = obj.get("usage")
    if usage.__class__ is dict:  # the stream's last chunk (or a whole answer): timings ride here
        timing = _server_timing(obj)
    else:
        usage = timing = None
    choices = obj.get("choices")
    if not choices:
        return ChunkInfo(usage=usage, timing=timing)
    choice = choices[0]
    if choice.__class__ is not dict:
        return ChunkInfo(usage=usage, timing=timing)
    finish = choice.get("finish_reason")
    if finish and timing is None:  # llama.cpp's last chunk when no usage was asked for
        timing = _server_timing(obj)
    delta = choice.get("delta")
    if delta.__class__ is dict:
        content = delta.get("content")
        if len(delta) == 1 and content.__class__ is str:
            # the common chunk, {"content": "..."}: no further look-ups
            if content:
                return ChunkInfo(True, True, False, True, finish, usage, timing)
            if not finish:  # an empty token delta (vLLM: a partial character)
                return ChunkInfo(True, False, False, False, finish, usage, timing)
            return ChunkInfo(False, False, False, False, finish, usage, timing, blank_finish=True)
        return _delta_info(delta, content, finish, usage, timing)
    text = choice.get("text")
    if text.__class__ is str:  # completions
        if text:
            return ChunkInfo(True, True, False, True, finish, usage, timing)
        if not finish:
            return ChunkInfo(True, False, False, False, finish, usage, timing)
        return ChunkInfo(False, False, False, False, finish, usage, timing, blank_finish=True)
    message = choice.get("message")
    if message.__class__ is dict:  # a non-streamed chat answer
        return _delta_info(message, message.get("content"), finish, usage, timing, whole=True)
    return ChunkInfo(False, False, False, False, finish, usage, timing)


def load_event(data: str) -> dict[str, Any]:
    """One SSE ``data`` payload (or a whole answer) as a JSON object; ``ValueError`` for
    anything else (broken JSON, trailing data, a JSON value that is not an object).

    The typed-event APIs' parsers (Responses, Messages) start here: the C scanner
    first, as :func:`parse_chunk` does, ``json.loads`` for its result or its error.
    """
    try:
        obj, end = _SCAN(data, 0)
    except StopIteration:
        obj, end = json.loads(data), len(data)
    if end != len(data) and not data[end:].isspace():
        json.loads(data)  # raises "Extra data" with json's own message
    if obj.__class__ is not dict:
        raise ValueError(f"stream event is not a JSON object: {data[:80]!r}")
    event: dict[str, Any] = obj
    return event


def _server_timing(obj: dict[str, Any]) -> dict[str, Any] | None:
    """The server's timing object of the request: vLLM's ``metrics``, llama.cpp's
    ``timings`` (only ever looked for on the chunk that ends a stream)."""
    found = obj.get("metrics")
    if found.__class__ is not dict:
        found = obj.get("timings")
        if found.__class__ is not dict:
            return None
    timing: dict[str, Any] = found
    return timing


def _delta_info(
    delta: dict[str, Any],
    content: Any,
    finish: str | None,
    usage: dict[str, Any] | None,
    timing: dict[str, Any] | None,
    *,
    whole: bool = False,
) -> ChunkInfo:
    """The rare chat delta shapes: role chunks, reasoning, tool calls."""
    reasoning = delta.get("reasoning_content")
    if reasoning.__class__ is not str:
        reasoning = delta.get("reasoning")
    has_content = content.__class__ is str
    has_reasoning = reasoning.__class__ is str
    tools = delta.get("tool_calls")
    has_tools = bool(tools) and tools.__class__ is list
    text = has_content and bool(content)
    answer = text or has_tools
    thinking = has_reasoning and bool(reasoning)
    if answer or thinking:
        output = text or thinking or (has_tools and _has_arguments(tools))
        return ChunkInfo(True, answer, thinking, output, finish, usage, timing)
    # Only empty strings (or nothing) from here on.
    if not (has_content or has_reasoning) or whole or "role" in delta:
        # the role-only opening chunk, or a finish-only chunk
        return ChunkInfo(False, False, False, False, finish, usage, timing)
    if finish:  # "" beside the finish: a token only if the usage says so
        return ChunkInfo(False, False, False, False, finish, usage, timing, blank_finish=True)
    return ChunkInfo(True, False, False, False, finish, usage, timing)  # an empty token delta


def _has_arguments(calls: Any) -> bool:
    """Whether a ``tool_calls`` delta carries a piece of some call's arguments (a string,
    or the parsed object a few servers send); a call's name or id alone is not one."""
    for call in calls:
        function = call.get("function") if call.__class__ is dict else None
        if function.__class__ is dict and function.get("arguments"):
            return True
    return False


def answer_text(data: str) -> str:
    """The answer text of one event, or of a whole (non-streamed) answer: the first
    choice's ``content`` (chat) or ``text`` (completions); never reasoning text, ``""``
    for a tool call or a chunk without text.

    Kept out of :func:`parse_chunk`, which runs for every chunk of every stream: only
    a request whose reply is collected (a session turn that a later turn quotes,
    ``RequestRecord.reply``) pays for this second look at the payload, and only for
    events that :func:`parse_chunk` found to carry answer text.
    """
    try:
        obj, _ = _SCAN(data, 0)
    except StopIteration:
        obj = json.loads(data)  # leading whitespace (parse_chunk has accepted the payload)
    choices = obj.get("choices") if obj.__class__ is dict else None
    if not choices or choices.__class__ is not list or choices[0].__class__ is not dict:
        return ""
    choice = choices[0]
    part = choice.get("delta")  # the same order of look-ups as parse_chunk
    if part.__class__ is not dict:
        text = choice.get("text")  # completions
        if text.__class__ is str:
            return text
        part = choice.get("message")  # a non-streamed chat answer
        if part.__class__ is not dict:
            return ""
    content = part.get("content")
    return content if content.__class__ is str else ""


def error_message(obj: Any) -> str:
    """The human message of an error body, or a short dump of what came.

    Knows the OpenAI shape (``{"error": {"message", "code"}}``), a bare
    ``{"error": "..."}``, and FastAPI/pydantic validation errors
    (``{"detail": [{"loc": [...], "msg": ...}]}``), which strict servers and
    gateways send for a field they do not accept.
    """
    if isinstance(obj, dict):
        err = obj.get("error", obj)
        if isinstance(err, dict):
            msg = err.get("message") or err.get("detail") or ""
            if isinstance(msg, list):
                msg = _validation_errors(msg)
            code = err.get("code") or err.get("type") or ""
            return f"{msg} ({code})"[:300] if code and msg else str(msg or code or err)[:300]
        if isinstance(err, str):
            return err[:300]
    return str(obj)[:300]


def _validation_errors(items: list[Any]) -> str:
    """pydantic's error list as ``body.ignore_eos: Extra inputs are not permitted; ...``."""
    parts = []
    for item in items[:5]:
        if isinstance(item, dict):
            loc = ".".join(str(p) for p in item.get("loc") or ())
            parts.append(f"{loc}: {item.get('msg', '')}" if loc else str(item.get("msg", item)))
        else:
            parts.append(str(item))
    return "; ".join(parts)
