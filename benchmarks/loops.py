"""Event loops for the benchmarks: run a coroutine on asyncio's or uvloop's loop.

Why a module: the uvloop measurements (``loadgen_ab.py``, ``loadgen_latency.py
--loop/--sim-loop``) must put the client, and separately the simulator child,
on either loop without the package choosing for them.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import tempfile
from collections.abc import Callable, Coroutine, Iterator
from pathlib import Path
from typing import Any, TypeVar

__all__ = ["LOOPS", "run_on", "sim_loop"]

LOOPS = ("asyncio", "uvloop")
T = TypeVar("T")


def run_on(loop: str, coro: Coroutine[Any, Any, T]) -> T:
    """``asyncio.run(coro)`` on a fresh loop of the named kind."""
    factory: Callable[[], asyncio.AbstractEventLoop] = asyncio.new_event_loop
    if loop == "uvloop":
        import uvloop

        factory = uvloop.new_event_loop
    with asyncio.Runner(loop_factory=factory) as runner:
        return runner.run(coro)


@contextlib.contextmanager
def sim_loop(loop: str) -> Iterator[None]:
    """Children started inside run on ``loop``: uvloop's policy set by a ``sitecustomize``.

    Empty or ``asyncio``: the child's own choice, untouched. Only the start-up
    reads it, so the folder may go once the child is listening.
    """
    if loop != "uvloop":
        yield
        return
    with tempfile.TemporaryDirectory() as folder:
        Path(folder, "sitecustomize.py").write_text(
            "import asyncio, uvloop\nasyncio.set_event_loop_policy(uvloop.EventLoopPolicy())\n"
        )
        before = os.environ.get("PYTHONPATH")
        os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (folder, before) if p)
        try:
            yield
        finally:
            if before is None:
                del os.environ["PYTHONPATH"]
            else:
                os.environ["PYTHONPATH"] = before
