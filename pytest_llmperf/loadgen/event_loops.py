"""Which event loop the load generator runs on: asyncio's own, or uvloop where chosen.

Why a choice at all (issue 42, item 2): the client reads once per token
event when events come one at a time (a 10 ms stream at 512 streams), and
each read is an event-loop turn's worth of Python around one ``recv_into``.
uvloop does that turn in C (libuv), which is worth measuring on machines
whose system calls are dear; ``benchmarks/README.md`` ("Issue 42") has the
figures behind the default. The client's connection
(:class:`~pytest_llmperf.client.http1.Http1Connection`, an
``asyncio.BufferedProtocol``) runs unchanged on either: uvloop calls
``get_buffer``/``buffer_updated`` as asyncio does.

``auto`` means uvloop where it is installed (the ``uvloop`` extra), else
asyncio's; ``uvloop`` demands it (a usage error where it is missing);
``asyncio`` never uses it.
"""

from __future__ import annotations

import asyncio
import importlib.util
from collections.abc import Callable, Coroutine
from enum import StrEnum
from typing import Any, TypeVar

from pytest_llmperf.errors import LlmPerfUsageError

__all__ = [
    "EventLoopChoice",
    "LoopFactory",
    "loop_factory",
    "parse_event_loop",
    "run_on",
    "running_loop_choice",
    "uvloop_installed",
]

T = TypeVar("T")
LoopFactory = Callable[[], asyncio.AbstractEventLoop]


class EventLoopChoice(StrEnum):
    """``--llm-event-loop``'s values."""

    AUTO = "auto"
    ASYNCIO = "asyncio"
    UVLOOP = "uvloop"


def parse_event_loop(value: Any, where: str = "--llm-event-loop") -> EventLoopChoice:
    """``auto``, ``asyncio`` or ``uvloop`` (any case); anything else is a usage error."""
    if isinstance(value, EventLoopChoice):
        return value
    text = str(value if value is not None else "").strip().lower() or EventLoopChoice.ASYNCIO.value
    try:
        return EventLoopChoice(text)
    except ValueError:
        choices = ", ".join(c.value for c in EventLoopChoice)
        raise LlmPerfUsageError(f"must be one of {choices}, got {value!r}", where=where) from None


def uvloop_installed() -> bool:
    return importlib.util.find_spec("uvloop") is not None


def loop_factory(
    choice: EventLoopChoice | str, where: str = "--llm-event-loop"
) -> LoopFactory | None:
    """The factory of the loop chosen; ``None`` for asyncio's own (the runner's default).

    ``uvloop`` where uvloop is not installed is a :class:`LlmPerfUsageError` naming
    ``where`` and the extra that brings it.
    """
    choice = parse_event_loop(choice, where)
    if choice is EventLoopChoice.ASYNCIO:
        return None
    if not uvloop_installed():
        if choice is EventLoopChoice.AUTO:
            return None
        raise LlmPerfUsageError(
            "uvloop is not installed (pip install 'pytest-llmperf[uvloop]'), got 'uvloop'",
            where=where,
        )
    import uvloop

    factory: LoopFactory = uvloop.new_event_loop
    return factory


def run_on(coro: Coroutine[Any, Any, T], choice: EventLoopChoice | str) -> T:
    """``asyncio.run(coro)`` on a fresh loop of the chosen kind."""
    with asyncio.Runner(loop_factory=loop_factory(choice)) as runner:
        return runner.run(coro)


def running_loop_choice() -> EventLoopChoice:
    """The kind of the running loop (asyncio's when none runs): what a worker process
    started from it runs on, so ``--llm-workers=N`` measures on the loop the test chose."""
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        return EventLoopChoice.ASYNCIO
    if type(loop).__module__.split(".", 1)[0] == "uvloop":
        return EventLoopChoice.UVLOOP
    return EventLoopChoice.ASYNCIO
