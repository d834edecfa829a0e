"""A fleet's pages, probed once at preflight: :class:`FleetSource`.

``--llm-server-metrics`` as a list of pages (:mod:`.page_list`) is resolved here: a
``discover=URL`` router is asked for its workers (:mod:`.discovery`), then every page
is read once, all at once (each within the probe's limit), exactly as a single page is
(:func:`~.source.resolve_source`): a page that answers Prometheus text gets its own
:class:`~.source.ServerMetricsSource` (and later its own sampler); one that does not
keeps its reason, and the run's fleet shows it missing with that reason. Never an
error: server metrics explain a run, they never decide whether it can happen.

:func:`resolve_metrics` is the session's one entry point for every form of the option.
"""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from pytest_llmperf.client.endpoint import Endpoint
from pytest_llmperf.client.preflight_result import Outcome
from pytest_llmperf.server_metrics.discovery import discover_pages
from pytest_llmperf.server_metrics.exposition import ScrapeFailure
from pytest_llmperf.server_metrics.families import family_of
from pytest_llmperf.server_metrics.fleet import PageSpec
from pytest_llmperf.server_metrics.page_list import ENDPOINT, page_name
from pytest_llmperf.server_metrics.source import (
    DEFAULT_INTERVAL_S,
    PROBE_LIMIT_S,
    ServerMetricsSource,
    metrics_client,
    metrics_url,
    parse_option,
    resolve_source,
    scrape_once,
    scraped,
)
from pytest_llmperf.server_metrics.summary import ServerFamily
from pytest_llmperf.specs.fleet_names import PageRole

__all__ = ["FleetPage", "FleetSource", "MetricsSource", "resolve_fleet", "resolve_metrics"]

_PROBE_THREADS = 8  # pages probed at once


@dataclass(frozen=True, slots=True)
class FleetPage:
    """One page of a fleet: its place (``spec``), its source when the probe read Prometheus
    text, else why not (``failure``)."""

    spec: PageSpec
    source: ServerMetricsSource | None = None
    failure: str | None = None

    def describe(self) -> str:
        """``replica 0 (sim)``; ``gpu node-a (dcgm)``; ``replica w2 (none: GET
        http://w2:8001/metrics: 404)``."""
        if self.source is None:
            what = f"none: {self.failure}"
        elif self.spec.role is PageRole.GPU:  # a GPU exporter's page: no server family
            what = "dcgm"
        else:
            what = self.source.family.value
        return f"{self.spec.role.value} {self.spec.name} ({what})"


@dataclass(frozen=True, slots=True)
class FleetSource:
    """A fleet's pages, as the preflight found them: ``pages`` in the order given (then
    discovered), ``interval_s`` between samples, ``discovered`` (how the list was found,
    None: given), ``notes`` (what discovery said)."""

    pages: tuple[FleetPage, ...]
    interval_s: float = DEFAULT_INTERVAL_S
    discovered: str | None = None
    notes: tuple[str, ...] = ()
    # one server page and the GPU pages its server lists (``auto`` on the simulator):
    # reported as one page, no ``runs[].fleet`` (:func:`resolve_metrics`)
    engine_alone: bool = False

    @property
    def live(self) -> list[FleetPage]:
        """The pages that answered their probe (each sampled during a run)."""
        return [p for p in self.pages if p.source is not None]

    def describe(self) -> str:
        """What the session header says: ``fleet of 3 pages: router r:9000 (unknown),
        replica 0 (sim), replica 1 (sim) every 1 s``; one server page and its GPU pages:
        ``sim at http://h:8000/metrics every 1 s, and its GPU page gpu dcgm (dcgm)``."""
        if self.engine_alone and self.pages and self.pages[0].source is not None:
            gpus = ", ".join(p.describe() for p in self.pages[1:])
            return f"{self.pages[0].source.describe()}, and its GPU pages: {gpus}"
        found = f" (discovered: {self.discovered})" if self.discovered else ""
        pages = ", ".join(p.describe() for p in self.pages)
        n = len(self.pages)
        return (
            f"fleet of {n} page{'s' if n != 1 else ''}{found}: {pages} every {self.interval_s:g} s"
        )


MetricsSource = ServerMetricsSource | FleetSource


