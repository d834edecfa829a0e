"""The machine-readable report (``--llm-json``); its core keys are a contract (DESIGN.md).

Latencies are in milliseconds, throughputs per second, rates as fractions,
verdicts ``pass | fail | inconclusive``. Keys may be added, never renamed.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pytest_llmperf.reports.session_data import SessionData

__all__ = ["REPORT_VERSION", "build_report", "write_json_report"]

REPORT_VERSION = 1


def build_report(
    data: SessionData, *, endpoint: Mapping[str, Any], session: Mapping[str, Any]
) -> dict[str, Any]:
    merged = {
        key: {"counts": acc.counts(), "metrics": acc.summary()}
        for key, acc in data.merged().items()
    }
    return {
        "report_version": REPORT_VERSION,
        "endpoint": dict(endpoint),
        "tests": [t.to_dict() for t in data.measured_tests()],
        "session": {**session, "interrupted": data.interrupted, "merged": merged},
    }


def write_json_report(path: str | os.PathLike[str], report: Mapping[str, Any]) -> Path:
    """Write atomically (temp file + rename), so a reader never sees half a report."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(target.name + ".tmp")
    tmp.write_text(json.dumps(report, indent=2, sort_keys=False, allow_nan=False) + "\n", "utf-8")
    os.replace(tmp, target)
    return target
