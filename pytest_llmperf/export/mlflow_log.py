"""A finished session's report logged to an MLflow tracking server (or store).

``export_report(report, artefacts, tracking_uri=...)`` needs no pytest: it takes the JSON
report's dict and the paths of the reports written, builds the runs
(:mod:`.mlflow_records`) and logs them with ``mlflow.MlflowClient`` (the ``mlflow``
extra: ``mlflow-skinny``, imported here, on first use, never by a session that does not
export). Each run is a few round trips whatever its size: ``create_run``, ``log_batch``
(params, tags and metrics together, split only at MLflow's per-batch limits) and
``set_terminated``; the parent adds one ``log_artifact`` per report.

It never raises. A tracking server that is down, refuses the request or answers an
error ends the export at the first failure, said in the outcome; the time that takes is
bounded: MLflow's own HTTP client retries seven times with exponential backoff and waits
120 s per request by default, so the export runs with one retry, a short backoff and
``timeout_s`` per request, unless the user set those ``MLFLOW_HTTP_REQUEST_*`` variables
(theirs are kept). The variables are restored afterwards.
"""

from __future__ import annotations

import enum
import os
import uuid
import warnings
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pytest_llmperf.export.mlflow_metrics import MetricPoint
from pytest_llmperf.export.mlflow_records import RunRecord, session_record
from pytest_llmperf.export.mlflow_target import DEFAULT_EXPERIMENT
from pytest_llmperf.redaction import scrub

__all__ = [
    "ExportStatus",
    "MlflowExport",
    "bounded_http",
    "export_report",
]

PARENT_TAG = "mlflow.parentRunId"  # MLflow's own link of a nested run to its parent
# MLflow's per-batch limits (mlflow/utils/validation.py)
_MAX_METRICS, _MAX_PARAMS_TAGS, _MAX_ENTITIES = 1000, 100, 1000
_MAX_ERROR = 300  # characters of an error kept for the terminal line


class ExportStatus(enum.Enum):
    LOGGED = "logged"
    NOT_INSTALLED = "not_installed"  # the mlflow extra is missing
    FAILED = "failed"  # the tracking server or store failed; nothing more was sent


@dataclass
class MlflowExport:
    """What an export did: where, which runs, which artefacts (or why not)."""

    status: ExportStatus
    tracking_uri: str  # without credentials
    experiment: str
    experiment_id: str = ""
    parent_run_id: str = ""
    child_runs: int = 0
    artefacts: list[str] = field(default_factory=list)  # logged on the parent run
    skipped: list[str] = field(default_factory=list)  # "PATH: why", not logged
    error: str = ""

    @property
    def parent_url(self) -> str:
        """The parent run's page in the MLflow UI (a tracking server's URI only)."""
        if not self.parent_run_id or not self.tracking_uri.startswith(("http://", "https://")):
            return ""
        base = self.tracking_uri.rstrip("/")
        return f"{base}/#/experiments/{self.experiment_id}/runs/{self.parent_run_id}"

    def lines(self) -> list[str]:
        """What happened, in terminal lines (the plugin's summary, the command line's)."""
        where = f"{self.tracking_uri} (experiment {self.experiment!r})"
        if self.status is ExportStatus.NOT_INSTALLED:
            return [
                "llmperf MLflow: the export needs MLflow's client: "
                "pip install pytest-llmperf[mlflow]; nothing exported"
            ]
        if self.status is ExportStatus.FAILED:
            sent = f" ({self.child_runs} run(s) logged before it)" if self.child_runs else ""
            return [f"llmperf MLflow: export to {where} failed{sent}: {self.error}"]
        lines = [
            f"llmperf MLflow: session run {self.parent_run_id} with {self.child_runs} test "
            f"run(s) and {len(self.artefacts)} report(s) logged to {where}"
        ]
        if self.parent_url:
            lines.append(f"  {self.parent_url}")
        lines.extend(f"  not logged: {why}" for why in self.skipped)
        return lines


@contextmanager
def bounded_http(*, timeout_s: int, retries: int) -> Iterator[None]:
    """MLflow's HTTP client with few retries, a short backoff and a timeout per request,
    where the user has not set them; MLflow's "View run at" lines off (the export prints
    its own). Every variable is put back as it was."""
    wanted = {
        "MLFLOW_HTTP_REQUEST_MAX_RETRIES": str(retries),
        "MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR": "1",
        "MLFLOW_HTTP_REQUEST_TIMEOUT": str(timeout_s),
        "MLFLOW_SUPPRESS_PRINTING_URL_TO_STDOUT": "true",
    }
    before = {name: os.environ.get(name) for name in wanted}
    for name, value in wanted.items():
        if before[name] is None:
            os.environ[name] = value
    try:
        yield
    finally:
        for name, old in before.items():
            if old is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = old


def _batches(
    record: RunRecord,
) -> Iterator[tuple[list[MetricPoint], list[tuple[str, str]], list[tuple[str, str]]]]:
    """The record's params, tags and metrics in as few ``log_batch`` calls as MLflow's
    limits allow (100 params, 100 tags, 1,000 metrics, 1,000 entities in all)."""
    params, tags, metrics = list(record.params.items()), list(record.tags.items()), record.metrics
    while params or tags or metrics:
        p, params = params[:_MAX_PARAMS_TAGS], params[_MAX_PARAMS_TAGS:]
        t, tags = tags[:_MAX_PARAMS_TAGS], tags[_MAX_PARAMS_TAGS:]
        room = min(_MAX_METRICS, _MAX_ENTITIES - len(p) - len(t))
        m, metrics = metrics[:room], metrics[room:]
        yield m, p, t


