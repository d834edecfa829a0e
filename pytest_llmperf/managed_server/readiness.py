"""Is the server ready: one GET of its readiness URL, and the polling schedule.

The check is a plain :mod:`http.client` request straight to the server's address
(no proxy is ever used, whatever the environment says), with the endpoint's key as
a Bearer token when there is one (a server started with ``--api-key`` answers 401
without it). Ready: 200, and, when the URL is a model list and a model is named,
the list names that model.
"""

from __future__ import annotations

import http.client
import json
import ssl
from dataclasses import dataclass
from urllib.parse import urlsplit

__all__ = ["Probe", "next_delay", "probe"]

_BODY_LIMIT = 4 * 1024 * 1024
_FIRST_FOR_S = 1.0  # poll every 10 ms for this long: a 0.3 s start (the simulator, a
_FIRST_S = 0.01  # small llama-server) is not rounded up; a refused connect costs ~50 µs
_FAST_FOR_S = 3.0  # then every 50 ms for this long
_FAST_S = 0.05
_SLOW_S = 1.0


@dataclass(frozen=True)
class Probe:
    """One readiness check: ``ready``, and what was seen (``"connection refused"``,
    ``"HTTP 503"``, ``"HTTP 200, model 'x' not listed (lists: a, b)"``)."""

    ready: bool
    seen: str
    listed: tuple[str, ...] | None = None  # the models a 200 model list named


def next_delay(elapsed_s: float, previous_s: float) -> float:
    """How long to wait before the next check: 10 ms for the first second, 50 ms until the
    third, then growing by half each time up to 1 s."""
    if elapsed_s < _FIRST_FOR_S:
        return _FIRST_S
    if elapsed_s < _FAST_FOR_S:
        return _FAST_S
    return min(_SLOW_S, max(_FAST_S, previous_s * 1.5))


def probe(url: str, *, model: str | None, api_key: str | None, timeout_s: float = 2.0) -> Probe:
    """GET ``url`` once."""
    parts = urlsplit(url)
    host = parts.hostname or "127.0.0.1"
    conn: http.client.HTTPConnection
    if parts.scheme == "https":
        conn = http.client.HTTPSConnection(
            host, parts.port, timeout=timeout_s, context=ssl._create_unverified_context()
        )
    else:
        conn = http.client.HTTPConnection(host, parts.port, timeout=timeout_s)
    target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    headers = {"Accept": "application/json"}
    if api_key:
        headers["Authorization"] = f"Bearer {api_key}"
    try:
        conn.request("GET", target, headers=headers)
        response = conn.getresponse()
        body = response.read(_BODY_LIMIT)
        status = response.status
    except ConnectionRefusedError:
        return Probe(False, "connection refused")
    except (OSError, http.client.HTTPException) as exc:
        return Probe(False, type(exc).__name__ + (f": {exc}" if str(exc) else ""))
    finally:
        conn.close()
    if status != 200:
        return Probe(False, f"HTTP {status}")
    if model is None or not parts.path.rstrip("/").endswith("/models"):
        return Probe(True, "HTTP 200")
    listed = _model_ids(body)
    if listed is None:
        return Probe(False, "HTTP 200, not a model list")
    if model in listed:
        return Probe(True, "HTTP 200", listed)
    shown = ", ".join(listed[:5]) + (", …" if len(listed) > 5 else "") or "none"
    return Probe(False, f"HTTP 200, model {model!r} not listed (lists: {shown})", listed)


def _model_ids(body: bytes) -> tuple[str, ...] | None:
    try:
        data = json.loads(body)
    except ValueError:
        return None
    items = data.get("data", data.get("models")) if isinstance(data, dict) else None
    if not isinstance(items, list):
        return None
    ids: list[str] = []
    for item in items:
        if isinstance(item, dict):
            ids += [str(item[k]) for k in ("id", "name", "model") if item.get(k)]
        elif isinstance(item, str):
            ids.append(item)
    return tuple(dict.fromkeys(ids))
