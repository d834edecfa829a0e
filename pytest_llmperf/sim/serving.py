"""Serving the simulator's app on a port of 127.0.0.1, in the current event loop.

Kept apart from the app (server.py, over its bridge to the engine, bridge.py):
the app is the OpenAI endpoints and their streaming; this is the socket, its
runner and the shutdown that drops open streams at once. ``python -m
pytest_llmperf.sim`` and the plugin's child process (process.py) both serve
through :class:`SimServer`.
"""

from __future__ import annotations

from typing import Any

from aiohttp import web

from .bridge import EngineBridge
from .profiles import Profile, load_profile
from .server import SimApp

__all__ = ["SimServer"]


class SimServer:
    """The simulator serving HTTP in the current event loop.

    ``async with SimServer("fixed", ttft_ms=50, itl_ms=10) as sim: sim.url``.
    Keyword overrides are profile keys (see profiles.yaml); ``profile`` may also be
    a loaded :class:`Profile`. ``timing`` is how the
    last fraction of a millisecond before each planned token is waited for (see
    clock.py): ``spin`` (default here) keeps the loop serving a client that shares
    it; ``block`` (what the command line uses) burns no CPU but holds the loop.
    ``quiet_gc=True`` (what the command line uses) schedules the garbage collector
    away from planned token times while serving (gc_control.py); it changes
    process-wide settings, so leave it off in a process that does other work.
    """

    def __init__(
        self,
        profile: str | Profile = "fixed",
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        seed: int = 0,
        speedup: float = 1.0,
        record_emit_lag: bool = False,
        timing: str = "spin",
        quiet_gc: bool = False,
        **overrides: Any,
    ) -> None:
        if isinstance(profile, Profile):
            self.profile = profile.replace(**overrides) if overrides else profile
        else:
            self.profile = load_profile(profile, **overrides)
        self.timing = timing
        self.host = host
        self.port = port
        self.seed = seed
        self.speedup = speedup
        self.record_emit_lag = record_emit_lag
        self.quiet_gc = quiet_gc
        self.sim: EngineBridge | None = None  # the engine side: back end, counters, lags
        self.http: SimApp | None = None  # the HTTP surface over it
        self._runner: web.AppRunner | None = None

    @property
    def url(self) -> str:
        """Base URL, e.g. ``http://127.0.0.1:PORT`` (valid once started)."""
        if self._runner is None:
            raise RuntimeError("SimServer is not running")
        return f"http://{self.host}:{self.port}"

    @property
    def emit_lags(self) -> list[float]:
        """Actual minus planned emit time of each token, seconds (record_emit_lag=True)."""
        if self.sim is None or self.sim.emit_lags is None:
            raise RuntimeError("start the SimServer with record_emit_lag=True")
        return self.sim.emit_lags

    async def start(self) -> SimServer:
        self.sim = EngineBridge(
            self.profile,
            seed=self.seed,
            speedup=self.speedup,
            record_emit_lag=self.record_emit_lag,
            timing=self.timing,
            quiet_gc=self.quiet_gc,
        )
        self.http = SimApp(self.sim)
        # A simulator being stopped drops its open streams at once instead of waiting up to a
        # minute for them (aiohttp's default graceful shutdown).
        runner = web.AppRunner(
            self.http.app, handler_cancellation=True, access_log=None, shutdown_timeout=0.2
        )
        await runner.setup()
        site = web.TCPSite(runner, self.host, self.port)
        try:
            await site.start()
        except BaseException:
            await runner.cleanup()
            raise
        self._runner = runner
        self.port = runner.addresses[0][1]
        return self

    async def stop(self) -> None:
        if self._runner is not None:
            runner, self._runner = self._runner, None
            await runner.cleanup()

    async def __aenter__(self) -> SimServer:
        return await self.start()

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()