class _Logger:
    """The MlflowClient calls, one run at a time."""

    def __init__(self, mlflow: Any, entities: Any, tracking_uri: str) -> None:
        self.client: Any = mlflow.MlflowClient(tracking_uri=tracking_uri)
        self._metric, self._param, self._tag = entities.Metric, entities.Param, entities.RunTag

    def experiment_id(self, name: str) -> str:
        found = self.client.get_experiment_by_name(name)
        if found is None:
            try:
                return str(self.client.create_experiment(name))
            except Exception:  # another session created it meanwhile
                found = self.client.get_experiment_by_name(name)
                if found is None:
                    raise
        if getattr(found, "lifecycle_stage", "active") == "deleted":
            raise RuntimeError(f"the experiment {name!r} is deleted (restore it, or name another)")
        return str(found.experiment_id)

    def start(self, experiment_id: str, record: RunRecord, parent: str | None) -> str:
        run = self.client.create_run(
            experiment_id,
            start_time=record.start_ms,
            tags={PARENT_TAG: parent} if parent else None,
            run_name=record.name,
        )
        run_id = str(run.info.run_id)
        for metrics, params, tags in _batches(record):
            self.client.log_batch(
                run_id,
                metrics=[self._metric(m.key, m.value, m.timestamp_ms, m.step) for m in metrics],
                params=[self._param(k, v) for k, v in params],
                tags=[self._tag(k, v) for k, v in tags],
            )
        return run_id

    def end(self, run_id: str, record: RunRecord) -> None:
        self.client.set_terminated(run_id, status=record.status.value, end_time=record.end_ms)


def _holds_secret(path: Path, secrets: Sequence[str]) -> bool:
    data = path.read_bytes()
    return any(s.encode() in data for s in secrets)


def _error_text(exc: BaseException, secrets: Sequence[str]) -> str:
    lines = str(exc).strip().splitlines()
    text = lines[0].strip() if lines else ""
    text = f"{type(exc).__name__}: {text}" if text else type(exc).__name__
    text = scrub(text, *secrets)
    return text if len(text) <= _MAX_ERROR else text[: _MAX_ERROR - 1] + "…"


def export_report(
    report: Mapping[str, Any],
    artefacts: Sequence[str | Path] = (),
    *,
    tracking_uri: str,
    experiment: str = DEFAULT_EXPERIMENT,
    started_at: str | None = None,
    environ: Mapping[str, str] | None = None,
    secrets: Sequence[str | None] = (),
    timeout_s: int = 10,
    retries: int = 1,
) -> MlflowExport:
    """Log ``report`` to ``tracking_uri`` under ``experiment``: one parent run for the
    session (the files in ``artefacts`` as its artefacts) and one child per test run.
    ``environ``: where the CI variables are read (default: none); ``secrets``: values
    that must not leave (masked in every parameter and tag, an artefact that holds one is
    not sent). Never raises: the outcome says what happened."""
    hidden = [s for s in secrets if s and len(s) >= 4]
    outcome = MlflowExport(
        ExportStatus.FAILED, scrub(tracking_uri, *hidden), experiment or DEFAULT_EXPERIMENT
    )
    try:
        import mlflow
        import mlflow.entities
    except ImportError:
        outcome.status = ExportStatus.NOT_INSTALLED
        return outcome
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            logger = _Logger(mlflow, mlflow.entities, tracking_uri)
    except ImportError as exc:  # mlflow-skinny has no SQL store: that is mlflow's own
        outcome.error = f"{_error_text(exc, hidden)} (a database store needs: pip install mlflow)"
        return outcome
    except Exception as exc:  # a URI MLflow cannot use (unknown scheme, bad store)
        outcome.error = _error_text(exc, hidden)
        return outcome
    record = session_record(
        report,
        short_id=uuid.uuid4().hex[:8],
        started_at=started_at,
        environ=environ,
        secrets=hidden,
    )
    # MLflow's own deprecation warnings (its SQL store's, say) are not the user's: a
    # session that exports shows the same warnings summary as one that does not
    with bounded_http(timeout_s=timeout_s, retries=retries), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            outcome.experiment_id = logger.experiment_id(outcome.experiment)
            outcome.parent_run_id = logger.start(outcome.experiment_id, record.parent, None)
            for child in record.children:
                logger.end(logger.start(outcome.experiment_id, child, outcome.parent_run_id), child)
                outcome.child_runs += 1
            _log_artefacts(logger, outcome, artefacts, hidden)
            logger.end(outcome.parent_run_id, record.parent)
            outcome.status = ExportStatus.LOGGED
        except Exception as exc:  # an export never fails the session: it says why
            outcome.error = _error_text(exc, hidden)
            if outcome.parent_run_id:  # leave no parent "running" forever, where it can
                with suppress(Exception):
                    logger.client.set_terminated(outcome.parent_run_id, status="FAILED")
    return outcome


def _log_artefacts(
    logger: _Logger, outcome: MlflowExport, artefacts: Sequence[str | Path], secrets: Sequence[str]
) -> None:
    for item in artefacts:
        path = Path(item)
        if not path.is_file():
            outcome.skipped.append(f"{path}: not a file")
        elif _holds_secret(path, secrets):
            outcome.skipped.append(f"{path}: it holds the API key")
        else:
            logger.client.log_artifact(outcome.parent_run_id, str(path))
            outcome.artefacts.append(str(path))
