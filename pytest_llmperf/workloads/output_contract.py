"""What a request asks the server to produce beyond free text, and how its output is checked.

``llm_workload(structured=, tools=, tool_choice=, greedy=)`` reach the paths a
pull request breaks without touching plain-text latency: a grammar engine
(JSON Schema outputs), a tool parser (function calls), the numerics (greedy
outputs, a fingerprint of the model's arithmetic). All four are parsed here,
once, at collection, into an :class:`OutputContract` that rides on every
sample: the client turns it into each API's request fields and validates the
finished output against it. Every schema is checked with ``jsonschema`` here,
so a schema the validator cannot use fails the test before a request is sent
rather than making every output "invalid".
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Any

from pytest_llmperf.errors import LlmPerfUsageError

__all__ = [
    "DEFAULT_SCHEMA_NAME",
    "SAMPLE_TOOLS",
    "OutputContract",
    "ToolChoiceMode",
    "parse_output_contract",
]

DEFAULT_SCHEMA_NAME = "output"
# OpenAI's rule for a json_schema "name" and a function name (Anthropic's tool names too)
_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")
# a function "without parameters" takes none (OpenAI's reading); made explicit so every API
# (the Messages API requires an input_schema) and the validator get a schema
_NO_PARAMETERS: Mapping[str, Any] = {"type": "object", "properties": {}}


class ToolChoiceMode(StrEnum):
    """The string forms of ``tool_choice`` (any other string names a tool)."""

    AUTO = "auto"  # the model may call a tool or answer in text
    REQUIRED = "required"  # the model must call some tool
    NONE = "none"  # the model must not call a tool


def _function(name: str, description: str, properties: dict[str, Any]) -> dict[str, Any]:
    return {
        "type": "function",
        "function": {
            "name": name,
            "description": description,
            "parameters": {
                "type": "object",
                "properties": properties,
                "required": list(properties),
                "additionalProperties": False,
            },
        },
    }


# tools="sample": small, ordinary functions of the kinds tool-call benchmarks use (an enum,
# an integer with bounds, a date-time string and an array), every argument required and
# nothing else allowed, so "strict" servers accept them and every call's arguments are checkable.
SAMPLE_TOOLS: tuple[Mapping[str, Any], ...] = (
    _function(
        "get_weather",
        "The current weather in a city.",
        {
            "city": {"type": "string", "description": "The city's name, e.g. Lisbon."},
            "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
        },
    ),
    _function(
        "search",
        "Search a document collection and return the best matches.",
        {
            "query": {"type": "string", "description": "What to look for."},
            "limit": {"type": "integer", "minimum": 1, "maximum": 20},
        },
    ),
    _function(
        "create_event",
        "Put an event in the calendar.",
        {
            "title": {"type": "string"},
            "start": {"type": "string", "format": "date-time"},
            "attendees": {"type": "array", "items": {"type": "string"}},
        },
    ),
)


@dataclass(frozen=True, slots=True, weakref_slot=True)
class OutputContract:
    """What a request asks the server to produce beyond free text, and how its output is checked.

    ``schema`` (``structured=``) is sent as ``response_format`` json_schema named
    ``schema_name``; ``tools`` are OpenAI chat tool objects, each with a
    ``parameters`` schema; ``tool_choice`` is normalised (``"auto"``,
    ``"required"``, ``"none"`` or ``{"type": "function", "function": {"name": N}}``;
    ``None``: not sent, the server's default). ``greedy``: temperature 0, top_p 1
    and ``greedy_seed`` (the workload's seed) as ``seed``.

    Hashable (by value) and weak-referenceable, so the client can cache its
    validators per contract.
    """

    schema: Mapping[str, Any] | None = None
    schema_name: str = DEFAULT_SCHEMA_NAME
    tools: tuple[Mapping[str, Any], ...] = ()
    tool_choice: str | Mapping[str, Any] | None = None
    greedy: bool = False
    greedy_seed: int = 0

    def __hash__(self) -> int:
        return hash(_canonical(self._fields()))

    def _fields(self) -> tuple[Any, ...]:
        return (
            self.schema,
            self.schema_name,
            list(self.tools),
            self.tool_choice,
            self.greedy,
            self.greedy_seed,
        )

    @property
    def checks_output(self) -> bool:
        """The output is validated: a schema, or tools whose calls' arguments are checked."""
        return self.schema is not None or bool(self.tools)

    @property
    def keeps_output(self) -> bool:
        """The client collects the reply: to check it, or to digest it (greedy)."""
        return self.checks_output or self.greedy

    @property
    def tool_names(self) -> tuple[str, ...]:
        return tuple(str(t["function"]["name"]) for t in self.tools)

    @property
    def named_tool(self) -> str | None:
        """The tool ``tool_choice`` forces, or None (a mode, or nothing sent)."""
        if isinstance(self.tool_choice, Mapping):
            return str(self.tool_choice["function"]["name"])
        return None

    def tool_schema(self, name: str) -> Mapping[str, Any] | None:
        """The parameters schema of tool ``name``; None when no tool has that name."""
        for tool in self.tools:
            function = tool["function"]
            if function["name"] == name:
                parameters: Mapping[str, Any] = function["parameters"]
                return parameters
        return None

    def describe(self) -> dict[str, Any]:
        """What the report shows of it: only what was asked for.

        ``structured`` (the schema's name), ``tools`` (their names),
        ``tool_choice`` (when given: the mode, or the forced tool's name) and
        ``greedy`` (when True).
        """
        out: dict[str, Any] = {}
        if self.schema is not None:
            out["structured"] = self.schema_name
        if self.tools:
            out["tools"] = list(self.tool_names)
            if self.tool_choice is not None:
                out["tool_choice"] = self.named_tool or self.tool_choice
        if self.greedy:
            out["greedy"] = True
        return out


def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), default=repr)


