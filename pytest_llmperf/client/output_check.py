"""Checking a finished output against what its request asked for, and fingerprinting it.

A request with ``structured=`` asks for JSON valid against a schema; one with
``tools=`` for tool calls whose arguments are valid against their function's
``parameters``. A grammar-engine or tool-parser regression shows as outputs
that break those promises while latency stays green, so each completed
output is checked once, after its stream ended well, with a maintained
validator (``jsonschema``, the schema's own draft). What fails is recorded on
the request (``record.invalid``, an :class:`InvalidKind`, and the validator's
message in ``record.invalid_detail``): the request still *completed* — an
invalid output is a finding about the server, never a failure of the
measurement — and ``valid_rate`` counts it.

The rules (:func:`check_output`):

- a schema: the answer text must parse as JSON (``not_json``) and be valid
  against the schema (``schema``);
- tools: every tool call must name a given tool (``unknown_tool``) and its
  arguments must parse as JSON and be valid against that tool's parameters
  (``tool_arguments``); ``tool_choice`` ``"required"`` or a named tool needs a
  call (of that tool): ``no_tool_call``; with ``"auto"`` (or none sent) a
  text-only answer is valid — checked against the schema when there is one; a
  call under ``tool_choice="none"`` is ``unknown_tool`` (no tool was offered).

``format`` keywords are annotations, as JSON Schema 2020-12 reads them by
default (no format checker): the grammar engines do not all enforce them,
and a check that depends on which optional packages are installed would not
compare across machines.

With greedy decoding the output is fingerprinted (:func:`output_digest`): the
answer text and the calls' names and arguments as sent, never the servers'
random call ids.
"""

from __future__ import annotations

import hashlib
import json
import weakref
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import TYPE_CHECKING, Any

from pytest_llmperf.client.outputs import CollectedOutput, ToolCall

if TYPE_CHECKING:
    from jsonschema.exceptions import ValidationError
    from jsonschema.protocols import Validator

    from pytest_llmperf.client.records import RequestRecord
    from pytest_llmperf.workloads.output_contract import OutputContract

__all__ = [
    "DETAIL_LIMIT",
    "EXAMPLE_SEP",
    "InvalidKind",
    "OutputFault",
    "check_output",
    "output_digest",
    "settle_output",
]

DETAIL_LIMIT = 300  # characters of the validator's message kept on the record
# In a reason, an example of the output follows this: reports group reasons by what comes
# before it (metrics/output_samples.py), so outputs cut the same way count as one reason.
EXAMPLE_SEP = "; e.g. "


class InvalidKind(StrEnum):
    """Why an output failed its check (a ``StrEnum``: written as the plain strings)."""

    NOT_JSON = "not_json"  # a structured answer that does not parse as JSON
    SCHEMA = "schema"  # JSON, but not valid against the schema
    NO_TOOL_CALL = "no_tool_call"  # tool_choice required (or named) a call; none came
    UNKNOWN_TOOL = "unknown_tool"  # a call of a function that was not offered
    TOOL_ARGUMENTS = "tool_arguments"  # a call's arguments: not JSON, or not valid


@dataclass(frozen=True, slots=True)
class OutputFault:
    """What was wrong with an output: its kind and the validator's message (path first)."""

    kind: InvalidKind
    detail: str


def settle_output(record: RequestRecord, contract: OutputContract, output: CollectedOutput) -> None:
    """Put the check's verdict and the greedy fingerprint of a *completed* request's
    ``output`` on its ``record`` (never raises: a validator that fails is an invalid
    output with its message)."""
    if contract.checks_output:
        record.output_checked = True
        try:
            fault = check_output(contract, output)
        except Exception as exc:  # a validator's own failure (RecursionError, a bug): say so
            fault = OutputFault(
                InvalidKind.SCHEMA, f"validator failed: {type(exc).__name__}: {exc}"
            )
        if fault is not None:
            record.invalid = fault.kind
            record.invalid_detail = fault.detail[:DETAIL_LIMIT]
    if contract.greedy:
        record.output_digest = output_digest(output)
        record.output_marks = output.marks()


def check_output(contract: OutputContract, output: CollectedOutput) -> OutputFault | None:
    """The first thing wrong with ``output`` under ``contract`` (module docstring), or None."""
    validators = _validators(contract)
    calls = output.tool_calls
    if contract.tools:
        named = contract.named_tool
        if calls:
            for call in calls:
                fault = _check_call(contract, validators, call, named)
                if fault is not None:
                    return fault
            return None
        if named is not None:
            return OutputFault(
                InvalidKind.NO_TOOL_CALL,
                f"tool_choice names {named}; the output called no tool{_answered(output)}",
            )
        if contract.tool_choice == "required":
            return OutputFault(
                InvalidKind.NO_TOOL_CALL,
                f"tool_choice is required; the output called no tool{_answered(output)}",
            )
    if validators.schema is None:
        return None
    return _check_answer(validators, validators.schema, output.answer)


