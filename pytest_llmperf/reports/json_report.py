"""The machine-readable report (``--llm-json``); its core keys are a contract (DESIGN.md).

Latencies are in milliseconds, throughputs per second, rates as fractions,
verdicts ``pass | fail | inconclusive``. Keys may be added, never renamed.

A run's entry is :meth:`RunResult.to_dict() <pytest_llmperf.results.run_result.RunResult.to_dict>`:
every run's ``counts.blank`` and ``metrics.blank_rate`` count its completed replies that
were blank (generated, nothing visible; docs/measurement.md); with the request paths of
``llm_workload(structured=, tools=, adapters=, greedy=)`` it carries ``counts.invalid``
(``counts.checked``), ``metrics.valid_rate``, ``invalid_samples``, ``by_model`` (per
served model: counts, metrics), ``outputs`` (greedy: per sample its digest, tokens and
marks), ``output_match`` and
``output_consistency`` (share, compared, mismatched, the first mismatches with the
token where each parts, against what) and ``output_notes`` (why one was not made);
a verdict judged on one model names it (``model``).

A percentile that a test's SLOs or baseline thresholds name beyond the
standard ``p50 … p99.9`` (``ttft.p75 < 2s``) is added to each of its runs'
(and stages' and served models') metrics beside them, keyed as written (``"p75"``, ``"p99.99"``),
computed from the runs' HDR states like the standard ones; a session
ruleset's, to the session's merged metrics.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pytest_llmperf.errors import LlmPerfUsageError
from pytest_llmperf.metrics.histogram import PERCENTILES, LatencyHistogram
from pytest_llmperf.reports.minimum_report import minimum_viable_report
from pytest_llmperf.reports.session_data import SessionData, TestEntry
from pytest_llmperf.results.accumulator import MetricsAccumulator
from pytest_llmperf.specs.conversation_names import CONVERSATION_LATENCY_METRICS
from pytest_llmperf.specs.slo import STATS, parse_slo

__all__ = [
    "REPORT_VERSION",
    "UNITS",
    "build_report",
    "requested_stats",
    "write_json_report",
]

REPORT_VERSION = 1
UNITS = {
    "latency": "ms",
    "throughput": "per second (req/s, tok/s)",
    "rates": "fraction (error_rate, blank_rate, goodput)",
    "durations": "s (keys ending _s)",
}


def build_report(
    data: SessionData, *, endpoint: Mapping[str, Any], session: Mapping[str, Any]
) -> dict[str, Any]:
    """The whole report; each run also carries its methodology "minimum viable report"."""
    groups = data.groups()
    ruleset_stats = requested_stats(session.get("slos") or [])  # a session ruleset's p75
    merged = {
        key: {
            "counts": g.accumulator.counts(),
            "metrics": _add_stats(g.accumulator.summary(), g.accumulator, ruleset_stats),
            "measured_s": round(g.measured_s, 6),
        }
        for key, g in groups.items()
    }
    tests = []
    for test in data.measured_tests():
        entry = test.to_dict()
        entry["runs"] = [
            {**run, "minimum_report": minimum_viable_report(run, entry["endpoint"] or endpoint)}
            for run in _with_requested_stats(test)
        ]
        tests.append(entry)
    counts: dict[str, int] = {}
    for test in data.tests.values():
        counts[test.outcome] = counts.get(test.outcome, 0) + 1
    return {
        "report_version": REPORT_VERSION,
        "generated_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "units": UNITS,
        "endpoint": dict(endpoint),
        "tests": tests,
        "session": {
            **session,
            "interrupted": data.interrupted,
            "outcomes": counts,
            "servers": list(data.servers),
            "merged": merged,
            "groups": [
                {**d, "metrics": _add_stats(d["metrics"], g.accumulator, ruleset_stats)}
                for g in groups.values()
                for d in [g.describe()]
            ],
        },
    }


def requested_stats(
    slos: Iterable[Mapping[str, Any]], baseline: Iterable[Mapping[str, Any]] = ()
) -> dict[str, tuple[str, ...]]:
    """Metric -> the statistics beyond the standard ones that ``slos`` (verdict dicts) and
    ``baseline`` (comparison dicts) read, in the order first named: ``{"ttft": ("p75",)}``."""
    standard = {*STATS, *(f"p{p:g}" for p in PERCENTILES)}
    pairs: list[tuple[str, str]] = []
    for verdict in slos:
        try:
            slo = parse_slo(str(verdict.get("expr", "")))
        except LlmPerfUsageError:  # a session ruleset's or a foreign report's: not ours to judge
            continue
        # the server's percentiles come from its buckets; a turn band's is its band's
        if slo.stat and not slo.is_server and slo.turn_band is None:
            pairs.append((slo.metric, slo.stat))
    pairs += [(str(c.get("metric")), str(c.get("stat"))) for c in baseline]
    out: dict[str, list[str]] = {}
    for metric, stat in pairs:
        if stat.startswith("p") and stat not in standard and stat not in out.get(metric, []):
            out.setdefault(metric, []).append(stat)
    return {metric: tuple(stats) for metric, stats in out.items()}


def _with_requested_stats(test: TestEntry) -> list[dict[str, Any]]:
    """The test's runs, each run's, stage's and served model's metrics with its requested
    statistics added."""
    wanted = requested_stats(test.slos, test.baseline)
    if not wanted:
        return test.runs
    runs = []
    for i, run in enumerate(test.runs):
        state = test.states[i] if i < len(test.states) else None
        if state is None:
            runs.append(run)
            continue
        acc = MetricsAccumulator.from_state(state)
        run = {**run, "metrics": _add_stats(run.get("metrics", {}), acc, wanted)}
        if run.get("stages"):
            run["stages"] = [
                {
                    **stage,
                    "metrics": _add_stats(
                        stage.get("metrics", {}),
                        acc.stages.get(int(stage.get("index", k))) or MetricsAccumulator(),
                        wanted,
                    ),
                }
                for k, stage in enumerate(run["stages"])
            ]
        if isinstance(run.get("by_model"), dict):
            run["by_model"] = {
                name: {
                    **entry,
                    "metrics": _add_stats(
                        entry.get("metrics", {}),
                        acc.models.get(name) or MetricsAccumulator(),
                        wanted,
                    ),
                }
                for name, entry in run["by_model"].items()
            }
        runs.append(run)
    return runs


def _histogram(acc: MetricsAccumulator, metric: str) -> LatencyHistogram | None:
    """The histogram behind ``metrics[metric]``: a request latency's, or a conversation's
    (``conversation.makespan``); None for anything else."""
    if metric in CONVERSATION_LATENCY_METRICS:
        tracker = acc.conversations
        return tracker.stats().histogram(metric.partition(".")[2]) if tracker else None
    return acc.histograms.get(metric)


def _add_stats(
    metrics: Mapping[str, Any], acc: MetricsAccumulator, wanted: Mapping[str, tuple[str, ...]]
) -> dict[str, Any]:
    out = dict(metrics)
    for metric, stats in wanted.items():
        shown = out.get(metric)
        hist = _histogram(acc, metric)
        if isinstance(shown, dict) and hist is not None:
            # the summary's order (requested percentiles after p99.9), the run's own values
            summary = hist.summary(stats)
            out[metric] = {**{k: shown.get(k, v) for k, v in summary.items()}, **shown}
    return out


def write_json_report(path: str | os.PathLike[str], report: Mapping[str, Any]) -> Path:
    """Write atomically (temp file + rename), so a reader never sees half a report."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(target.name + ".tmp")
    tmp.write_text(json.dumps(report, indent=2, sort_keys=False, allow_nan=False) + "\n", "utf-8")
    os.replace(tmp, target)
    return target
