"""The simulator's routes beside the APIs: what a client asks about the server.

``GET /v1/models`` (the served model and its LoRA adapters, as vLLM lists them),
``/health``, ``/version``, ``/metrics`` (vLLM's Prometheus names: prometheus.py; with
several replicas their sum, then the simulator's own per-replica series) and,
where the back end has a prefix cache, vLLM's development-mode
``POST /reset_prefix_cache``. Apart from the APIs' handlers (server.py), which
they share nothing with but the bridge to the engine.
"""

from __future__ import annotations

from aiohttp import web

from .bridge import EngineBridge
from .prometheus import render_metrics, render_replicas
from .wire import models_body

__all__ = ["SIM_VERSION", "InfoRoutes"]

SIM_VERSION = "pytest-llmperf-sim 0.1"


class InfoRoutes:
    """The handlers of the routes beside the APIs, over one simulator's bridge."""

    def __init__(self, sim: EngineBridge) -> None:
        self.sim = sim
        self.profile = sim.profile

    def routes(self) -> list[web.RouteDef]:
        """``GET /v1/models``, ``/health``, ``/version``, ``/metrics``."""
        return [
            web.get("/v1/models", self.models),
            web.get("/health", self.health),
            web.get("/version", self.version),
            web.get("/metrics", self.metrics),
        ]

    def cache_routes(self) -> list[web.RouteDef]:
        """vLLM's (development mode) reset, where there is a cache to reset."""
        if not self.sim.has_prefix_cache:
            return []
        return [web.post("/reset_prefix_cache", self.reset_prefix_cache)]

    async def models(self, _request: web.Request) -> web.Response:
        p = self.profile
        return web.json_response(models_body(p.model, p.max_model_len, p.lora_adapters))

    async def health(self, _request: web.Request) -> web.Response:
        return web.Response(status=200)

    async def version(self, _request: web.Request) -> web.Response:
        return web.json_response({"version": SIM_VERSION, "profile": self.profile.name})

    async def metrics(self, _request: web.Request) -> web.Response:
        sim = self.sim
        text = render_metrics(self.profile.model, sim.backend.stats(), sim.counters)
        if sim.replicas is not None and sim.router is not None:
            text += render_replicas(sim.replicas.replica_stats(), sim.router.routed)
        return web.Response(text=text, content_type="text/plain", charset="utf-8")

    async def reset_prefix_cache(self, _request: web.Request) -> web.Response:
        """vLLM's ``POST /reset_prefix_cache``: ``{"success": bool}``, false while blocks
        are in use (see :meth:`KVCache.reset_prefix_cache`)."""
        return web.json_response({"success": self.sim.reset_prefix_cache()})
