"""What a test's runs are judged against, and the one loop that judges them.

Two sources answer ``--llm-baseline-compare``: a baseline file
(:class:`~pytest_llmperf.reports.baseline.Baseline`) and the history store
(:class:`~pytest_llmperf.history.gate.HistoryGate`). They differ only in where
each run's reference accumulator comes from (the file's run with the same label;
the merged last N comparable stored runs), so that is all a source says
(:meth:`BaselineSource.references`); :meth:`BaselineSource.compare` is shared:
ungated runs skipped, a run without a reference (none stored, or one that measured
another experiment: :mod:`~pytest_llmperf.slo.comparable_runs`) an inconclusive
check naming why and every differing field, every other run judged by the
threshold + significance rule
(:func:`~pytest_llmperf.slo.regression.compare_accumulators`; each replica's where
``--llm-baseline-threshold`` names a ``replica.*``: :mod:`~pytest_llmperf.slo.replica_regression`),
and the server process's
startup and resources (:mod:`~pytest_llmperf.slo.startup_regression`) and the GPUs'
figures named in ``--llm-baseline-threshold`` (:mod:`~pytest_llmperf.slo.gpu_regression`)
where the source kept them. An inconclusive
check is an inconclusive verdict of its test, which follows ``--llm-inconclusive``
(it fails by default: a baseline that was not compared judged nothing).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from pytest_llmperf.results.accumulator import MetricsAccumulator
from pytest_llmperf.results.run_result import RunResult
from pytest_llmperf.slo.gpu_regression import compare_gpu
from pytest_llmperf.slo.output_match import OtherOutputs
from pytest_llmperf.slo.quantile_bounds import DEFAULT_CONFIDENCE
from pytest_llmperf.slo.regression import (
    DEFAULT_ALPHA,
    RegressionCheck,
    Thresholds,
    compare_accumulators,
    inconclusive_check,
)
from pytest_llmperf.slo.replica_regression import compare_replicas
from pytest_llmperf.slo.server_regression import compare_server_metrics
from pytest_llmperf.slo.startup_regression import compare_process
from pytest_llmperf.specs.gpu_names import gpu_values

__all__ = ["BaselineSource", "Reference", "not_comparable", "with_differences"]


def not_comparable(differs: Sequence[str]) -> str:
    """The reason of a run not compared because it measured another experiment."""
    return "not comparable: " + "; ".join(differs) + " (baseline -> now)"


def with_differences(noted: Mapping[str, Any] | None, differs: Sequence[str]) -> dict[str, Any]:
    """The fingerprint's comparability ``noted`` with the run's own ``differs`` first:
    ``comparable`` false, every difference listed once."""
    fingerprint = [str(d) for d in (noted or {}).get("differs") or ()]
    both = list(dict.fromkeys([*differs, *fingerprint]))
    return {**dict(noted or {}), "comparable": False, "differs": both}


@dataclass(frozen=True)
class Reference:
    """What one run is compared with: ``accumulator`` and what it is (``compared_with``,
    named on every check), or no accumulator and the ``reason`` (an inconclusive note).
    ``comparability``: whether it was measured on the same server configuration
    (``{"comparable": bool | None, "differs": [...]}``, copied onto every check), None
    when no fingerprint was compared."""

    compared_with: str
    accumulator: MetricsAccumulator | None = None
    reason: str = ""
    comparability: Mapping[str, Any] | None = None
    # the reference run's server metrics (JSON form), for server.* thresholds
    server_metrics: Mapping[str, Any] | None = None
    # the reference run's server process block (``runs[].server_process``: startup and
    # resources), for startup.* (compared by default) and named server.rss_max_mb etc.
    server_process: Mapping[str, Any] | None = None
    # the reference run's GPU figures by name (specs/gpu_names.gpu_values; None: no GPU
    # read, or a source that kept none), for the gpu.* / energy_per_output_token_j thresholds
    gpu: Mapping[str, float] | None = None


class BaselineSource(ABC):
    """A baseline: ``path``, ``created_at`` and ``endpoint`` describe it in the session's
    report; :meth:`describe` says what one test was compared with (after :meth:`compare`).
    """

    path: str  # the session report's "compared_with"

    @property
    def fingerprint(self) -> dict[str, Any] | None:
        """The server fingerprint the baseline was measured under (None: none stored)."""
        return None

    def check_comparability(
        self, current: Mapping[str, Any] | None, *, strict: bool = False
    ) -> dict[str, Any]:
        """Whether this baseline was measured on the server configuration ``current`` (this
        session's fingerprint) describes: ``{"comparable": bool | None, "differs": [...],
        "note": str}``; a source that keeps no fingerprint cannot tell (None)."""
        return {"comparable": None, "differs": [], "note": "this baseline keeps no fingerprint"}

    @property
    @abstractmethod
    def created_at(self) -> str:
        """When the baseline was made (the newest stored session's start, for history)."""

    @property
    @abstractmethod
    def endpoint(self) -> dict[str, Any]:
        """The endpoint the baseline measured."""

    @abstractmethod
    def describe(self, nodeid: str) -> str:
        """What ``nodeid`` was compared with, for its failure message."""

    @abstractmethod
    def references(
        self, nodeid: str, results: Sequence[RunResult], endpoint: Mapping[str, Any]
    ) -> Iterator[Reference]:
        """One :class:`Reference` per run of ``results`` (all gated, at least one), in
        order; a generator may hold a resource (an open store) while it yields."""

    def other_outputs(
        self, nodeid: str, result: RunResult, endpoint: Mapping[str, Any]
    ) -> OtherOutputs | None:
        """The greedy outputs ``result`` (a run of ``nodeid``) is compared with for
        ``output_match`` (:mod:`~pytest_llmperf.slo.output_match`); None: this source
        keeps none."""
        return None

    def compare(
        self,
        nodeid: str,
        results: Iterable[RunResult],
        *,
        endpoint: Mapping[str, Any],
        thresholds: Thresholds | None = None,
        alpha: float = DEFAULT_ALPHA,
        confidence: float = DEFAULT_CONFIDENCE,
    ) -> list[RegressionCheck]:
        """Each gated run of ``nodeid`` against its reference (``confidence``: that of a
        percentile's order-statistic bounds, ``--llm-confidence``)."""
        gated = [r for r in results if r.gated]
        if not gated:  # nothing to judge: the source is not even read
            return []
        checks: list[RegressionCheck] = []
        for result, ref in zip(gated, self.references(nodeid, gated, endpoint), strict=True):
            if ref.accumulator is None:
                found = [
                    inconclusive_check(result.label, ref.reason, compared_with=ref.compared_with)
                ]
            else:
                found = compare_accumulators(
                    ref.accumulator,
                    result.accumulator,
                    thresholds=thresholds,
                    alpha=alpha,
                    run=result.label,
                    compared_with=ref.compared_with,
                    confidence=confidence,
                )
                found += compare_server_metrics(
                    ref.server_metrics,
                    result.server_metrics,
                    thresholds or Thresholds(),
                    run=result.label,
                    compared_with=ref.compared_with,
                )
                found += compare_replicas(
                    ref.accumulator,
                    result.accumulator,
                    thresholds,
                    alpha=alpha,
                    run=result.label,
                    compared_with=ref.compared_with,
                    confidence=confidence,
                )
                found += compare_process(
                    ref.server_process,
                    result.server_process,
                    thresholds,
                    run=result.label,
                    compared_with=ref.compared_with,
                )
                found += compare_gpu(
                    ref.gpu,
                    gpu_values(result.gpu.to_dict()) if result.gpu is not None else None,
                    thresholds,
                    run=result.label,
                    compared_with=ref.compared_with,
                )
            checks.extend(_marked(c, ref.comparability) for c in found)
        return checks


def _marked(check: RegressionCheck, comparability: Mapping[str, Any] | None) -> RegressionCheck:
    """``check`` with its reference's ``comparable`` and ``differs``."""
    if not comparability:
        return check
    return replace(
        check,
        comparable=comparability.get("comparable"),
        differs=tuple(str(d) for d in comparability.get("differs") or ()),
    )