def resolve_metrics(
    endpoint: Endpoint,
    option: str,
    *,
    limit_s: float = PROBE_LIMIT_S,
    answered: Outcome | None = None,
) -> tuple[MetricsSource | None, str]:
    """The session's source for any ``--llm-server-metrics`` and the header's note: one page
    (:func:`~.source.resolve_source`, unchanged) or a fleet (:func:`resolve_fleet`)."""
    parsed = parse_option(option)
    if parsed.mode != "fleet":
        source, note = resolve_source(endpoint, option, limit_s=limit_s, answered=answered)
        if parsed.mode == "auto" and source is not None and source.family is ServerFamily.SIM:
            with_gpus = _with_listed_gpu_pages(endpoint, source, limit_s, answered)
            if with_gpus is not None:
                return with_gpus, with_gpus.describe()
        return source, note
    fleet = resolve_fleet(endpoint, option, limit_s=limit_s, answered=answered)
    return fleet, fleet.describe()


def _with_listed_gpu_pages(
    endpoint: Endpoint,
    source: ServerMetricsSource,
    limit_s: float,
    answered: Outcome | None,
) -> FleetSource | None:
    """``auto`` on the simulator: its own page and the GPU pages it lists (a profile with
    ``gpus:`` serves a DCGM exporter's page, docs/simulator.md), read as one server with
    its GPUs; None where it lists none. Only the simulator is asked (its family says so):
    a real server is never sent a request it did not ask for."""
    found = discover_pages(endpoint, endpoint.base_url, limit_s=limit_s)
    gpus = [p for p in found.pages if p.role is PageRole.GPU]
    if not gpus:
        return None
    specs = [PageSpec(PageRole.REPLICA, page_name(source.url), source.url), *gpus]
    pages = _probed(endpoint, specs, source.interval_s, limit_s, answered)
    return FleetSource(pages, source.interval_s, engine_alone=True)


def resolve_fleet(
    endpoint: Endpoint,
    option: str,
    *,
    limit_s: float = PROBE_LIMIT_S,
    answered: Outcome | None = None,
) -> FleetSource:
    """The pages of a list-of-pages ``option``, each probed once (at once, within
    ``limit_s`` each); ``answered``: the endpoint's own ``/metrics`` as the preflight read
    it, not asked again where it is one of the pages."""
    parsed = parse_option(option)
    assert parsed.pages is not None, "resolve_fleet takes a list of pages"
    specs = list(parsed.pages.pages)
    discovered = None
    notes: list[str] = []
    if parsed.pages.discover is not None:
        where = parsed.pages.discover
        router = endpoint.base_url if where == ENDPOINT else where
        alone = PageRole.REPLICA if where == ENDPOINT else PageRole.ROUTER
        found = discover_pages(endpoint, router, limit_s=limit_s, unlisted=alone)
        discovered = found.said
        notes.extend(found.notes)
        names = {s.name for s in specs}
        for spec in found.pages:
            if spec.name in names:
                notes.append(f"discovered page {spec.name!r} is also given: the given one kept")
                continue
            specs.append(spec)
    own = metrics_url(endpoint.base_url)
    if specs and all(s.role is PageRole.GPU for s in specs):
        # GPU exporters' pages alone: the endpoint's own /metrics stays the server's page
        name = page_name(own)
        name = "endpoint" if name in {s.name for s in specs} else name
        specs.insert(0, PageSpec(PageRole.REPLICA, name, own))
        notes.append("only gpu pages given: the endpoint's own /metrics is the server's page")

    if not specs:
        notes.append("no page to read: the fleet has no numbers")
    pages = _probed(endpoint, specs, parsed.interval_s, limit_s, answered)
    return FleetSource(pages, parsed.interval_s, discovered, tuple(notes))


def _probed(
    endpoint: Endpoint,
    specs: list[PageSpec],
    interval_s: float,
    limit_s: float,
    answered: Outcome | None,
) -> tuple[FleetPage, ...]:
    """Each page probed once, at once, within ``limit_s``; the endpoint's own ``/metrics``
    taken from ``answered`` (the preflight's read) where it is one of them."""
    own = metrics_url(endpoint.base_url)

    def probe(spec: PageSpec) -> FleetPage:
        if answered is not None and spec.url == own:
            got = scraped(spec.url, answered, time.monotonic_ns())
        else:
            with metrics_client(endpoint, spec.url, limit_s) as client:
                got = scrape_once(client, spec.url, retry=True)
        if isinstance(got, ScrapeFailure):
            return FleetPage(spec, failure=got.reason)
        return FleetPage(spec, ServerMetricsSource(spec.url, interval_s, family_of(got)))

    if not specs:
        return ()
    with ThreadPoolExecutor(min(_PROBE_THREADS, len(specs)), "llmperf-fleet-probe") as pool:
        return tuple(pool.map(probe, specs))