def parse_output_contract(
    *,
    workload: str,
    seed: int,
    structured: Any = None,
    tools: Any = None,
    tool_choice: Any = None,
    greedy: Any = False,
) -> OutputContract | None:
    """The contract ``llm_workload(structured=, tools=, tool_choice=, greedy=)`` ask for.

    None when none of them is given (the sample stays a plain-text request).
    Bad values are :class:`LlmPerfUsageError` naming ``workload``, the parameter
    and the value.
    """
    if not isinstance(greedy, bool):
        raise _error(workload, f"greedy must be True or False, got {greedy!r}")
    if structured is None and tools is None and tool_choice is None and not greedy:
        return None
    schema, name = (None, DEFAULT_SCHEMA_NAME)
    if structured is not None:
        schema, name = _schema(workload, structured)
    parsed_tools = _tools(workload, tools) if tools is not None else ()
    choice = _tool_choice(workload, tool_choice, parsed_tools)
    return OutputContract(
        schema=schema,
        schema_name=name,
        tools=parsed_tools,
        tool_choice=choice,
        greedy=greedy,
        greedy_seed=seed,
    )


def _error(workload: str, message: str) -> LlmPerfUsageError:
    return LlmPerfUsageError(f"workload {workload!r}: {message}")


def _schema(workload: str, value: Any) -> tuple[dict[str, Any], str]:
    """``structured=``: a JSON Schema dict, or the path of a ``.json`` file holding one."""
    if isinstance(value, Mapping):
        schema, name = copy.deepcopy(dict(value)), DEFAULT_SCHEMA_NAME
        where = f"structured={value!r:.200}"
    elif isinstance(value, (str, Path)):
        schema, name = _schema_file(workload, Path(value)), _schema_name(Path(value).stem)
        where = f"structured={str(value)!r}"
    else:
        raise _error(
            workload,
            "structured must be a JSON Schema (a dict) or the path of a .json file "
            f"holding one, got {value!r:.200}",
        )
    _check_schema(workload, where, schema)
    return schema, name


def _schema_file(workload: str, path: Path) -> dict[str, Any]:
    if path.suffix.lower() != ".json":
        raise _error(workload, f"structured={str(path)!r} is not a .json file")
    try:
        text = path.read_text("utf-8")
    except OSError as exc:
        raise _error(workload, f"structured={str(path)!r}: cannot read it: {exc}") from None
    try:
        schema = json.loads(text)
    except json.JSONDecodeError as exc:
        raise _error(workload, f"structured={str(path)!r} is not JSON: {exc}") from None
    if not isinstance(schema, dict):
        raise _error(
            workload,
            f"structured={str(path)!r} holds a {type(schema).__name__}, not a JSON Schema object",
        )
    return schema


