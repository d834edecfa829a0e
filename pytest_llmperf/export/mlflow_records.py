"""The JSON report as MLflow runs: one parent per session, one child per test run.

What each run carries (docs/export.md):

- the parent: the session's endpoint, model, fingerprint digest, source (CI variables),
  exit status and outcome counts as tags; the session's options as parameters; the
  ruleset's verdicts as ``slo.*`` tags; the reports as artefacts (added by the logger);
- a child per ``tests[].runs[]``: workload, load, endpoint URL (no credentials, no query),
  model, API, server fingerprint, run label and nodeid as parameters; every reported
  figure as a metric (:mod:`.mlflow_metrics`); each SLO verdict of the run as a tag
  ``slo.<expr>`` = ``pass``/``fail``/``inconclusive``, with ``slo.<expr>.observed``; each
  baseline comparison's as ``baseline.<metric>.<stat>`` (an A/B's: ``ab.<metric>.<stat>``
  and ``ab``), with its ``.change``.

Pure data built from the report's dict (no MLflow import). Every parameter and tag value
goes through :func:`pytest_llmperf.redaction.scrub` with the secrets given, though the
report holds none: an export is one more place a key must not reach.
"""

from __future__ import annotations

import enum
import hashlib
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from pytest_llmperf.export.mlflow_metrics import MetricPoint, run_metrics, stage_metrics
from pytest_llmperf.export.mlflow_names import mlflow_key, param_value, slo_key, tag_value
from pytest_llmperf.export.mlflow_source import source_tags
from pytest_llmperf.redaction import scrub

__all__ = [
    "RunRecord",
    "RunStatus",
    "SessionRecord",
    "clean_url",
    "fingerprint_digest",
    "session_record",
]

_FAILED_OUTCOMES = frozenset({"failed", "error"})
_VOLATILE_FINGERPRINT = frozenset({"collected_at", "notes"})


class RunStatus(enum.Enum):
    """How an MLflow run ends: a test that failed (or a session whose exit status is
    not 0) is FAILED, so the MLflow UI marks it red."""

    FINISHED = "FINISHED"
    FAILED = "FAILED"


@dataclass
class RunRecord:
    """One MLflow run to log: its name, parameters, tags, metrics, times and status."""

    name: str
    params: dict[str, str] = field(default_factory=dict)
    tags: dict[str, str] = field(default_factory=dict)
    metrics: list[MetricPoint] = field(default_factory=list)
    start_ms: int | None = None
    end_ms: int | None = None
    status: RunStatus = RunStatus.FINISHED


@dataclass
class SessionRecord:
    """The session's parent run and its children, in the report's order."""

    parent: RunRecord
    children: list[RunRecord]


