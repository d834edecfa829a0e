"""A fleet's ``gpu`` pages (NVIDIA DCGM exporters) as the run's GPU reads.

A page of role ``gpu`` (``--llm-server-metrics=gpu=http://node:9400/metrics,...``, or
listed with that role by the simulator's ``/llmperf/fleet``) is probed and sampled like
every page of the list (:mod:`.fleet_source`, :mod:`.fleet_sampler`), but it describes
GPUs, not a server process: it is never an engine page (not in the fleet's whole, no
pool, no one-process rule, no prefix-cache reset). Its scrapes become one
:class:`~pytest_llmperf.gpu.run_figures.SourceReads` per page (source ``"dcgm URL"``;
each GPU's host from its ``Hostname`` label, else the page's name), which
:func:`~pytest_llmperf.gpu.run_figures.run_figures` turns into the run's ``gpu`` block.
"""

from __future__ import annotations

from collections.abc import Sequence

from pytest_llmperf.client.endpoint import redact_url
from pytest_llmperf.gpu.dcgm import dcgm_tick
from pytest_llmperf.gpu.run_figures import SourceReads
from pytest_llmperf.server_metrics.fleet_source import FleetPage
from pytest_llmperf.server_metrics.sampler import ServerMetricsRecording
from pytest_llmperf.specs.fleet_names import PageRole

__all__ = ["gpu_page_reads", "is_gpu_page"]


def is_gpu_page(page: FleetPage) -> bool:
    return page.spec.role is PageRole.GPU


def gpu_page_reads(
    pages: Sequence[FleetPage], recordings: Sequence[ServerMetricsRecording | None]
) -> list[SourceReads]:
    """Each ``gpu`` page of ``pages`` (with its run's recording, None: its probe failed)
    as the GPUs it read during the run; a page that gave nothing says why in ``notes``."""
    out: list[SourceReads] = []
    for page, recording in zip(pages, recordings, strict=True):
        if not is_gpu_page(page):
            continue
        source = f"dcgm {redact_url(page.spec.url)}"
        where = f"gpu page {page.spec.name}"
        if recording is None:
            out.append(SourceReads(source, notes=[f"{where}: no numbers ({page.failure})"]))
            continue
        reads = SourceReads(source, interval_s=recording.source.interval_s)
        for scrape in recording.scrapes:
            tick = dcgm_tick(
                {**scrape.gauges, **scrape.counters}, scrape.at_ns, page=page.spec.name
            )
            if tick.readings:
                reads.ticks.append(tick)
        failed = recording.failures
        if failed:
            reads.notes.append(
                f"{where}: {len(failed)} of {len(recording.attempts)} scrapes failed "
                f"(first: {failed[0].failure})"
            )
        if not reads.ticks and recording.scrapes:
            reads.notes.append(f"{where}: no DCGM_FI_DEV_* series on the page (not a DCGM page?)")
        out.append(reads)
    return out
