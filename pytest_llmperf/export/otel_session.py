"""``--llm-otel``'s library side: a finished session's report exported over OTLP/HTTP.

:func:`export_report` takes the JSON report's dict (and, where the caller has them, the
runs' lossless accumulator states) and returns the lines that say where the export went
or why it did not; it never raises for a receiver that is down or refuses, and a
missing ``otel`` extra is one line naming ``pip install pytest-llmperf[otel]``. Usable
without pytest, e.g. on a JSON report written earlier (whose event logs are still there).
"""

from __future__ import annotations

import re
import socket
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from pytest_llmperf.export.otel_target import otlp_target
from pytest_llmperf.export.otel_values import RunView, run_views

__all__ = ["INSTALL_HINT", "export_report", "otel_missing"]

INSTALL_HINT = "pip install pytest-llmperf[otel]"
PREFIX = "llmperf otel:"


def otel_missing() -> str | None:
    """Why the OpenTelemetry SDK or its OTLP/HTTP exporter cannot be imported, or None."""
    try:
        import opentelemetry.exporter.otlp.proto.http
        import opentelemetry.sdk.metrics  # noqa: F401
    except ImportError as exc:
        return str(exc)
    return None


def _relative_to(views: list[RunView], base: Path | None) -> list[RunView]:
    """Event-log paths written relative to the session's directory, resolved there."""
    if base is None:
        return views
    out = []
    for view in views:
        events = view.run.get("events")
        if view.events is None and events and (base / str(events)).is_file():
            view = RunView(
                view.nodeid, view.label, view.attributes, base / str(events), view.state, view.run
            )
        out.append(view)
    return out


def export_report(
    report: Mapping[str, Any],
    endpoint: str,
    *,
    states: Mapping[str, Sequence[Mapping[str, Any]]] | None = None,
    spans_ratio: float = 0.0,
    base_dir: Path | None = None,
    secrets: Sequence[str] = (),
) -> list[str]:
    """Export the report's runs to ``endpoint`` (a base URL or ``env``); the lines that
    say what was sent where, or why not."""
    missing = otel_missing()
    if missing is not None:
        return [f"{PREFIX} not exported: the OpenTelemetry SDK is missing ({INSTALL_HINT})"]
    from pytest_llmperf.export import otel_send  # the SDK: only now

    target = otlp_target(endpoint)
    views = _relative_to(run_views(report, states), base_dir)
    if not views:
        return [f"{PREFIX} nothing to export (no run was measured)"]
    data, recorded = otel_send.collect_metrics(views)
    sent = otel_send.send_metrics(data, target.metrics_url)
    spans_too = spans_ratio > 0
    if (
        not sent.ok
        and spans_too
        and not _answered(sent.said)
        and _same_receiver(target.metrics_url, target.traces_url)
    ):
        # nothing answers there: one line, one exporter timeout, not two (a receiver that
        # answered, e.g. 404 from one that takes traces only, is still sent the spans)
        what = f"metrics and spans not exported to {_origin(target.metrics_url)}"
        return [f"{PREFIX} {what}: {_why(sent.said, target.metrics_url)}"]
    how = f"{recorded.exact} exact from event logs, {recorded.from_hdr} from HDR histograms"
    lines = [
        f"{PREFIX} metrics of {len(views)} run(s) ({how}) sent to {target.metrics_url}"
        if sent.ok
        else _not_exported("metrics", target.metrics_url, sent.said)
    ]
    if spans_too:
        slos = {str(t.get("nodeid", "")): t.get("slos") or [] for t in report.get("tests", [])}
        spans, counts = otel_send.collect_spans(views, slos, ratio=spans_ratio, secrets=secrets)
        sent_spans = otel_send.send_spans(spans, target.traces_url)
        note = f", {counts.without_log} run(s) had no event log" if counts.without_log else ""
        lines.append(
            f"{PREFIX} {len(spans)} span(s) ({counts.requests} request(s) of {counts.runs} "
            f"run(s){note}) sent to {target.traces_url}"
            if sent_spans.ok
            else _not_exported("spans", target.traces_url, sent_spans.said)
        )
    return lines


def _not_exported(what: str, url: str, said: list[str]) -> str:
    return f"{PREFIX} {what} not exported to {url}: {_why(said, url)}"


def _answered(said: list[str]) -> bool:
    """Whether the receiver answered the failed post with an HTTP status."""
    return any(_REFUSED_BY_CODE.search(line) for line in said)


def _origin(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}"


def _same_receiver(a: str, b: str) -> bool:
    return _origin(a) == _origin(b)


_REFUSED = re.compile(r"Failed to establish a new connection: ([^\"')]+)")
_REFUSED_BY_CODE = re.compile(r"batch code: (\d+), reason: (.*)")
_GAVE_UP = "due to timeout, max retries or shutdown"


def _why(said: list[str], url: str) -> str:
    """The exporter's words on the failure, shortened to its cause: a refused connection,
    the receiver's status and reason; where the exporter gave up without saying why (its
    deadline came before a retry), a one-second look at the receiver's port says it."""
    for line in said:
        found = _REFUSED.search(line)
        if found:
            return found.group(1).strip()
        coded = _REFUSED_BY_CODE.search(line)
        if coded:
            return f"HTTP {coded.group(1)} {coded.group(2)}".strip()[:200]
    if not said or any(_GAVE_UP in line for line in said):
        return _look(url)
    return said[0][:200]


def _look(url: str) -> str:
    parts = urlsplit(url)
    port = parts.port or (443 if parts.scheme == "https" else 80)
    try:
        with socket.create_connection((parts.hostname or "", port), timeout=1.0):
            pass
    except ConnectionRefusedError:
        return "connection refused"
    except OSError as exc:
        return f"cannot connect ({exc.strerror or type(exc).__name__})"
    return "no answer within the exporter's timeout (OTEL_EXPORTER_OTLP_TIMEOUT)"
