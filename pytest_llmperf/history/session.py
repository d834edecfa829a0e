"""A finished session -> a :class:`SessionRecord`, and the session-end append.

The plugin calls :func:`append_history` once, after every other report is
written; it never raises: the outcome is one terminal line, or an error
message that the plugin prints in red (and sets the exit status for).

What goes in (docs/history.md): each measured test's runs, each with its
comparison key, counts, metric summary and lossless accumulator state;
the endpoint without credentials (URL redacted, every text scrubbed).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Protocol

from pytest_llmperf.client.endpoint import redact_url
from pytest_llmperf.history.errors import HistoryError
from pytest_llmperf.history.provenance import machine_info, session_tag
from pytest_llmperf.history.records import (
    RunRecord,
    SessionRecord,
    comparison_key,
    process_values,
    run_metrics_with_gpu,
)
from pytest_llmperf.history.store import HistoryStore, describe_target
from pytest_llmperf.redaction import scrub
from pytest_llmperf.results.fleet_figures import run_metrics_with_fleet

__all__ = [
    "HistoryOutcome",
    "append_history",
    "build_session_record",
    "history_at_session_end",
    "utc_now",
]

_ENDPOINT_KEYS = ("url", "model", "api", "simulator", "server_version", "server_software")


class TestEntryLike(Protocol):
    """What :class:`pytest_llmperf.reports.session_data.TestEntry` provides."""

    nodeid: str
    outcome: str
    runs: list[dict[str, Any]]
    states: list[dict[str, Any]]
    endpoint: dict[str, Any]


def utc_now() -> str:
    """Now, UTC, ISO-8601 to the millisecond."""
    return datetime.now(UTC).isoformat(timespec="milliseconds")


def clean_endpoint(endpoint: Mapping[str, Any]) -> dict[str, Any]:
    """The endpoint's identity without credentials: URL redacted, texts scrubbed."""
    out: dict[str, Any] = {}
    for key in _ENDPOINT_KEYS:
        value = endpoint.get(key)
        if isinstance(value, str):
            value = scrub(redact_url(value) if key == "url" else value)
        out[key] = value
    return out


def build_session_record(
    tests: Iterable[TestEntryLike],
    *,
    endpoint: Mapping[str, Any],
    options: Mapping[str, Any],
    started_at: str,
    finished_at: str | None = None,
    tag: str | None = None,
    rootdir: str | os.PathLike[str] | None = None,
    env: Mapping[str, str] | None = None,
    fingerprint: Mapping[str, Any] | None = None,
    stopped: Mapping[str, Any] | None = None,
) -> SessionRecord:
    """The record of a session: ``tests`` are the session data's measured tests
    (``SessionData.measured_tests()``), ``endpoint`` the report's endpoint, ``options``
    the plugin's run options, ``tag`` ``--llm-history-tag`` (else CI variables, else git
    in ``rootdir``), ``fingerprint`` the session's server and machine fingerprint
    (:func:`~pytest_llmperf.server_metrics.fingerprint.session_fingerprint`), ``stopped``
    why the session stopped before load (JSON ``session.stopped``; its texts scrubbed)."""
    session_endpoint = clean_endpoint(endpoint)
    runs: list[RunRecord] = []
    for entry in tests:
        test_endpoint = {**session_endpoint, **clean_endpoint(entry.endpoint or endpoint)}
        for i, (run, state) in enumerate(zip(entry.runs, entry.states, strict=False)):
            load = dict(run.get("load") or {})
            workload = dict(run.get("workload") or {})
            runs.append(
                RunRecord(
                    test=entry.nodeid,
                    label=str(run.get("label") or f"run{i}"),
                    outcome=entry.outcome,
                    key=comparison_key(
                        test_endpoint.get("model"), test_endpoint.get("api"), load, workload
                    ),
                    counts=dict(run.get("counts") or {}),
                    metrics=run_metrics_with_gpu(run_metrics_with_fleet(run), run),
                    state=dict(state),
                    load=load,
                    workload=workload,
                    process=_clean_process(process_values(run.get("server_process"))),
                )
            )
    return SessionRecord(
        started_at=started_at,
        finished_at=finished_at or utc_now(),
        tag=session_tag(tag, rootdir, env),
        endpoint=session_endpoint,
        machine=machine_info(),
        options=dict(options),
        runs=runs,
        fingerprint=dict(fingerprint) if fingerprint else None,
        stopped=_clean_stop(stopped) if stopped else None,
    )


def _clean_process(values: dict[str, Any] | None) -> dict[str, Any] | None:
    """A run's process values with their texts (name, exit message) scrubbed."""
    if values is None:
        return None
    return {k: scrub(v) if isinstance(v, str) else v for k, v in values.items()}


def _clean_stop(stopped: Mapping[str, Any]) -> dict[str, Any]:
    """A stop's record without credentials (its endpoint is already redacted; its texts,
    which quote the server, are scrubbed once more)."""
    return {k: scrub(v) if isinstance(v, str) else v for k, v in stopped.items()}


@dataclass(frozen=True)
class HistoryOutcome:
    """What the append did: ``note`` for the terminal, or ``error`` (never both)."""

    session_id: int | None = None
    note: str = ""
    error: str = ""


def append_history(target: str, record: SessionRecord) -> HistoryOutcome:
    """Append ``record`` to the store at ``target``; never raises (the session's other
    outputs are already written): a failure is returned as ``error``."""
    where = describe_target(target)
    try:
        with HistoryStore.open(target) as store:
            session_id = store.append_session(record)
    except HistoryError as exc:
        return HistoryOutcome(error=f"llmperf history: {exc}")
    except Exception as exc:  # a bug or an odd value must not cost the session its exit
        return HistoryOutcome(
            error=f"llmperf history: {where}: could not append: {scrub(repr(exc))}"
        )
    return HistoryOutcome(
        session_id=session_id,
        note=f"llmperf history: appended session {session_id} to {where}",
    )


def history_at_session_end(
    target: str,
    tests: Iterable[TestEntryLike],
    *,
    endpoint: Mapping[str, Any],
    options: Mapping[str, Any],
    started_at: str,
    tag: str | None,
    rootdir: str | os.PathLike[str] | None,
    fingerprint: Mapping[str, Any] | None = None,
    stopped: Mapping[str, Any] | None = None,
) -> HistoryOutcome:
    """The plugin's one call: build the session's record and append it; never raises."""
    try:
        record = build_session_record(
            tests,
            endpoint=endpoint,
            options=options,
            started_at=started_at,
            tag=tag,
            rootdir=rootdir,
            fingerprint=fingerprint,
            stopped=stopped,
        )
    except Exception as exc:
        where = describe_target(target)
        return HistoryOutcome(
            error=f"llmperf history: {where}: could not build the session: {scrub(repr(exc))}"
        )
    return append_history(target, record)
