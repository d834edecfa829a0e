"""What the history stores: one session's record going in, stored runs coming out.

A *comparison key* says which runs are comparable: the same test with the
same key measured the same experiment (endpoint model and API, load, and
workload less its size keys, which ``--llm-scale`` changes, its tokenizer by
identity: :func:`~pytest_llmperf.slo.comparable_runs.comparable_workload`). It
is a short stable hash, so it can be indexed and compared across sessions and
machines.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from pytest_llmperf.results.accumulator import MetricsAccumulator
from pytest_llmperf.slo.comparable_runs import SIZE_KEYS, comparable_workload
from pytest_llmperf.specs.gpu_names import GPU_METRICS, gpu_values
from pytest_llmperf.specs.process_names import PROCESS_METRICS, process_value

__all__ = [
    "SIZE_KEYS",  # the workload keys --llm-scale changes (slo/comparable_runs.py)
    "RunRecord",
    "SeriesPoint",
    "SessionInfo",
    "SessionRecord",
    "StoredRun",
    "comparison_key",
    "gpu_block_values",
    "metric_value",
    "process_block",
    "process_values",
    "run_metrics_with_gpu",
]


def comparison_key(
    model: str | None,
    api: str | None,
    load: Mapping[str, Any],
    workload: Mapping[str, Any],
    *,
    legacy: bool = False,
) -> str:
    """A 16-hex-digit hash of what makes runs comparable: model, API, load, workload
    (less ``requests``, ``duration_s``, ``warmup``; its tokenizer by identity, or with
    ``legacy`` by label, as runs stored before identities were keyed). Stable across
    processes and versions of Python: canonical JSON (sorted keys), SHA-256."""
    described = {
        "model": model or "",
        "api": api or "",
        "load": json.loads(json.dumps(dict(load), default=str)),
        "workload": comparable_workload(workload, legacy=legacy),
    }
    canonical = json.dumps(described, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()[:16]


def metric_value(metrics: Mapping[str, Any], metric: str, stat: str) -> float | None:
    """``metrics[metric][stat]`` for a latency metric (ms), ``metrics[metric]`` for a
    rate or a count (``stat`` ignored); None when absent or empty."""
    value = metrics.get(metric)
    if isinstance(value, Mapping):
        value = value.get(stat)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value)


def process_values(block: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """What the history keeps of a run's ``server_process`` block: its name, each process
    metric it measured by name (``{"startup.ready_s": 41.2, ...}``) and its exit's message
    (None while it lived); None without a block (a server the gate did not start)."""
    if not isinstance(block, Mapping):
        return None
    out: dict[str, Any] = {"name": block.get("name")}
    for name in PROCESS_METRICS:
        value = process_value(block, name)
        if value is not None:
            out[name] = value
    found = block.get("exit")
    out["exit"] = (found.get("message") or "exited") if isinstance(found, Mapping) else None
    return out


def process_block(values: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """:func:`process_values` back as a ``server_process``-shaped block (``startup`` and
    ``resources``), for what reads blocks (the baseline checks); None without values."""
    if not values:
        return None
    out: dict[str, Any] = {"name": values.get("name"), "startup": {}, "resources": {}}
    for name, metric in PROCESS_METRICS.items():
        value = values.get(name)
        if isinstance(value, int | float) and not isinstance(value, bool):
            out[metric.section][metric.key] = float(value)
    return out


def gpu_block_values(metrics: Mapping[str, Any]) -> dict[str, float] | None:
    """The GPU figures a stored run's ``metrics`` keep (``gpu.energy_j``,
    ``energy_per_output_token_j``, ...: plain numbers beside the client's metrics, put there
    from the run's ``gpu`` block by :func:`~pytest_llmperf.specs.gpu_names.gpu_values`), by
    name; None when it kept none (no GPU read, or stored before GPU figures)."""
    values = {
        name: float(value)
        for name in GPU_METRICS
        if isinstance(value := metrics.get(name), int | float) and not isinstance(value, bool)
    }
    return values or None


def run_metrics_with_gpu(metrics: Mapping[str, Any], run: Mapping[str, Any]) -> dict[str, Any]:
    """``metrics`` (what the history keeps of a run) with the run's GPU figures by name
    (plain numbers: ``"gpu.power_w.mean": 500.0``), so that they have trends, change points
    and a history baseline like any metric; unchanged for a run that read no GPU."""
    return {**dict(metrics), **(gpu_values(run.get("gpu")) or {})}


@dataclass(frozen=True)
class _RunFields:
    """What a run has going in and coming out: its test, run label, the test's
    outcome, its comparison key, its counts and its metric summary."""

    test: str
    label: str
    outcome: str
    key: str
    counts: dict[str, Any]
    metrics: dict[str, Any]


@dataclass(frozen=True)
class RunRecord(_RunFields):
    """One run of one test, as appended: ``state`` is the accumulator's
    :meth:`~pytest_llmperf.results.accumulator.MetricsAccumulator.to_state` (lossless)."""

    state: dict[str, Any]
    load: dict[str, Any] = field(default_factory=dict)
    workload: dict[str, Any] = field(default_factory=dict)
    # the server process's values over the run (process_values), None: not started by the gate
    process: dict[str, Any] | None = None


@dataclass(frozen=True)
class _SessionFields:
    """What a session has going in and coming out.

    ``started_at``/``finished_at``: UTC ISO-8601; ``tag``: ``--llm-history-tag`` or
    ``branch@commit``; ``endpoint``: URL without credentials, model, API, server
    version; ``machine``: hostname, platform, CPUs, Python; ``options``: the run options.
    """

    started_at: str
    finished_at: str
    tag: str
    endpoint: dict[str, Any]
    machine: dict[str, Any]
    options: dict[str, Any]


@dataclass(frozen=True)
class SessionRecord(_SessionFields):
    """One session, appended in one transaction by
    :meth:`~pytest_llmperf.history.store.HistoryStore.append_session`; ``fingerprint``:
    its server and machine fingerprint (:mod:`pytest_llmperf.server_metrics.fingerprint`), None
    when it has none; ``stopped``: why it stopped before load (the JSON report's
    ``session.stopped``), None when it ran its tests."""

    runs: list[RunRecord] = field(default_factory=list)
    fingerprint: dict[str, Any] | None = None
    stopped: dict[str, Any] | None = None


@dataclass(frozen=True, kw_only=True)
class SessionInfo(_SessionFields):
    """A stored session: its id (append order), what :class:`SessionRecord` held, and how
    many runs it stored (``fingerprint`` None: stored without one; ``stopped`` None: it ran
    its tests, else why it stopped before load)."""

    id: int
    run_count: int
    fingerprint: dict[str, Any] | None = None
    stopped: dict[str, Any] | None = None


@dataclass(frozen=True, kw_only=True)
class StoredRun(_RunFields):
    """A run read back: ``when`` is its session's ``started_at``; ``metrics`` the summary
    (the JSON report's ``metrics``); :meth:`accumulator` decodes the stored state;
    ``fingerprint`` is its session's (None: stored without one); ``process`` the server
    process's values (:func:`process_values`; None: the gate did not start its server)."""

    session_id: int
    when: str
    tag: str
    load: dict[str, Any]
    workload: dict[str, Any]
    state_json: str = field(repr=False, compare=False)
    fingerprint: dict[str, Any] | None = field(default=None, repr=False, compare=False)
    # the server process's values over the run (process_values; None: none stored)
    process: dict[str, Any] | None = field(default=None, repr=False, compare=False)
    _decoded: list[MetricsAccumulator] = field(
        default_factory=list, init=False, repr=False, compare=False
    )

    def state(self) -> dict[str, Any]:
        """The accumulator's stored state (a fresh dict each call)."""
        value: dict[str, Any] = json.loads(self.state_json)
        return value

    def accumulator(self) -> MetricsAccumulator:
        """The run's accumulator, HDR histograms included, decoded on first call."""
        if not self._decoded:
            self._decoded.append(MetricsAccumulator.from_state(self.state()))
        return self._decoded[0]

    def value(self, metric: str, stat: str = "p50") -> float | None:
        """One number of the summary (see :func:`metric_value`); a process metric's
        (``startup.ready_s``) from the run's stored process values."""
        if metric in PROCESS_METRICS:
            return metric_value(self.process or {}, metric, stat)
        return metric_value(self.metrics, metric, stat)


@dataclass(frozen=True)
class SeriesPoint:
    """One stored run's value of a metric: what trends and change points read."""

    session_id: int
    when: str
    tag: str
    value: float
    label: str = ""
    key: str = ""
