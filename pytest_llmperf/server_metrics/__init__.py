"""The server's own metrics over a run: scraped from Prometheus ``/metrics`` or read from
the timings each response carries, mapped to common ``server.*`` names per server family.

Modules, in the order data flows through them (each has one job):

- :mod:`.source`: ``--llm-server-metrics`` and the page it names, probed once at
  preflight (:func:`resolve_source`); every scrape's one bounded read;
- :mod:`.sampler`: :class:`ServerMetricsSampler`, a daemon thread that scrapes at a
  run's start, every interval during it and at its end, and the
  :class:`ServerMetricsRecording` it returns;
- :mod:`.exposition`: a page parsed by ``prometheus_client``'s parser into a
  :class:`~.exposition.Scrape` (or why it is not Prometheus text);
- :mod:`.families`: which server wrote a page, and the table of where each common
  name comes from per family (:data:`~.families.MAPPINGS`);
- :mod:`.deltas`: a window's numbers from cumulative scrapes (bucket-delta
  percentiles, counter deltas, gauge statistics) and the same-process rule;
- :mod:`.summarise`: a window of scrapes under the common names;
- :mod:`.summary`: :class:`ServerMetrics`, what verdicts and reports read;
- the same names from each response's own server timings (vLLM's per-request
  ``metrics``, llama.cpp's ``timings``) and the client's TTFT split are read off a run's
  accumulator: :mod:`pytest_llmperf.results.server_per_request`, a floor above;
- a fleet (``--llm-server-metrics=ROLE=URL,...``, ``@FILE``, ``discover=URL``; docs/fleets.md):
  :mod:`.page_list` (the option's list of pages), :mod:`.discovery` (a router asked for its
  workers), :mod:`.fleet_source` (every page probed at preflight; :func:`resolve_metrics`
  for every form of the option), :mod:`.fleet_sampler` (one sampler per page),
  :mod:`.fleet_merge` (the pages' summaries as each role's pool and the whole),
  :mod:`.fleet_reset` (``--llm-reset-cache``: each engine's server, not the router),
  :mod:`.gpu_pages` (the ``gpu`` pages, NVIDIA DCGM exporters: never engine pages, their
  GPUs the run's ``runs[].gpu``; docs/gpu.md) and :mod:`.fleet` (what a run keeps:
  ``runs[].fleet``);
- :mod:`.cache_reset`: ``--llm-reset-cache``, the server's prefix cache emptied before a
  gated run where it offers that;
- :mod:`.fingerprint`: which server, configured how, measured from where (baselines and
  history compare it).

See docs/server-metrics.md.
"""

from __future__ import annotations

from pytest_llmperf.server_metrics.cache_reset import CacheReset, reset_prefix_cache
from pytest_llmperf.server_metrics.exposition import Scrape, ScrapeFailure, parse_scrape
from pytest_llmperf.server_metrics.families import MAPPINGS, detect_family
from pytest_llmperf.server_metrics.fingerprint import (
    comparability,
    fingerprint_diff,
    session_fingerprint,
)
from pytest_llmperf.server_metrics.fleet import FleetMetrics, PageMetrics, PageSpec
from pytest_llmperf.server_metrics.fleet_sampler import FleetRecording, FleetSampler
from pytest_llmperf.server_metrics.fleet_source import (
    FleetSource,
    MetricsSource,
    resolve_fleet,
    resolve_metrics,
)
from pytest_llmperf.server_metrics.sampler import ServerMetricsRecording, ServerMetricsSampler
from pytest_llmperf.server_metrics.source import (
    MetricsOption,
    ServerMetricsSource,
    metrics_url,
    parse_option,
    resolve_source,
)
from pytest_llmperf.server_metrics.summarise import summarise_window
from pytest_llmperf.server_metrics.summary import (
    COMMON_METRICS,
    LATENCY_STATS,
    MetricKind,
    ServerFamily,
    ServerMetrics,
    metric_kind,
)

__all__ = [
    "COMMON_METRICS",
    "LATENCY_STATS",
    "MAPPINGS",
    "CacheReset",
    "FleetMetrics",
    "FleetRecording",
    "FleetSampler",
    "FleetSource",
    "MetricKind",
    "MetricsOption",
    "MetricsSource",
    "PageMetrics",
    "PageSpec",
    "Scrape",
    "ScrapeFailure",
    "ServerFamily",
    "ServerMetrics",
    "ServerMetricsRecording",
    "ServerMetricsSampler",
    "ServerMetricsSource",
    "comparability",
    "detect_family",
    "fingerprint_diff",
    "metric_kind",
    "metrics_url",
    "parse_option",
    "parse_scrape",
    "reset_prefix_cache",
    "resolve_fleet",
    "resolve_metrics",
    "resolve_source",
    "session_fingerprint",
    "summarise_window",
]