def output_digest(output: CollectedOutput) -> str:
    """16 hex digits of the sha256 of the output: its answer text and its tool calls'
    names and arguments (as sent), as canonical JSON."""
    calls = [[call.name, call.arguments] for call in output.tool_calls]
    canonical = json.dumps([output.answer, calls], ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(canonical.encode("utf-8", "surrogatepass")).hexdigest()[:16]


# -- the checks ---------------------------------------------------------------------


def _check_answer(validators: _Validators, validator: Validator, answer: str) -> OutputFault | None:
    if not answer.strip():
        return OutputFault(InvalidKind.NOT_JSON, "the answer is empty (no JSON)")
    try:
        value = json.loads(answer)
    except (ValueError, RecursionError) as exc:
        why = _json_error(exc, answer)
        return OutputFault(InvalidKind.NOT_JSON, f"the answer is not JSON: {why}")
    error = validators.first_error(validator, value)
    if error is None:
        return None
    return OutputFault(InvalidKind.SCHEMA, _where(error))


def _check_call(
    contract: OutputContract, validators: _Validators, call: ToolCall, named: str | None
) -> OutputFault | None:
    name = call.name or "(no name)"
    if contract.tool_choice == "none":
        return OutputFault(
            InvalidKind.UNKNOWN_TOOL, f"tool_choice is none; the output called {name}"
        )
    validator = validators.tools.get(call.name)
    if validator is None:
        offered = ", ".join(contract.tool_names)
        return OutputFault(
            InvalidKind.UNKNOWN_TOOL, f"the output called {name}, not a tool given ({offered})"
        )
    if named is not None and call.name != named:
        return OutputFault(
            InvalidKind.NO_TOOL_CALL, f"tool_choice names {named}; the output called {name}"
        )
    try:
        arguments = json.loads(call.arguments)
    except (ValueError, RecursionError) as exc:
        blank = not call.arguments.strip()
        why = "empty" if blank else f"not JSON: {_json_error(exc, call.arguments)}"
        return OutputFault(InvalidKind.TOOL_ARGUMENTS, f"{name} arguments are {why}")
    error = validators.first_error(validator, arguments)
    if error is None:
        return None
    return OutputFault(InvalidKind.TOOL_ARGUMENTS, f"{name} arguments {_where(error)}")


def _where(error: ValidationError) -> str:
    """The validator's message with the place in the instance it concerns first."""
    message = error.message
    if len(message) > DETAIL_LIMIT:
        message = message[: DETAIL_LIMIT - 3] + "..."
    return f"at {error.json_path}: {message}"


def _answered(output: CollectedOutput) -> str:
    answer = output.answer
    return f" (answered in text: {_cut(answer, 80)})" if answer.strip() else ""


def _json_error(exc: ValueError | RecursionError, text: str) -> str:
    """JSON's reason, then (after ``EXAMPLE_SEP``) where and the text: invalid samples are
    grouped by the reason alone, so outputs cut the same way count as one."""
    if isinstance(exc, json.JSONDecodeError):
        where = f"line {exc.lineno} column {exc.colno}: "
        return f"{exc.msg}{EXAMPLE_SEP}{where}{_cut(text)}"
    return f"{exc}{EXAMPLE_SEP}{_cut(text)}"


def _cut(text: str, limit: int = 60) -> str:
    return repr(text if len(text) <= limit else text[:limit] + "...")


# -- validators, built once per contract --------------------------------------------


class _Validators:
    """A contract's schema validator and one per tool (by the function's name).

    ``jsonschema`` is imported here, with the first contract's validators: it costs
    ~60 ms to import, which a run without a checked output never pays.
    """

    __slots__ = ("_best_match", "schema", "tools")

    def __init__(self, contract: OutputContract) -> None:
        from jsonschema.exceptions import best_match

        self._best_match = best_match
        self.schema = None if contract.schema is None else _validator(contract.schema)
        self.tools: dict[str, Validator] = {}
        for name in contract.tool_names:
            parameters = contract.tool_schema(name)
            if parameters is not None:
                self.tools[name] = _validator(parameters)

    def first_error(self, validator: Validator, instance: Any) -> ValidationError | None:
        """The error ``jsonschema`` judges most relevant (``best_match``), or None."""
        error: ValidationError | None = self._best_match(validator.iter_errors(instance))
        return error


def _validator(schema: Mapping[str, Any]) -> Validator:
    """The validator of ``schema``'s own draft (its ``$schema``; 2020-12 without one)."""
    from jsonschema.validators import validator_for

    cls = validator_for(schema)
    validator: Validator = cls(schema)
    return validator


# id(contract) -> (a weak reference to it, its validators): a contract is the same
# object for every sample of a workload, so a look-up by identity is all a request
# pays; the entry goes when its contract does.
_CACHE: dict[int, tuple[weakref.ref[OutputContract], _Validators]] = {}


def _validators(contract: OutputContract) -> _Validators:
    key = id(contract)
    entry = _CACHE.get(key)
    if entry is not None and entry[0]() is contract:
        return entry[1]
    built = _Validators(contract)

    def forget(ref: weakref.ref[OutputContract], key: int = key) -> None:
        current = _CACHE.get(key)
        if current is not None and current[0] is ref:
            del _CACHE[key]

    _CACHE[key] = (weakref.ref(contract, forget), built)
    return built
