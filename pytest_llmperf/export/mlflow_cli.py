"""``python -m pytest_llmperf.export.mlflow_cli REPORT.json [FILE ...]``: a JSON report
(``--llm-json``) logged to MLflow after the session, as ``--llm-mlflow`` would have.

For a CI job that keeps its secrets away from the code it measures: the suite runs
without the tracking server's credentials, and a later step (on trusted code, or in a job
that runs none of the pull request's code) exports its report
(docs/ci-github-actions.md). The other files named become the parent run's artefacts.

Exit status 0 when the report was logged, or when ``--tracking-uri=env`` (the default)
finds no ``$MLFLOW_TRACKING_URI``; 1 when the export failed or MLflow's client is not
installed; 2 for a report that cannot be read.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path

from pytest_llmperf.export.mlflow_log import ExportStatus, export_report
from pytest_llmperf.export.mlflow_target import (
    ENV_VALUE,
    URI_VARIABLE,
    experiment_of,
    tracking_uri_of,
)

__all__ = ["main"]

PROG = "python -m pytest_llmperf.export.mlflow_cli"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog=PROG,
        description="Log a pytest-llmperf JSON report (--llm-json) to MLflow: one parent "
        "run for the session, one child run per test run, the files named as artefacts.",
    )
    parser.add_argument("report", metavar="REPORT.json", help="the JSON report")
    parser.add_argument("files", nargs="*", metavar="FILE", help="artefacts of the parent run")
    parser.add_argument(
        "--tracking-uri",
        default=ENV_VALUE,
        help=f"the tracking URI, or 'env' (default): ${URI_VARIABLE}",
    )
    parser.add_argument(
        "--experiment", help="the experiment (default $MLFLOW_EXPERIMENT_NAME, else llmperf)"
    )
    parser.add_argument(
        "--api-key-env",
        default="OPENAI_API_KEY",
        help="the variable holding the API key, masked everywhere (default OPENAI_API_KEY)",
    )
    args = parser.parse_args(argv)
    try:
        report = json.loads(Path(args.report).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        print(f"{PROG}: cannot read {args.report}: {exc}", file=sys.stderr)
        return 2
    if not isinstance(report, dict) or "tests" not in report:
        print(f"{PROG}: {args.report} is not a pytest-llmperf JSON report", file=sys.stderr)
        return 2
    uri = tracking_uri_of(args.tracking_uri, os.environ)
    if uri is None:
        print(f"llmperf MLflow: ${URI_VARIABLE} is not set; nothing exported")
        return 0
    done = export_report(
        report,
        [args.report, *args.files],
        tracking_uri=uri,
        experiment=experiment_of(args.experiment, os.environ),
        environ=os.environ,
        secrets=[os.environ.get(args.api_key_env)],
    )
    for line in done.lines():
        print(line)
    return 0 if done.status is ExportStatus.LOGGED else 1


if __name__ == "__main__":
    sys.exit(main())
