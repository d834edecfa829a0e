"""The simulator's engines: one, several replicas, or prefill and decode pools, with pages.

What a profile's ``replicas``, ``prefill_replicas`` and ``decode_replicas`` build,
kept apart from the bridge to the engine (bridge.py), which only submits to the
back end this gives it: the engines (each a back end of its own, realtime.py or
fixed.py, with the slow-replica fault on the one the profile names, slow.py),
the back end that serves them as one (replicas.py, disagg.py), the embedded
router(s) in front (router.py: a disaggregated fleet routes each request twice,
in the prefill pool and in the decode pool) and each engine's page (pages.py):
its counters, its token paths, its name. One engine is the back end itself and its
only page is the simulator's ``/metrics``: the single-server path, unchanged.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..apis.server_wire import ParsedRequest
from .disagg import DisaggBackend
from .fixed import FixedBackend
from .gc_control import GcControl
from .kv_cache import prompt_block_hashes
from .pages import PAGE_PATH, PAGE_START_STEP_S, Placement, SimPage
from .profiles import Profile
from .prometheus import ServerCounters
from .replicas import ReplicaSet, prefix_cache_of
from .router import Router, RoutingPolicy
from .slow import SlowRequests
from .streams import Backend, BackendStats
from .token_paths import TokenPaths

__all__ = ["SimFleet", "engine_fields", "make_backend"]


def make_backend(
    profile: Profile,
    seed: int,
    speedup: float,
    timing: str = "block",
    gc_control: GcControl | None = None,
    slow: SlowRequests | None = None,
) -> Backend:
    """The back end a profile asks for (``slow``: the slow-replica fault on this one)."""
    if profile.kind == "fixed":
        return FixedBackend(profile, speedup, timing, slow)
    from .realtime import EngineBackend

    return EngineBackend(
        profile, seed=seed, speedup=speedup, timing=timing, gc_control=gc_control, slow=slow
    )


class SimFleet:
    """The engines of one simulator, their router(s) and pages."""

    def __init__(
        self,
        profile: Profile,
        seed: int,
        speedup: float,
        timing: str,
        gc: GcControl | None,
        counters: ServerCounters,
        paths: TokenPaths,
    ) -> None:
        self.profile = profile
        self.seed = seed
        self.speedup = speedup
        self.timing = timing
        self.gc = gc
        self.counters = counters  # the simulator's own (its /metrics, its errors)
        self.emit_planned = paths.emit_planned
        self.router: Router | None = None
        self.prefill_router: Router | None = None  # disaggregated: the prefill pool's
        self.replicas: ReplicaSet | None = None
        self.disagg: DisaggBackend | None = None
        self.backend: Backend
        self.pages: list[SimPage] = []
        if profile.disaggregated:
            self._build_disaggregated()
        elif profile.replicas > 1:
            self._build_replicas()
        else:
            self.backend = self._engine(0)
            self.pages = [SimPage("replica", "0", "/metrics", self.backend, counters, paths, "0")]

    def _slow(self, engine: int) -> SlowRequests | None:
        """The slow-replica fault (slow.py) for engine ``engine`` (in page order)."""
        p = self.profile
        if p.slow_replica != engine or p.slow_factor == 1.0:
            return None
        return SlowRequests(p.slow_factor, p.slow_share)

    def _page(self, role: str, name: str, index: int, backend: Backend) -> SimPage:
        counters = ServerCounters(started=self.counters.started + PAGE_START_STEP_S * (index + 1))
        paths = TokenPaths(counters, self.emit_planned, self.timing)
        path = PAGE_PATH.format(name=name)
        return SimPage(role, name, path, backend, counters, paths, str(index))

    def _engine(self, index: int) -> Backend:
        p = self.profile
        return make_backend(p, self.seed, self.speedup, self.timing, self.gc, self._slow(index))

    def _build_replicas(self) -> None:
        p = self.profile
        engines = [self._engine(i) for i in range(p.replicas)]
        self.pages = [self._page("replica", str(i), i, e) for i, e in enumerate(engines)]
        self.replicas = ReplicaSet(engines)
        self.backend = self.replicas
        self.router = Router(p.replicas, p.router, p.router_header, self.replicas)

    def _build_disaggregated(self) -> None:
        p = self.profile
        n_p, n_d = p.prefill_replicas, p.decode_replicas
        engines = [self._engine(i) for i in range(n_p + n_d)]
        self.pages = [self._page("prefill", f"p{i}", i, e) for i, e in enumerate(engines[:n_p])] + [
            self._page("decode", f"d{i}", n_p + i, e) for i, e in enumerate(engines[n_p:])
        ]
        self.disagg = DisaggBackend(
            engines[:n_p],
            engines[n_p:],
            prefill_counters=[pg.counters for pg in self.pages[:n_p]],
            decode_counters=[pg.counters for pg in self.pages[n_p:]],
            block_size=p.block_size,
            transfer_s_per_block=p.kv_transfer_us_per_block * 1e-6 / self.speedup,
            timing=self.timing,
        )
        self.backend = self.disagg
        self.prefill_router = Router(n_p, p.router, p.router_header, self.disagg.prefill)
        self.router = Router(n_d, p.router, p.router_header, self.disagg.view)

    @property
    def several(self) -> bool:
        """Several engines: each answer names its engine, each engine has its own page."""
        return self.router is not None

    def whole_counters(self) -> ServerCounters:
        """The counters of the simulator's own ``/metrics``: its only engine's, or every
        engine's page summed (with the front end's own errors and start time)."""
        if not self.several:
            return self.counters
        return ServerCounters.merged([pg.counters for pg in self.pages], self.counters)

    def engine_stats(self) -> list[BackendStats]:
        """Each page's engine's own stats, in page order."""
        return [pg.backend.stats() for pg in self.pages]

    def routed(self) -> list[int]:
        """Requests the router sent to each page's engine, in page order."""
        if self.router is None:
            return []
        before = self.prefill_router.routed if self.prefill_router is not None else []
        return before + self.router.routed

    @property
    def has_prefix_cache(self) -> bool:
        """Whether there is a prefix cache to reset (vLLM's development route)."""
        return all(prefix_cache_of(pg.backend) is not None for pg in self.pages)

    def reset_prefix_cache(self) -> bool:
        """Reset every engine's prefix cache (see :meth:`KVCache.reset_prefix_cache`); True
        only if all did (one that cannot keeps its cache, as one vLLM engine would)."""
        caches = [prefix_cache_of(pg.backend) for pg in self.pages]
        done = [kv.reset_prefix_cache() for kv in caches if kv is not None]
        return bool(done) and all(done)

    def route(
        self, headers: Mapping[str, str], body: Any, parsed: ParsedRequest | None
    ) -> Placement | None:
        """Where this request is served (router.py), None with one engine. ``parsed`` (None:
        it could not be parsed) gives ``prefix_aware`` its prompt's block hashes."""
        router = self.router
        if router is None:
            return None
        hashes: tuple[int, ...] = ()
        if router.policy is RoutingPolicy.PREFIX_AWARE and parsed is not None:
            p = self.profile
            adapter = parsed.model if parsed.model != p.model else None
            hashes = prompt_block_hashes(parsed.prompt_tokens, p.block_size, adapter)
        if self.prefill_router is None:
            i = router.route(headers, body, hashes)
            return Placement(i, self.pages[i].name, i)
        pre = self.prefill_router.route(headers, body, hashes)
        d = router.route(headers, body, hashes)
        page = self.profile.prefill_replicas + d
        return Placement(page, self.pages[page].name, d, pre, self.pages[pre].name)

    def page_of(self, placement: Placement | None) -> SimPage:
        """The page of the engine that answers a request placed at ``placement``."""
        return self.pages[0] if placement is None else self.pages[placement.page]


def engine_fields(placement: Placement | None) -> tuple[int, int]:
    """A submission's ``replica`` and ``decode`` for a request placed at ``placement``."""
    if placement is None:
        return 0, -1
    if placement.prefill >= 0:
        return placement.prefill, placement.replica
    return placement.replica, -1
