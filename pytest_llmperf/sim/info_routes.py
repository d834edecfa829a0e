"""The simulator's routes beside the APIs: what a client asks about the server.

``GET /v1/models`` (the served model and its LoRA adapters, as vLLM lists them),
``/health``, ``/version``, ``/metrics`` (vLLM's Prometheus names: prometheus.py; with
several engines their sum, then the simulator's own per-replica series), each
engine's own page ``/replicas/{name}/metrics`` and the listing of the pages,
``/llmperf/fleet`` (pages.py), the simulated GPUs' DCGM exporter page
``/llmperf/dcgm/metrics`` (dcgm_page.py) where the profile has GPUs, and,
where the back end has a prefix cache, vLLM's development-mode
``POST /reset_prefix_cache``. Apart from the APIs' handlers (server.py), which
they share nothing with but the bridge to the engine.
"""

from __future__ import annotations

import asyncio
import socket

from aiohttp import web

from .bridge import EngineBridge
from .dcgm_page import DCGM_PATH, render_dcgm
from .pages import FLEET_PATH, PAGE_PATH, fleet_listing
from .prometheus import render_metrics, render_replicas
from .wire import models_body

__all__ = ["SIM_VERSION", "InfoRoutes"]

SIM_VERSION = "pytest-llmperf-sim 0.1"
_HOSTNAME = socket.gethostname()  # the DCGM page's Hostname label, as the exporter's own


class InfoRoutes:
    """The handlers of the routes beside the APIs, over one simulator's bridge."""

    def __init__(self, sim: EngineBridge) -> None:
        self.sim = sim
        self.profile = sim.profile

    def routes(self) -> list[web.RouteDef]:
        """``GET /v1/models``, ``/health``, ``/version``, ``/metrics``, the listing, the
        engines' pages and, with GPUs, their DCGM page."""
        routes = [
            web.get("/v1/models", self.models),
            web.get("/health", self.health),
            web.get("/version", self.version),
            web.get("/metrics", self.metrics),
            web.get(FLEET_PATH, self.fleet),
            web.get(PAGE_PATH, self.page_metrics),
        ]
        if self.sim.gpu is not None:
            routes.append(web.get(DCGM_PATH, self.dcgm))
        return routes

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
        text = render_metrics(self.profile.model, sim.backend.stats(), sim.engines.whole_counters())
        if sim.fleet:
            names = [pg.name for pg in sim.pages]
            text += render_replicas(sim.engines.engine_stats(), sim.engines.routed(), names)
        return _text(text)

    async def page_metrics(self, request: web.Request) -> web.Response:
        """One engine's own page (pages.py); 404 for a name the listing does not have."""
        name = request.match_info["name"]
        for page in self.sim.pages:
            if page.name == name and page.path != "/metrics":
                stats = page.backend.stats()
                role = (page.role, page.name)
                return _text(
                    render_metrics(self.profile.model, stats, page.counters, page.engine, role)
                )
        raise web.HTTPNotFound(text=f"no engine page {name!r}; see {FLEET_PATH}")

    async def fleet(self, _request: web.Request) -> web.Response:
        """The listing of the engines' pages (pages.py)."""
        gpu_page = DCGM_PATH if self.sim.gpu is not None else None
        return web.json_response(fleet_listing(self.profile.router, self.sim.pages, gpu_page))

    async def dcgm(self, _request: web.Request) -> web.Response:
        """The simulated GPUs as NVIDIA's DCGM exporter writes them (dcgm_page.py)."""
        meter = self.sim.gpu
        assert meter is not None  # the route exists only with GPUs
        p = self.profile
        gpus = meter.read(asyncio.get_running_loop().time())
        return _text(render_dcgm(gpus, p.gpu_name, p.gpu_memory_mb, _HOSTNAME))

    async def reset_prefix_cache(self, _request: web.Request) -> web.Response:
        """vLLM's ``POST /reset_prefix_cache``: ``{"success": bool}``, false while blocks
        are in use (see :meth:`KVCache.reset_prefix_cache`)."""
        return web.json_response({"success": self.sim.reset_prefix_cache()})


def _text(text: str) -> web.Response:
    return web.Response(text=text, content_type="text/plain", charset="utf-8")
