"""What server answered: version and software, for reports and baselines.

A baseline compared across a server upgrade should say so. Servers tell in
different ways: vLLM and the embedded simulator answer ``GET /version``
(``{"version": ...}``), others only a ``Server`` response header. Probing is
best effort (calls of the metadata client capped at a short limit, no retries,
any failure = unknown) and records only response data, never the request's
headers, so the API key cannot leak into a report.
"""

from __future__ import annotations

from typing import Any

from pytest_llmperf.client.endpoint import Endpoint
from pytest_llmperf.client.metadata import Answer, BlockingMetadataClient, CallLimits, Read
from pytest_llmperf.errors import LlmPerfUsageError

__all__ = ["probe_server_identity"]

_VERSION_HEADERS = ("server", "x-server-version", "x-version", "openai-version")


def probe_server_identity(endpoint: Endpoint, *, timeout: float = 3.0) -> dict[str, Any]:
    """``{"server_version": str | None, "server_software": str | None}`` from the server."""
    identity: dict[str, Any] = {"server_version": None, "server_software": None}
    limits = CallLimits.of(endpoint.timeouts).within(timeout)
    try:
        with BlockingMetadataClient(endpoint, limits=limits) as meta:
            calls = ((meta.root_url("/version"), Read.BODY), (meta.url("/models"), Read.HEAD))
            for url, read in calls:
                try:
                    answer = meta.call("GET", url, read=read, retry=False, max_bytes=64 << 10)
                except LlmPerfUsageError:
                    continue
                _read(answer, identity, version=read is Read.BODY)
                if identity["server_version"]:
                    break
    except Exception:  # best effort: identity is informative, never a reason to fail
        return identity
    return identity


def _read(answer: Answer, identity: dict[str, Any], *, version: bool) -> None:
    for name in _VERSION_HEADERS:
        value = answer.headers.get(name)
        if value and not identity["server_software"]:
            identity["server_software"] = value[:200]
    if answer.status == 200 and version:
        try:
            body = answer.json()
        except ValueError:
            return
        if isinstance(body, dict) and isinstance(body.get("version"), (str, int, float)):
            identity["server_version"] = str(body["version"])[:100]
