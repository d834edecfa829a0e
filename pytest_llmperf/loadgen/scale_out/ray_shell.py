"""The class the parent hands Ray for each load-generator actor, and the module it loads.

Ray pickles an actor's class by reference: the actor's process imports the module
that defines it. So the shell lives here, in a module that imports nothing of the
package, and not in :mod:`~pytest_llmperf.loadgen.scale_out.ray_workers` (the
parent's pool, which would bring the parent's side into every actor): inside the
actor it loads :data:`ACTOR_MODULE` by name, which imports only what a worker runs,
as a local worker runs ``python -m`` its module.
"""

from __future__ import annotations

import importlib
from typing import Any

__all__ = ["ACTOR_MODULE", "LoadActorShell"]

# What each actor runs, loaded by name inside the actor's own process: the parent never
# imports the worker side.
ACTOR_MODULE = "pytest_llmperf.loadgen.scale_out.ray_actor"


class LoadActorShell:
    """Inside the actor: loads :data:`ACTOR_MODULE` and passes each call to that module's
    ``LoadActor`` (an async actor, as that one is)."""

    def __init__(self) -> None:
        self._actor = importlib.import_module(ACTOR_MODULE).LoadActor()

    async def where(self) -> dict[str, Any]:
        return await self._actor.where()  # type: ignore[no-any-return]

    async def prepare(self, payload: dict[str, Any]) -> dict[str, Any]:
        return await self._actor.prepare(payload)  # type: ignore[no-any-return]

    async def clock(self) -> int:
        return await self._actor.clock()  # type: ignore[no-any-return]

    async def run(self, t0_wall_ns: int | None, t0_parent_ns: int) -> dict[str, Any]:
        return await self._actor.run(t0_wall_ns, t0_parent_ns)  # type: ignore[no-any-return]

    async def progress(self) -> tuple[int, int]:
        return await self._actor.progress()  # type: ignore[no-any-return]

    async def stop(self) -> None:
        await self._actor.stop()

    async def abort(self) -> None:
        await self._actor.abort()
