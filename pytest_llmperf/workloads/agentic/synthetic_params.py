"""The synthetic agentic workload's parameters, checked (docs/agentic.md, "Synthetic agents").

Kept apart from the generator (:mod:`.synthetic`) so the checks read as one list:
every bad value is a usage error naming the workload (``'agentic'``) and the
parameter; ranges are ``(min, max)`` tuples (an int is a fixed value) and
``tool_time`` takes what ``think_time=`` takes (seconds or a distribution).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pytest_llmperf.errors import LlmPerfUsageError
from pytest_llmperf.workloads.conversations import ThinkTime, think_time
from pytest_llmperf.workloads.params import TokenRange, fraction, positive_int, token_range

__all__ = [
    "DEFAULT_SUBAGENTS",
    "DEFAULT_TOOL_TIME",
    "SUBAGENT_KEYS",
    "WORKLOAD",
    "AgenticParams",
    "SubagentParams",
    "agentic_params",
]

WORKLOAD = "agentic"
SUBAGENT_KEYS = ("spawns", "width", "turns", "background")
DEFAULT_TOOL_TIME = ThinkTime("exponential", 0.2)


def _usage(message: str) -> LlmPerfUsageError:
    return LlmPerfUsageError(f"workload {WORKLOAD!r}: {message}")


@dataclass(frozen=True, slots=True)
class SubagentParams:
    """``subagents=``: fan-outs per root thread, subagents per fan-out, calls per
    subagent, and the share of subagents nobody waits for."""

    spawns: TokenRange = (0, 0)
    width: TokenRange = (1, 1)
    turns: TokenRange = (2, 4)
    background: float = 0.0

    def describe(self) -> dict[str, Any]:
        return {
            "spawns": list(self.spawns),
            "width": list(self.width),
            "turns": list(self.turns),
            "background": self.background,
        }


DEFAULT_SUBAGENTS = SubagentParams(spawns=(1, 1), width=(2, 2))


@dataclass(frozen=True, slots=True)
class AgenticParams:
    """The synthetic agentic workload's parameters, checked (see the module docstring)."""

    conversations: int = 4
    turns: TokenRange = (4, 8)
    subagents: SubagentParams = DEFAULT_SUBAGENTS
    tool_time: ThinkTime = DEFAULT_TOOL_TIME
    context_growth: TokenRange = (100, 400)
    system_prompt_tokens: int = 1024
    shared_system_prompt: bool = False
    output_tokens: TokenRange = (16, 64)
    max_input_tokens: int | None = None
    stagger_s: float = 0.5  # recorded starts i * stagger (the sample traces'; not a workload param)
    block_size: int = 64

    def describe(self) -> dict[str, Any]:
        return {
            "conversations": self.conversations,
            "turns": list(self.turns),
            "subagents": self.subagents.describe(),
            "tool_time": self.tool_time.describe(),
            "context_growth": list(self.context_growth),
            "system_prompt_tokens": self.system_prompt_tokens,
            "shared_system_prompt": self.shared_system_prompt,
            "output_tokens": list(self.output_tokens),
            "max_input_tokens": self.max_input_tokens,
            "block_size": self.block_size,
        }


def _range(name: str, value: Any, *, minimum: int = 1) -> TokenRange:
    try:
        low, high = token_range(name, value) if minimum >= 1 else _zero_range(name, value)
    except LlmPerfUsageError as exc:
        raise _usage(str(exc)) from None
    return (low, high)


def _zero_range(name: str, value: Any) -> TokenRange:
    """:func:`token_range` that also takes 0 (``spawns=0``: no subagents)."""
    if value == 0 and not isinstance(value, bool):
        return (0, 0)
    if isinstance(value, (tuple, list)) and len(value) == 2 and value[0] == 0:
        if value[1] == 0 and not isinstance(value[1], bool):
            return (0, 0)
        return (0, token_range(f"{name}[1]", value[1])[1])
    return token_range(name, value)


