"""``--llm-event-loop``: the async tests' event loop, through pytest-asyncio's loop factories.

Why through pytest-asyncio: a suite's ``await llm_loadgen.run()`` runs on the
loop pytest-asyncio made for the test, so the loop the client reads on is that
one. pytest-asyncio's ``pytest_asyncio_loop_factories`` hook (newer releases;
the ``event_loop_policy`` fixture it replaces is deprecated) names the factory
every asyncio test runs on; with one factory the test ids do not change. The
hook is registered ``trylast`` and only when a loop other than asyncio's is
chosen: a suite's own implementation wins, and ``asyncio`` leaves pytest-asyncio
as it was. Worker processes (``--llm-workers=N``) follow the loop their run
started on (``loadgen/scale_out/workers.py``); the embedded simulator runs in a
process of its own, on asyncio's loop, whatever is chosen here (its token clock
needs asyncio's sub-millisecond timers: benchmarks/README.md).
"""

from __future__ import annotations

from typing import Any

import pytest

from pytest_llmperf.errors import LlmPerfUsageError
from pytest_llmperf.loadgen.event_loops import LoopFactory, loop_factory, parse_event_loop

__all__ = ["register_event_loop"]

_NAME = "llmperf-event-loop"


class _LoopFactories:
    """The hook implementation: every asyncio test runs on ``factory``'s loop."""

    def __init__(self, name: str, factory: LoopFactory) -> None:
        self._factories = {name: factory}

    @pytest.hookimpl(trylast=True)
    def pytest_asyncio_loop_factories(self, config: pytest.Config, item: Any) -> Any:
        return self._factories


def register_event_loop(config: pytest.Config, value: str) -> None:
    """Install the chosen loop for the session's asyncio tests (nothing for ``asyncio``, nor
    for ``auto`` without uvloop). ``LlmPerfUsageError`` for ``uvloop`` where uvloop or the
    pytest-asyncio hook is missing."""
    choice = parse_event_loop(value)
    factory = loop_factory(choice)
    if factory is None:
        return
    if not hasattr(config.hook, "pytest_asyncio_loop_factories"):
        if choice.value == "auto":
            return
        raise LlmPerfUsageError(
            "choosing the tests' loop needs a pytest-asyncio with the "
            "pytest_asyncio_loop_factories hook (pip install -U pytest-asyncio), got 'uvloop'",
            where="--llm-event-loop",
        )
    config.pluginmanager.register(_LoopFactories(choice.value, factory), _NAME)
