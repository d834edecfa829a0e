"""``python -m pytest_llmperf.reports.methodology report.json``: every run's methodology
"Minimum Viable Report" from a ``--llm-json`` file.

The report itself is :mod:`pytest_llmperf.reports.minimum_report` (re-exported here). This
module is only the command, and nothing in the package imports it: ``python -m`` runs it
without runpy's "found in sys.modules" warning.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from pathlib import Path

from pytest_llmperf.reports.minimum_report import minimum_viable_report

__all__ = ["main", "minimum_viable_report"]

_PROG = "pytest_llmperf.reports.methodology"


def main(argv: Sequence[str] | None = None) -> int:
    """Print every run's minimum report from a ``--llm-json`` file; exit status 2 for a
    missing argument or an unreadable report (as ``pytest_llmperf.reports.markdown``)."""
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) != 1:
        print(f"usage: python -m {_PROG} REPORT.json", file=sys.stderr)
        return 2
    try:
        report = json.loads(Path(args[0]).read_text("utf-8"))
    except (OSError, ValueError) as exc:
        print(f"{_PROG}: cannot read {args[0]}: {exc}", file=sys.stderr)
        return 2
    if not isinstance(report, dict) or "tests" not in report:
        print(f"{_PROG}: {args[0]} is no pytest-llmperf JSON report", file=sys.stderr)
        return 2
    for test in report["tests"]:
        for run in test.get("runs", []):
            print(f"# {test['nodeid']} [{run.get('label', '')}]")
            text = run.get("minimum_report") or minimum_viable_report(
                run, test.get("endpoint") or report.get("endpoint", {})
            )
            print(text)
            print()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