def _schema_name(stem: str) -> str:
    """A file's stem as a json_schema ``name`` (letters, digits, ``_``, ``-``; at most 64)."""
    name = re.sub(r"[^A-Za-z0-9_-]", "_", stem)[:64]
    return name or DEFAULT_SCHEMA_NAME


def _check_schema(workload: str, where: str, schema: Mapping[str, Any]) -> None:
    """A schema the validator (for its ``$schema`` draft) accepts, else a usage error."""
    # imported here: jsonschema costs ~60 ms to import, and only these tests need it
    from jsonschema.exceptions import SchemaError
    from jsonschema.validators import validator_for

    try:
        validator_for(dict(schema)).check_schema(dict(schema))
    except SchemaError as exc:
        at = "/".join(map(str, exc.absolute_path)) or "(root)"
        raise _error(
            workload, f"{where} is not a valid JSON Schema: {exc.message} (at {at})"
        ) from None


def _tools(workload: str, value: Any) -> tuple[Mapping[str, Any], ...]:
    """``tools=``: ``"sample"`` or a list of OpenAI function tools, each checked."""
    if value == "sample":
        return tuple(copy.deepcopy(dict(t)) for t in SAMPLE_TOOLS)
    shape = (
        'tools must be "sample" or a list of function tools '
        '[{"type": "function", "function": {"name", "description", "parameters"}}]'
    )
    if isinstance(value, (str, bytes, Mapping)) or not isinstance(value, Sequence) or not value:
        raise _error(workload, f"{shape}, got {value!r:.200}")
    out: list[dict[str, Any]] = []
    seen: set[str] = set()
    for i, tool in enumerate(value):
        function = tool.get("function") if isinstance(tool, Mapping) else None
        if (
            not isinstance(tool, Mapping)
            or tool.get("type") != "function"
            or not isinstance(function, Mapping)
        ):
            raise _error(workload, f"{shape}; tools[{i}] is {tool!r:.200}")
        name = function.get("name")
        if not isinstance(name, str) or not _NAME.fullmatch(name):
            raise _error(
                workload,
                f"tools[{i}] function name must be 1-64 letters, digits, _ or -, got {name!r}",
            )
        if name in seen:
            raise _error(workload, f"tools[{i}]: two tools are named {name!r}")
        seen.add(name)
        description = function.get("description", "")
        if not isinstance(description, str):
            raise _error(
                workload, f"tools[{i}] ({name}) description must be a string, got {description!r}"
            )
        parameters = function.get("parameters", _NO_PARAMETERS)
        if not isinstance(parameters, Mapping):
            raise _error(
                workload,
                f"tools[{i}] ({name}) parameters must be a JSON Schema object, "
                f"got {parameters!r:.200}",
            )
        _check_schema(workload, f"tools[{i}] ({name}) parameters", parameters)
        normalised = copy.deepcopy(dict(tool))
        normalised["function"] = {**copy.deepcopy(dict(function)), "name": name}
        normalised["function"]["parameters"] = copy.deepcopy(dict(parameters))
        out.append(normalised)
    return tuple(out)


def _tool_choice(
    workload: str, value: Any, tools: tuple[Mapping[str, Any], ...]
) -> str | dict[str, Any] | None:
    """``tool_choice=`` normalised: a mode string, or the named tool in chat's form."""
    if value is None:
        return None
    if not tools:
        raise _error(workload, f"tool_choice={value!r:.200} needs tools= (none given)")
    names = [str(t["function"]["name"]) for t in tools]
    if isinstance(value, str):
        if value in ToolChoiceMode._value2member_map_:
            return ToolChoiceMode(value).value
        name: Any = value
    elif isinstance(value, Mapping) and value.get("type") == "function":
        function = value.get("function")
        # chat's {"type": "function", "function": {"name": N}}, or Responses' {"type", "name"}
        name = function.get("name") if isinstance(function, Mapping) else value.get("name")
    else:
        name = None
    if not isinstance(name, str):
        raise _error(
            workload,
            'tool_choice must be "auto", "required", "none", a tool\'s name or '
            f'{{"type": "function", "function": {{"name": ...}}}}, got {value!r:.200}',
        )
    if name not in names:
        raise _error(
            workload,
            f"tool_choice={value!r:.200} names no tool given; tools: {', '.join(names)}",
        )
    return {"type": "function", "function": {"name": name}}