def _subagents(value: Any) -> SubagentParams:
    if value is None or (value == 0 and not isinstance(value, bool)):
        return SubagentParams()
    if isinstance(value, int) and not isinstance(value, bool):
        return SubagentParams(spawns=_range("subagents", value), width=(2, 2))
    if not isinstance(value, Mapping):
        raise _usage(
            "subagents must be 0, a number of fan-outs per conversation, or a dict with "
            f"{', '.join(repr(k) for k in SUBAGENT_KEYS)}; got {value!r}"
        )
    extra = sorted(set(map(str, value)) - set(SUBAGENT_KEYS))
    if extra:
        raise _usage(
            f"subagents does not take {', '.join(repr(k) for k in extra)}; it takes "
            f"{', '.join(repr(k) for k in SUBAGENT_KEYS)} (got {dict(value)!r})"
        )
    default = DEFAULT_SUBAGENTS
    return SubagentParams(
        spawns=_range("subagents['spawns']", value.get("spawns", 1), minimum=0),
        width=_range("subagents['width']", value.get("width", default.width)),
        turns=_range("subagents['turns']", value.get("turns", default.turns)),
        background=_fraction("subagents['background']", value.get("background", 0.0)),
    )


def _fraction(name: str, value: Any) -> float:
    try:
        return fraction(name, value)
    except LlmPerfUsageError as exc:
        raise _usage(str(exc)) from None


def _positive(name: str, value: Any, *, minimum: int = 1) -> int:
    try:
        return positive_int(name, value, minimum=minimum)
    except LlmPerfUsageError as exc:
        raise _usage(str(exc)) from None


def _tool_time(value: Any) -> ThinkTime:
    """``tool_time=``: seconds, or a ``{"distribution": ...}`` dict as ``think_time=`` takes."""
    try:
        return think_time(value)
    except LlmPerfUsageError as exc:
        raise _usage(str(exc).replace("think_time", "tool_time")) from None


def agentic_params(
    *,
    conversations: Any = 4,
    turns: Any = (4, 8),
    subagents: Any = None,
    tool_time: Any = None,
    context_growth: Any = (100, 400),
    system_prompt_tokens: Any = 1024,
    shared_system_prompt: Any = False,
    output_tokens: Any = (16, 64),
    max_input_tokens: Any = None,
    stagger: Any = 0.5,
    block_size: Any = 64,
) -> AgenticParams:
    """The parameters checked; a bad one is a usage error naming the workload and it.

    ``stagger`` (seconds) gives conversation ``i`` the recorded start ``i * stagger``:
    the sample traces' starts (scripts/make_agentic_sample.py); the workload itself
    does not take it (an open or closed loop starts conversations at its own times).

    ``subagents=None`` and ``tool_time=None`` are the defaults (one fan-out of two
    subagents per conversation; exponential tool waits, mean 0.2 s).
    """
    if not isinstance(shared_system_prompt, bool):
        raise _usage(f"shared_system_prompt must be True or False, got {shared_system_prompt!r}")
    if (
        isinstance(stagger, bool)
        or not isinstance(stagger, (int, float))
        or not 0 <= stagger < float("inf")
    ):
        raise _usage(f"stagger must be a number of seconds >= 0, got {stagger!r}")
    return AgenticParams(
        conversations=_positive("conversations", conversations),
        turns=_range("turns", turns),
        subagents=DEFAULT_SUBAGENTS if subagents is None else _subagents(subagents),
        tool_time=DEFAULT_TOOL_TIME if tool_time is None else _tool_time(tool_time),
        context_growth=_range("context_growth", context_growth),
        system_prompt_tokens=_positive("system_prompt_tokens", system_prompt_tokens, minimum=0),
        shared_system_prompt=shared_system_prompt,
        output_tokens=_range("output_tokens", output_tokens),
        max_input_tokens=(
            None if max_input_tokens is None else _positive("max_input_tokens", max_input_tokens)
        ),
        stagger_s=float(stagger),
        block_size=_positive("block_size", block_size),
    )
