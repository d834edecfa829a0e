"""Sampling a fleet's pages around and during one run: one sampler per page.

:class:`FleetSampler` runs a :class:`~.sampler.ServerMetricsSampler` for every page
that answered its probe (each in its own daemon thread, with every behaviour of a
single page: start, interval and end scrapes, failures recorded, the run never
slowed), started and stopped together so that the pages' windows line up. The
:class:`FleetRecording` it returns summarises any window of the run as a
:class:`~.fleet.FleetMetrics`: each page's own summary (a page whose probe failed is
missing with the probe's reason), each role's pool and the whole
(:mod:`.fleet_merge`).
"""

from __future__ import annotations

import asyncio
import functools
import threading
from collections.abc import Callable
from dataclasses import dataclass

from pytest_llmperf.client.endpoint import Endpoint, redact_url
from pytest_llmperf.gpu.run_figures import SourceReads
from pytest_llmperf.server_metrics.fleet import FleetMetrics, PageMetrics
from pytest_llmperf.server_metrics.fleet_merge import fleet_metrics
from pytest_llmperf.server_metrics.fleet_source import FleetPage, FleetSource
from pytest_llmperf.server_metrics.gpu_pages import gpu_page_reads, is_gpu_page
from pytest_llmperf.server_metrics.sampler import ServerMetricsRecording, ServerMetricsSampler
from pytest_llmperf.server_metrics.source import SCRAPE_LIMIT_S
from pytest_llmperf.server_metrics.summary import ServerMetrics

__all__ = ["FleetRecording", "FleetSampler"]


@dataclass
class FleetRecording:
    """Every page's recording of one run (None for a page whose probe failed); the
    engine pages make the fleet (:meth:`summary`), the ``gpu`` pages the GPU reads
    (:meth:`gpu_reads`)."""

    source: FleetSource
    recordings: list[ServerMetricsRecording | None]

    def summary(self, t0_ns: int, window_ns: tuple[int, int] | None = None) -> FleetMetrics:
        """The fleet over the run (``window_ns`` None) or a window of it (each page as
        :meth:`~.sampler.ServerMetricsRecording.summary` has it)."""
        pages = [
            PageMetrics(page.spec.role, page.spec.name, _page(page, recording, t0_ns, window_ns))
            for page, recording in zip(self.source.pages, self.recordings, strict=True)
            if not is_gpu_page(page)  # a GPU exporter's page is no engine's (gpu_pages.py)
        ]
        return fleet_metrics(
            pages, discovered=self.source.discovered, notes=list(self.source.notes)
        )

    def gpu_reads(self) -> list[SourceReads]:
        """The ``gpu`` pages' reads of the run (:mod:`.gpu_pages`; empty: none listed)."""
        return gpu_page_reads(self.source.pages, self.recordings)


def _page(
    page: FleetPage,
    recording: ServerMetricsRecording | None,
    t0_ns: int,
    window_ns: tuple[int, int] | None,
) -> ServerMetrics:
    if recording is None:
        return ServerMetrics(source=redact_url(page.spec.url), missing=page.failure)
    return recording.summary(t0_ns, window_ns)


class FleetSampler:
    """Samples every live page of ``source`` around and during one run: ``start()``, the
    run, ``stop()`` (each blocks briefly, the pages together; from a coroutine:
    :meth:`astart` / :meth:`astop`). Runs once."""

    def __init__(
        self, endpoint: Endpoint, source: FleetSource, *, scrape_limit_s: float = SCRAPE_LIMIT_S
    ) -> None:
        self.source = source
        self.samplers: list[ServerMetricsSampler | None] = [
            ServerMetricsSampler(endpoint, page.source, scrape_limit_s=scrape_limit_s)
            if page.source is not None
            else None
            for page in source.pages
        ]

    def start(self) -> None:
        """Start every page's sampler at once; returns when each has its first scrape (or
        has waited its most for it)."""
        _together([s.start for s in self.samplers if s is not None])

    def stop(self) -> FleetRecording:
        """Stop every page's sampler at once (each takes its end scrape)."""
        out: list[ServerMetricsRecording | None] = [None] * len(self.samplers)

        def stopper(k: int, sampler: ServerMetricsSampler) -> None:
            out[k] = sampler.stop()

        calls: list[Callable[[], None]] = [
            functools.partial(stopper, k, s) for k, s in enumerate(self.samplers) if s is not None
        ]
        _together(calls)
        return FleetRecording(self.source, out)

    async def astart(self) -> None:
        await asyncio.to_thread(self.start)

    async def astop(self) -> FleetRecording:
        return await asyncio.to_thread(self.stop)


def _together(calls: list[Callable[[], None]]) -> None:
    """Run ``calls`` each in a thread of its own and wait for all (one: here)."""
    if len(calls) == 1:
        calls[0]()
        return
    threads = [threading.Thread(target=c, name="llmperf-fleet", daemon=True) for c in calls]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
