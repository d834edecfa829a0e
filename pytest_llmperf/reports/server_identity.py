"""What server answered: version and software, for reports and baselines.

A baseline compared across a server upgrade should say so. Servers tell in
different ways: vLLM and the embedded simulator answer ``GET /version``
(``{"version": ...}``), others only a ``Server`` response header. Probing is
best effort (short timeout, any failure = unknown) and records only response
data, never the request's headers, so the API key cannot leak into a report.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit, urlunsplit

import httpx

from pytest_llmperf.client.endpoint import Endpoint

__all__ = ["probe_server_identity"]

_VERSION_HEADERS = ("server", "x-server-version", "x-version", "openai-version")


def probe_server_identity(endpoint: Endpoint, *, timeout: float = 3.0) -> dict[str, Any]:
    """``{"server_version": str | None, "server_software": str | None}`` from the server."""
    identity: dict[str, Any] = {"server_version": None, "server_software": None}
    root = _root_url(endpoint.base_url)
    try:
        with httpx.Client(timeout=timeout, trust_env=False, headers=endpoint.headers()) as http:
            for url in (f"{root}/version", f"{endpoint.base_url}/models"):
                try:
                    response = http.get(url)
                except httpx.HTTPError:
                    continue
                _read(response, identity)
                if identity["server_version"]:
                    break
    except Exception:  # best effort: identity is informative, never a reason to fail
        return identity
    return identity


def _read(response: httpx.Response, identity: dict[str, Any]) -> None:
    for name in _VERSION_HEADERS:
        value = response.headers.get(name)
        if value and not identity["server_software"]:
            identity["server_software"] = value[:200]
    if response.status_code == 200 and response.request.url.path.endswith("/version"):
        try:
            body = response.json()
        except ValueError:
            return
        if isinstance(body, dict) and isinstance(body.get("version"), (str, int, float)):
            identity["server_version"] = str(body["version"])[:100]


def _root_url(base_url: str) -> str:
    """``http://h:8000/v1`` -> ``http://h:8000`` (``/version`` lives at the root)."""
    parts = urlsplit(base_url)
    path = parts.path[: -len("/v1")] if parts.path.endswith("/v1") else parts.path
    return urlunsplit(parts._replace(path=path.rstrip("/"))).rstrip("/")
