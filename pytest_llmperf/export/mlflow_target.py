"""Where an MLflow export goes: the tracking URI and the experiment, as the option (or
the command line) names them, with MLflow's own variables as the fallbacks.

``env`` as the URI means ``$MLFLOW_TRACKING_URI`` where it is set: a CI workflow can
always pass ``--llm-mlflow=env`` and export only where the secret is there (a fork's pull
request has no secrets: nothing is exported, and nothing fails). The experiment: the one
named, else ``$MLFLOW_EXPERIMENT_NAME``, else ``llmperf``. MLflow's variables for
credentials (``MLFLOW_TRACKING_TOKEN``, ``MLFLOW_TRACKING_USERNAME``/``PASSWORD``) are
read by MLflow's client itself, never by this package.
"""

from __future__ import annotations

from collections.abc import Mapping

__all__ = [
    "DEFAULT_EXPERIMENT",
    "ENV_VALUE",
    "EXPERIMENT_VARIABLE",
    "URI_VARIABLE",
    "experiment_of",
    "tracking_uri_of",
]

DEFAULT_EXPERIMENT = "llmperf"
ENV_VALUE = "env"  # the URI from $MLFLOW_TRACKING_URI
URI_VARIABLE = "MLFLOW_TRACKING_URI"
EXPERIMENT_VARIABLE = "MLFLOW_EXPERIMENT_NAME"


def tracking_uri_of(value: str, environ: Mapping[str, str]) -> str | None:
    """The tracking URI ``value`` names (None: ``env`` and the variable is not set)."""
    if value.strip().lower() != ENV_VALUE:
        return value.strip()
    return environ.get(URI_VARIABLE, "").strip() or None


def experiment_of(value: str | None, environ: Mapping[str, str]) -> str:
    """The experiment: ``value``, else ``$MLFLOW_EXPERIMENT_NAME``, else ``llmperf``."""
    return (
        (value or "").strip() or environ.get(EXPERIMENT_VARIABLE, "").strip() or DEFAULT_EXPERIMENT
    )
