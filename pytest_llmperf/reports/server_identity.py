"""What server answered: version and software, for reports and baselines.

A baseline compared across a server upgrade should say so. Servers tell in
different ways: vLLM and the embedded simulator answer ``GET /version``
(``{"version": ...}``), others only a ``Server`` response header. The answers
are the preflight's (:class:`~pytest_llmperf.client.preflight_result.PreflightResult`:
``GET /version`` capped at 3 s, no retries, any failure = unknown; the headers
of its ``GET /v1/models``), read here without asking again; only response data
is recorded, never the request's headers, so the API key cannot leak into a
report.
"""

from __future__ import annotations

from typing import Any

from pytest_llmperf.client.metadata import Answer
from pytest_llmperf.client.preflight_result import PreflightResult

__all__ = ["server_identity"]

_VERSION_HEADERS = ("server", "x-server-version", "x-version", "openai-version")


def server_identity(preflight: PreflightResult) -> dict[str, Any]:
    """``{"server_version": str | None, "server_software": str | None}`` from what the
    server answered at preflight: ``GET /version``'s body and headers, else the headers of
    its ``GET /v1/models`` (nothing is asked here)."""
    identity: dict[str, Any] = {"server_version": None, "server_software": None}
    version = preflight.version
    if isinstance(version, Answer):
        _read(version, identity, version=True)
    if not identity["server_version"]:
        _read(preflight.models, identity, version=False)
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
