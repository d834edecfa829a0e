"""``--llm-mlflow``: the session's runs logged to MLflow (library:
:mod:`pytest_llmperf.export.mlflow_log`), after every report is written.

Where to: the option's tracking URI, or ``env``: ``$MLFLOW_TRACKING_URI`` where it is set,
so a CI workflow can pass ``--llm-mlflow=env`` always and export only where the secret
is there (a fork's pull request has no secrets: one line, nothing exported, no failure).
The experiment: ``--llm-mlflow-experiment``, else ``$MLFLOW_EXPERIMENT_NAME``, else
``llmperf``. MLflow's own variables for credentials (``MLFLOW_TRACKING_TOKEN``,
``MLFLOW_TRACKING_USERNAME``/``PASSWORD``) are read by MLflow's client, never by us.

The export's lines go to the terminal summary; an export never changes the exit status.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pytest_llmperf.export.mlflow_log import DEFAULT_EXPERIMENT, ExportStatus, export_report
from pytest_llmperf.plugin.state import SessionState

__all__ = ["ENV_VALUE", "export_to_mlflow", "tracking_uri_of"]

ENV_VALUE = "env"  # --llm-mlflow=env: the tracking URI from $MLFLOW_TRACKING_URI
_URI_VARIABLE = "MLFLOW_TRACKING_URI"
_EXPERIMENT_VARIABLE = "MLFLOW_EXPERIMENT_NAME"


def tracking_uri_of(option: str, environ: Mapping[str, str]) -> str | None:
    """The tracking URI ``--llm-mlflow=option`` names (None: ``env`` and the variable is
    not set)."""
    if option.strip().lower() != ENV_VALUE:
        return option.strip()
    return environ.get(_URI_VARIABLE, "").strip() or None


def _artefacts(written: list[str]) -> list[str]:
    """The report files the session wrote (not the lines that say where a summary was
    appended: ``$GITHUB_STEP_SUMMARY``'s file is the job's, not the session's)."""
    return [w for w in written if Path(w).is_file()]


def export_to_mlflow(state: SessionState, report: dict[str, Any]) -> list[str]:
    """Log; the terminal lines that say where it went (or why not)."""
    option = state.options.mlflow or ""
    uri = tracking_uri_of(option, os.environ)
    if uri is None:
        return [f"llmperf MLflow: --llm-mlflow=env: ${_URI_VARIABLE} is not set; nothing exported"]
    experiment = (
        state.options.mlflow_experiment
        or os.environ.get(_EXPERIMENT_VARIABLE, "").strip()
        or DEFAULT_EXPERIMENT
    )
    done = export_report(
        report,
        _artefacts(state.written),
        tracking_uri=uri,
        experiment=experiment,
        started_at=state.started_at or None,
        environ=os.environ,
        secrets=[os.environ.get(state.options.api_key_env)],
    )
    where = f"{done.tracking_uri} (experiment {done.experiment!r})"
    if done.status is ExportStatus.NOT_INSTALLED:
        return [
            "llmperf MLflow: --llm-mlflow needs MLflow's client: "
            "pip install pytest-llmperf[mlflow]; nothing exported"
        ]
    if done.status is ExportStatus.FAILED:
        sent = f" ({done.child_runs} run(s) logged before it)" if done.child_runs else ""
        return [f"llmperf MLflow: export to {where} failed{sent}: {done.error}"]
    lines = [
        f"llmperf MLflow: session run {done.parent_run_id} with {done.child_runs} test "
        f"run(s) and {len(done.artefacts)} report(s) logged to {where}"
    ]
    if done.parent_url:
        lines.append(f"  {done.parent_url}")
    lines.extend(f"  not logged: {why}" for why in done.skipped)
    return lines
