"""The outcome of one load-generator run, as tests and reports see it."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from pytest_llmperf.metrics.accumulator import LATENCY_METRICS, RATE_METRICS, MetricsAccumulator
from pytest_llmperf.metrics.histogram import LatencyHistogram

__all__ = ["RunResult"]


@dataclass
class RunResult:
    """One run: its configuration, its measurements and the generator's self-check.

    ``metrics["ttft"]`` etc. are :class:`LatencyHistogram` (``.p(99)`` in ms,
    ``.mean``, ``.max``, ``.count``); ``metrics["error_rate"]`` etc. are floats.
    ``self_check["generator_bound"]`` is true when the load generator, not
    the server, limited the run; verdicts on such a run are inconclusive.
    ``stop_reason`` says why issuing ended (``completed``, ``duration``,
    ``stop()``, ``SIGINT``, ``cancelled``); ``events_path`` is the run's
    event log (``--llm-events``), re-analysable with
    :func:`pytest_llmperf.metrics.event_log.analyse_event_log`.
    """

    workload: dict[str, Any]
    load: dict[str, Any]
    endpoint: dict[str, Any]
    accumulator: MetricsAccumulator
    self_check: dict[str, Any] = field(default_factory=dict)
    started_at: str = ""
    duration_s: float = 0.0
    interrupted: bool = False
    label: str = ""
    gated: bool = True
    stop_reason: str = ""
    events_path: str | None = None

    @property
    def metrics(self) -> Mapping[str, LatencyHistogram | float]:
        out: dict[str, LatencyHistogram | float] = {
            name: self.accumulator.histograms[name] for name in LATENCY_METRICS
        }
        out["tpot_token_weighted"] = self.accumulator.histograms["tpot_token_weighted"]
        for name in RATE_METRICS:
            out[name] = self.accumulator.rate(name)
        return out

    @property
    def counts(self) -> dict[str, int]:
        return self.accumulator.counts()

    @property
    def errors(self) -> dict[str, int]:
        return dict(self.accumulator.errors)

    def to_dict(self) -> dict[str, Any]:
        """The JSON report's ``runs[]`` entry."""
        return {
            "label": self.label,
            "load": self.load,
            "workload": self.workload,
            "counts": self.counts,
            "metrics": self.accumulator.summary(),
            "errors": self.errors,
            "self_check": self.self_check,
            "started_at": self.started_at,
            "duration_s": round(self.duration_s, 6),
            "interrupted": self.interrupted,
            "stop_reason": self.stop_reason,
            "events": self.events_path,
            "gated": self.gated,
        }
