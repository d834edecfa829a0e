"""``--llm-mlflow``: the session's runs logged to MLflow (library:
:mod:`pytest_llmperf.export.mlflow_log`), after every report is written.

Where to: the option's tracking URI, or ``env`` for ``$MLFLOW_TRACKING_URI``; the
experiment: ``--llm-mlflow-experiment``, ``$MLFLOW_EXPERIMENT_NAME`` or ``llmperf``
(:mod:`pytest_llmperf.export.mlflow_target`). The reports written this session are the
parent run's artefacts; the API key (the value of ``--llm-api-key-env``'s variable) is
masked in every parameter and tag, and a report holding it is not sent.

The export's lines go to the terminal summary; an export never changes the exit status.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from pytest_llmperf.export.mlflow_log import export_report
from pytest_llmperf.export.mlflow_target import URI_VARIABLE, experiment_of, tracking_uri_of
from pytest_llmperf.plugin.state import SessionState

__all__ = ["export_to_mlflow"]


def _artefacts(written: list[str]) -> list[str]:
    """The report files the session wrote (not the lines that say where a summary was
    appended: ``$GITHUB_STEP_SUMMARY``'s file is the job's, not the session's)."""
    return [w for w in written if Path(w).is_file()]


def export_to_mlflow(state: SessionState, report: dict[str, Any]) -> list[str]:
    """Log; the terminal lines that say where it went (or why not)."""
    if state.config.option.collectonly:
        return []  # nothing ran: no run to log
    uri = tracking_uri_of(state.options.mlflow or "", os.environ)
    if uri is None:
        return [f"llmperf MLflow: --llm-mlflow=env: ${URI_VARIABLE} is not set; nothing exported"]
    done = export_report(
        report,
        _artefacts(state.written),
        tracking_uri=uri,
        experiment=experiment_of(state.options.mlflow_experiment, os.environ),
        started_at=state.started_at or None,
        environ=os.environ,
        secrets=[os.environ.get(state.options.api_key_env)],
    )
    return done.lines()
