"""What a request asks of its output, as the simulator reads it from any format.

A request may ask for JSON valid against a schema (chat's ``response_format``, the
Responses API's ``text.format``), for function ``tools`` with a ``tool_choice``, or
for a deterministic output (``temperature`` 0 or a ``seed``). Each format's server
half reads its own spelling of those fields into one :class:`OutputAsk` with the
helpers here (:func:`read_tools`, :func:`read_tool_choice`, :func:`json_format`); the
simulator decides the output from it (sim/outputs.py). Malformed fields are a
:class:`~pytest_llmperf.apis.server_wire.WireError` (400), as vLLM answers them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from pytest_llmperf.apis.server_wire import WireError

__all__ = [
    "GREEDY_TEMPERATURE",
    "PLAIN",
    "OutputAsk",
    "OutputFields",
    "ToolSpec",
    "json_format",
    "openai_tool_choice",
    "openai_tools",
    "read_tool_choice",
    "read_tools",
]

GREEDY_TEMPERATURE = 1e-5  # vLLM samples greedily below this (its _SAMPLING_EPS)


@dataclass(frozen=True, slots=True)
class ToolSpec:
    """A function tool as the request declares it."""

    name: str
    parameters: Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class OutputAsk:
    """What a request asks of its output, read from its body (all APIs alike)."""

    schema: Mapping[str, Any] | None = None  # answer text must be JSON valid against it
    tools: tuple[ToolSpec, ...] = ()
    tool_choice: str = "auto"  # "auto" | "required" | "none" | "named"
    named: str | None = None  # the function of a named tool_choice
    greedy: bool = False  # temperature 0: the output is a function of the prompt
    seed: int | None = None  # the request's seed: also a deterministic output

    @property
    def plain(self) -> bool:
        """Nothing beyond filler text asked (the default, cheapest path)."""
        return self.schema is None and not self.tools and not self.greedy and self.seed is None


PLAIN = OutputAsk()
# (schema, tools, tool_choice, named): a format's output fields, read by its server half
OutputFields = tuple[Mapping[str, Any] | None, tuple[ToolSpec, ...], str, str | None]


def _tool_name(name: Any, param: str) -> str:
    if not isinstance(name, str) or not name:
        raise WireError(400, f"{param}: a function tool needs a non-empty name", param)
    return name


def read_tools(
    raw: Any, entry: Callable[[dict[str, Any], str], tuple[Any, Any]]
) -> tuple[ToolSpec, ...]:
    """A request's ``tools``: each object's ``(name, parameters)`` as ``entry`` reads
    it in the format's shape (``entry(tool, "tools.k")``, WireError where unserved)."""
    if raw is None:
        return ()
    if not isinstance(raw, list):
        raise WireError(400, "tools must be a list", "tools")
    out: list[ToolSpec] = []
    for k, tool in enumerate(raw):
        where = f"tools.{k}"
        if not isinstance(tool, dict):
            raise WireError(400, f"{where}: each tool must be an object", "tools")
        name, params = entry(tool, where)
        if params is None:
            params = {}
        if not isinstance(params, dict):
            raise WireError(400, f"{where}: parameters must be a JSON Schema object", "tools")
        out.append(ToolSpec(_tool_name(name, "tools"), params))
    return tuple(out)


def openai_tool_choice(raw: Any) -> tuple[str, Any]:
    """OpenAI's ``tool_choice`` (chat, Responses): ``auto`` / ``required`` / ``none``, or
    ``{"type": "function", ...}`` naming one (``function.name``, or ``name`` flat)."""
    if isinstance(raw, str):
        if raw not in ("auto", "required", "none"):
            raise WireError(400, f"tool_choice: unsupported {raw!r}", "tool_choice")
        return raw, None
    if isinstance(raw, dict) and raw.get("type") == "function":
        fn = raw.get("function")
        return "named", fn.get("name") if isinstance(fn, dict) else raw.get("name")
    raise WireError(400, f"tool_choice: unsupported {raw!r}", "tool_choice")


def openai_tools(
    body: Mapping[str, Any], entry: Callable[[dict[str, Any], str], tuple[Any, Any]]
) -> tuple[tuple[ToolSpec, ...], str, str | None]:
    """``(tools, tool_choice, named)`` of an OpenAI body (chat, Responses): its ``tools``
    as ``entry`` reads each, its ``tool_choice`` as :func:`openai_tool_choice`."""
    tools = read_tools(body.get("tools"), entry)
    choice, named = read_tool_choice(body.get("tool_choice"), tools, openai_tool_choice)
    return tools, choice, named


def read_tool_choice(
    raw: Any, tools: tuple[ToolSpec, ...], choice_of: Callable[[Any], tuple[str, Any]]
) -> tuple[str, str | None]:
    """``(choice, named)`` of a request's ``tool_choice`` as ``choice_of`` reads the
    format's spelling; ``auto`` with tools and ``none`` without when absent."""
    if raw is None:
        return ("auto" if tools else "none"), None
    choice, named = choice_of(raw)
    if choice in ("required", "named") and not tools:
        raise WireError(400, "When using `tool_choice`, `tools` must be set.", "tool_choice")
    if choice == "named" and (not isinstance(named, str) or named not in {t.name for t in tools}):
        raise WireError(400, f"Tool '{named}' has not been passed in `tools`.", "tool_choice")
    return choice, named


def json_format(fmt: Mapping[str, Any], schema: Any, param: str) -> Mapping[str, Any] | None:
    """The schema a response format object asks for (``type`` ``json_schema``), a stand-in
    for ``json_object``, None for ``text``; ``param`` names the field in errors."""
    kind = fmt.get("type")
    if kind == "text":
        return None
    if kind == "json_object":
        return {"type": "object", "properties": {"answer": {"type": "string"}}}
    if kind != "json_schema":
        raise WireError(400, f"{param}.type: unsupported {kind!r}", param.split(".")[0])
    if not isinstance(schema, dict):
        raise WireError(400, f"{param}: json_schema needs a schema object", param.split(".")[0])
    return schema