def clean_url(url: str) -> str:
    """``url`` without credentials, query or fragment (an Azure-style ``?api-key=``
    travels in the query)."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return ""
    host = parts.hostname or ""
    if ":" in host:  # IPv6
        host = f"[{host}]"
    try:
        port = parts.port
    except ValueError:
        port = None
    netloc = f"{host}:{port}" if port else host
    return urlunsplit((parts.scheme, netloc, parts.path, "", ""))


def fingerprint_digest(fingerprint: Mapping[str, Any] | None) -> str:
    """A short digest of the server's fingerprint without its collection time: equal
    digests, same server, model and client machine (a tag to group runs by)."""
    if not fingerprint:
        return ""
    stable = {k: v for k, v in fingerprint.items() if k not in _VOLATILE_FINGERPRINT}
    text = json.dumps(stable, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _ms(stamp: Any) -> int | None:
    """An ISO 8601 time of the report as milliseconds since the epoch."""
    if not isinstance(stamp, str) or not stamp:
        return None
    try:
        return int(datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp() * 1000)
    except ValueError:
        return None


def _flat(prefix: str, block: Any) -> dict[str, Any]:
    """One level of a report block as ``prefix.key`` entries (deeper values as JSON)."""
    if not isinstance(block, Mapping):
        return {} if block is None else {prefix: block}
    return {f"{prefix}.{k}": v for k, v in block.items() if v is not None}


def _observed(verdict: Mapping[str, Any]) -> str:
    value, unit = verdict.get("observed"), verdict.get("unit") or ""
    if value is None:
        text = "none"
    elif unit == "fraction":  # error_rate, goodput: as the SLO writes them
        text = f"{100 * value:g}%"
    else:
        text = f"{value:g} {unit}".strip()
    reason = verdict.get("reason") or ""
    return f"{text} ({reason})" if reason else text


def _slo_tags(verdicts: Iterable[Mapping[str, Any]]) -> dict[str, str]:
    tags: dict[str, str] = {}
    for v in verdicts:
        key = slo_key(str(v.get("expr", "")), stage=v.get("stage"), model=v.get("model"))
        tags[key] = str(v.get("verdict", ""))
        tags[f"{key}.observed"] = _observed(v)
    return tags


def _comparison_tags(prefix: str, checks: Iterable[Mapping[str, Any]]) -> dict[str, str]:
    """Comparisons with a baseline (``--llm-baseline-compare``: a file, the history) or a
    reference endpoint (A/B): each statistic's verdict as ``<prefix>.<metric>.<stat>``,
    its relative change beside it."""
    tags: dict[str, str] = {}
    for c in checks:
        metric, stat = str(c.get("metric", "")), str(c.get("stat") or "")
        key = mlflow_key(f"{prefix}.{metric}.{stat}" if stat else f"{prefix}.{metric}")
        tags[key] = str(c.get("verdict", ""))
        change = c.get("change")
        if isinstance(change, (int, float)):
            tags[f"{key}.change"] = f"{100 * change:+.1f}%"
    return tags


def _endpoint_entries(endpoint: Mapping[str, Any]) -> dict[str, Any]:
    fingerprint = endpoint.get("fingerprint") or {}
    return {
        "endpoint": clean_url(str(endpoint.get("url") or "")),
        "model": endpoint.get("model"),
        "api": endpoint.get("api"),
        "simulator": endpoint.get("simulator"),
        "fingerprint": fingerprint_digest(fingerprint),
        "fingerprint.server": fingerprint.get("server"),
        "fingerprint.model": fingerprint.get("model"),
        "fingerprint.engine": fingerprint.get("engine"),
    }


def _child(test: Mapping[str, Any], run: Mapping[str, Any], report: Mapping[str, Any]) -> RunRecord:
    nodeid = str(test.get("nodeid", ""))
    label = str(run.get("label") or "")
    endpoint = test.get("endpoint") or report.get("endpoint") or {}
    params: dict[str, Any] = {
        "nodeid": nodeid,
        "run_label": label,
        **_endpoint_entries(endpoint),
        **_flat("workload", run.get("workload")),
        **_flat("load", run.get("load")),
        "gated": run.get("gated"),
    }
    start = _ms(run.get("started_at"))
    duration = run.get("duration_s")
    end = start + int(1000 * float(duration)) if start is not None and duration else start
    verdicts = [v for v in test.get("slos") or () if str(v.get("run") or "") == label]
    reference = run.get("reference")
    ab: Mapping[str, Any] = reference if isinstance(reference, Mapping) else {}
    if ab:  # A/B: the reference endpoint it was judged against
        params["reference_endpoint"] = clean_url(
            str(ab.get("reference_endpoint", {}).get("url") or "")
        )
    outcome = str(test.get("outcome", ""))
    tags = {
        "llmperf.nodeid": nodeid,
        "llmperf.run_label": label,
        "llmperf.outcome": outcome,
        "llmperf.stop_reason": run.get("stop_reason"),
        "llmperf.generator_bound": (run.get("self_check") or {}).get("generator_bound"),
        **_slo_tags(verdicts),
        **_comparison_tags(
            "baseline", (c for c in test.get("baseline") or () if str(c.get("run") or "") == label)
        ),
        "ab": ab.get("verdict"),
        **_comparison_tags("ab", ab.get("checks") or ()),
    }
    return RunRecord(
        name=f"{nodeid.rsplit('::', 1)[-1]} {label}".strip(),
        params={k: param_value(v) for k, v in params.items() if v is not None and v != ""},
        tags={k: tag_value(v) for k, v in tags.items() if v is not None and v != ""},
        metrics=[
            *run_metrics(run, timestamp_ms=end or 0),
            *stage_metrics(run, start_ms=start or 0),
        ],
        start_ms=start,
        end_ms=end,
        status=RunStatus.FAILED if outcome in _FAILED_OUTCOMES else RunStatus.FINISHED,
    )


def _parent(
    report: Mapping[str, Any],
    *,
    started_at: str | None,
    short_id: str,
    environ: Mapping[str, str],
    first_run_ms: int | None,
) -> RunRecord:
    session = report.get("session") or {}
    endpoint = report.get("endpoint") or {}
    entries = _endpoint_entries(endpoint)
    start = _ms(started_at) or first_run_ms or _ms(report.get("generated_at"))
    end = _ms(report.get("generated_at"))
    when = datetime.fromtimestamp(start / 1000, tz=UTC) if start else None
    stamp = when.strftime("%Y-%m-%dT%H:%M:%SZ") if when else ""
    exitstatus = session.get("exitstatus")
    outcomes = session.get("outcomes") or {}
    server = entries["fingerprint.server"] or {}
    tags: dict[str, Any] = {
        **{f"llmperf.{k}": v for k, v in entries.items() if "." not in k},
        "llmperf.server": " ".join(str(server[k]) for k in ("family", "version") if server.get(k)),
        "llmperf.exitstatus": exitstatus,
        **{f"llmperf.tests.{k}": v for k, v in outcomes.items()},
        "llmperf.runs": sum(len(t.get("runs") or ()) for t in report.get("tests") or ()),
        "llmperf.stopped": (session.get("stopped") or {}).get("reason"),
        **source_tags(environ),
        **_slo_tags(session.get("slos") or ()),
    }
    failed = exitstatus not in (0, None)
    return RunRecord(
        name=f"llmperf {stamp} {short_id}".replace("  ", " "),
        params={k: param_value(v) for k, v in _flat("options", session.get("options")).items()},
        tags={k: tag_value(v) for k, v in tags.items() if v is not None and v != ""},
        start_ms=start,
        end_ms=end,
        status=RunStatus.FAILED if failed else RunStatus.FINISHED,
    )


def _scrubbed(record: RunRecord, secrets: Sequence[str]) -> RunRecord:
    record.params = {mlflow_key(k): scrub(v, *secrets) for k, v in record.params.items()}
    record.tags = {mlflow_key(k): scrub(v, *secrets) for k, v in record.tags.items()}
    record.name = scrub(record.name, *secrets)
    return record


def session_record(
    report: Mapping[str, Any],
    *,
    short_id: str,
    started_at: str | None = None,
    environ: Mapping[str, str] | None = None,
    secrets: Sequence[str] = (),
) -> SessionRecord:
    """The runs to log for ``report`` (the JSON report's dict). ``short_id`` tells this
    session's parent from another's started the same second; ``started_at`` is the
    session's start (ISO 8601; default: its first run's); ``environ`` the CI variables
    (default: none); ``secrets`` are masked in every parameter and tag value."""
    children = [
        _scrubbed(_child(test, run, report), secrets)
        for test in report.get("tests") or ()
        for run in test.get("runs") or ()
    ]
    first = min((c.start_ms for c in children if c.start_ms is not None), default=None)
    parent = _parent(
        report, started_at=started_at, short_id=short_id, environ=environ or {}, first_run_ms=first
    )
    return SessionRecord(_scrubbed(parent, secrets), children)
