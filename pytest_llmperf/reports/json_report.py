"""The machine-readable report (``--llm-json``); its core keys are a contract (DESIGN.md).

Latencies are in milliseconds, throughputs per second, rates as fractions,
verdicts ``pass | fail | inconclusive``. Keys may be added, never renamed.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pytest_llmperf.reports.methodology import minimum_viable_report
from pytest_llmperf.reports.session_data import SessionData

__all__ = ["REPORT_VERSION", "UNITS", "build_report", "write_json_report"]

REPORT_VERSION = 1
UNITS = {
    "latency": "ms",
    "throughput": "per second (req/s, tok/s)",
    "rates": "fraction (error_rate, goodput)",
    "durations": "s (keys ending _s)",
}


def build_report(
    data: SessionData, *, endpoint: Mapping[str, Any], session: Mapping[str, Any]
) -> dict[str, Any]:
    """The whole report; each run also carries its methodology "minimum viable report"."""
    groups = data.groups()
    merged = {
        key: {
            "counts": g.accumulator.counts(),
            "metrics": g.accumulator.summary(),
            "measured_s": round(g.measured_s, 6),
        }
        for key, g in groups.items()
    }
    tests = []
    for test in data.measured_tests():
        entry = test.to_dict()
        entry["runs"] = [
            {**run, "minimum_report": minimum_viable_report(run, entry["endpoint"] or endpoint)}
            for run in entry["runs"]
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
            "merged": merged,
            "groups": [g.describe() for g in groups.values()],
        },
    }


def write_json_report(path: str | os.PathLike[str], report: Mapping[str, Any]) -> Path:
    """Write atomically (temp file + rename), so a reader never sees half a report."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(target.name + ".tmp")
    tmp.write_text(json.dumps(report, indent=2, sort_keys=False, allow_nan=False) + "\n", "utf-8")
    os.replace(tmp, target)
    return target
