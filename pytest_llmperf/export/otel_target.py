"""Where ``--llm-otel`` sends: the option's value and the ``OTEL_EXPORTER_OTLP_*`` variables.

- ``--llm-otel=URL``: the OTLP/HTTP base URL, as ``OTEL_EXPORTER_OTLP_ENDPOINT`` would be
  (``/v1/metrics`` and ``/v1/traces`` are appended). A signal's own variable
  (``OTEL_EXPORTER_OTLP_METRICS_ENDPOINT``, ``..._TRACES_ENDPOINT``), when set, still
  wins for that signal: it is the more specific setting, as in every OTel SDK.
- ``--llm-otel=env``: everything from the variables; ``OTEL_EXPORTER_OTLP_ENDPOINT``
  unset means the OTLP default, ``http://localhost:4318``.

Headers (``OTEL_EXPORTER_OTLP_HEADERS`` and the per-signal ones), the timeout
(``OTEL_EXPORTER_OTLP_TIMEOUT``, seconds), compression and certificates are read by the
OTLP exporter itself; the gate adds no header of its own (so never the API key).
``OTEL_RESOURCE_ATTRIBUTES`` and ``OTEL_SERVICE_NAME`` override the resource's defaults
(``service.name=pytest-llmperf``).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass

from pytest_llmperf.errors import LlmPerfUsageError

__all__ = ["DEFAULT_ENDPOINT", "FROM_ENV", "OtlpTarget", "otlp_target"]

DEFAULT_ENDPOINT = "http://localhost:4318"
FROM_ENV = "env"


@dataclass(frozen=True)
class OtlpTarget:
    """The two OTLP/HTTP URLs the export posts to."""

    metrics_url: str
    traces_url: str


def _signal_url(base: str, signal: str) -> str:
    return f"{base.rstrip('/')}/v1/{signal}"


def otlp_target(value: str, environ: Mapping[str, str] | None = None) -> OtlpTarget:
    """The target for ``--llm-otel=value``; a value that is neither ``env`` nor an
    ``http(s)://`` URL is a usage error naming the option."""
    env = os.environ if environ is None else environ
    value = value.strip()
    if value == FROM_ENV:
        base = env.get("OTEL_EXPORTER_OTLP_ENDPOINT", "").strip() or DEFAULT_ENDPOINT
    elif value.startswith(("http://", "https://")):
        base = value
    else:
        raise LlmPerfUsageError(
            f"{value!r} is not an OTLP/HTTP endpoint: give its base URL "
            "(http://collector:4318) or 'env' (the OTEL_EXPORTER_OTLP_* variables)",
            where="--llm-otel",
        )
    metrics = env.get("OTEL_EXPORTER_OTLP_METRICS_ENDPOINT", "").strip()
    traces = env.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "").strip()
    return OtlpTarget(
        metrics_url=metrics or _signal_url(base, "metrics"),
        traces_url=traces or _signal_url(base, "traces"),
    )
