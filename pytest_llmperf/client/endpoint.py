"""The endpoint under test: where, which model, which API, which key.

The API key is held out of ``repr`` and every printable form; the only place
it is used is the headers built in :meth:`Endpoint.headers` (``Authorization:
Bearer``, and ``x-api-key`` as well on the Anthropic Messages API).
User:password in a URL is likewise stripped from :attr:`Endpoint.label`.
"""

from __future__ import annotations

import base64
import os
from dataclasses import asdict, dataclass, field, replace
from typing import Any
from urllib.parse import SplitResult, unquote, urlsplit, urlunsplit

import httpx

from pytest_llmperf.apis.fields import DEFAULT_FIELDS, RequestFields
from pytest_llmperf.apis.format import ApiFormat
from pytest_llmperf.apis.names import Api
from pytest_llmperf.apis.registry import API_PATHS, api_format
from pytest_llmperf.client.affinity import NO_AFFINITY, Affinity
from pytest_llmperf.errors import LlmPerfUsageError

__all__ = ["Endpoint", "Timeouts", "normalize_base_url", "redact_url"]


@dataclass(frozen=True, slots=True)
class Timeouts:
    """Per-request limits in seconds; each one turns a hang into a failed request.

    ``connect``: TCP/TLS connection; ``first_token``: send to first generated
    text; ``stall``: longest silence between two reads of a stream;
    ``total``: send to end of stream.
    """

    connect: float = 10.0
    first_token: float = 120.0
    stall: float = 60.0
    total: float = 600.0

    @classmethod
    def parse(cls, text: str | float, *, default_s: float = 120.0) -> Timeouts:
        """The ``--llm-timeout`` value: ``S``, or ``connect=S,first_token=S,stall=S,total=S``.

        Keys not given keep the values of the plain ``S`` form (``default_s``
        when no plain number is given); a bare number may be mixed in, as in
        ``60,connect=2``. Every value must be a finite number of seconds > 0,
        and ``first_token`` may not exceed ``total``.
        """
        if isinstance(text, int | float) and not isinstance(text, bool):
            return cls.from_seconds(float(text))
        items = [p.strip() for p in str(text).split(",") if p.strip()]
        if not items:
            raise LlmPerfUsageError(f"expected seconds or key=seconds pairs, got {text!r}")
        base = [p for p in items if "=" not in p]
        if len(base) > 1:
            raise LlmPerfUsageError(f"give one plain number of seconds at most, got {text!r}")
        values = asdict(cls.from_seconds(_seconds(base[0], text) if base else default_s))
        for item in items:
            if "=" not in item:
                continue
            key, _, raw = item.partition("=")
            key = key.strip().replace("-", "_")
            if key not in values:
                raise LlmPerfUsageError(
                    f"unknown timeout {key!r} in {text!r}; use connect, first_token, stall, total"
                )
            values[key] = _seconds(raw, text)
        if values["first_token"] > values["total"]:
            raise LlmPerfUsageError(
                f"first_token={values['first_token']:g}s exceeds total={values['total']:g}s "
                f"in {text!r}"
            )
        return cls(**values)

    @classmethod
    def from_seconds(cls, seconds: float) -> Timeouts:
        """The ``--llm-timeout=S`` shorthand: total, first token and stall all bounded by S."""
        if not seconds > 0:
            raise LlmPerfUsageError(f"timeout must be > 0 seconds, got {seconds!r}")
        return cls(
            connect=min(10.0, seconds),
            first_token=seconds,
            stall=seconds,
            total=seconds,
        )


def _seconds(raw: str, text: object) -> float:
    raw = raw.strip()
    within = "" if raw == str(text).strip() else f" (in {text!r})"
    try:
        value = float(raw)
    except ValueError:
        raise LlmPerfUsageError(f"expected a float, got {raw!r}{within} (seconds)") from None
    if not 0 < value < float("inf"):
        raise LlmPerfUsageError(f"must be > 0 seconds and finite, got {raw!r}{within}")
    return value


def _without_userinfo(parts: SplitResult) -> str:
    host = parts.hostname or ""
    if ":" in host:  # IPv6 literal
        host = f"[{host}]"
    if parts.port:
        host = f"{host}:{parts.port}"
    return urlunsplit(parts._replace(netloc=host))


def redact_url(url: str) -> str:
    """``url`` without user info, for display."""
    parts = urlsplit(url)
    if parts.username or parts.password:
        host = parts.hostname or ""
        if parts.port:
            host = f"{host}:{parts.port}"
        parts = parts._replace(netloc=f"***@{host}")
    return urlunsplit(parts)


def normalize_base_url(url: str) -> str:
    """``http://h:8000``, ``http://h:8000/`` and ``http://h:8000/v1/`` all become ``.../v1``.

    So does a full request URL such as ``http://h:8000/v1/chat/completions`` (or
    ``/v1/responses``, ``/v1/messages``, ``/v1/embeddings``), a common paste that
    would otherwise make every request a 404.
    """
    raw = url.strip()
    parts = urlsplit(raw)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise LlmPerfUsageError(
            f"endpoint URL must look like http://host:port[/v1], got {redact_url(raw)!r}"
        )
    path = parts.path.rstrip("/")
    for api_path in (*API_PATHS.values(), "/models"):
        if path.endswith("/v1" + api_path):  # a request URL pasted as the base URL
            path = path[: -len(api_path)]
            break
    if not path.endswith("/v1"):
        path = f"{path}/v1"
    return urlunsplit(parts._replace(path=path, query="", fragment=""))


@dataclass(frozen=True)
class Endpoint:
    """A configured OpenAI-compatible endpoint.

    ``base_url`` ends in ``/v1``. ``model`` may be ``None`` until resolved
    from ``GET /v1/models`` (see :func:`pytest_llmperf.client.resolve_model`).
    ``sim_profile`` is set when this is the embedded simulator. ``fields``
    says which optional request fields the server accepts and which fields
    the user adds (negotiated at preflight, :mod:`~pytest_llmperf.client.negotiation`).
    ``affinity`` says what a conversation's requests carry to stay on one replica and
    which response headers name the replica (``--llm-affinity``, ``--llm-replica-header``:
    :mod:`~pytest_llmperf.client.affinity`).
    """

    base_url: str
    model: str | None = None
    api: str = Api.CHAT.value
    timeouts: Timeouts = field(default_factory=Timeouts)
    api_key: str | None = field(default=None, repr=False, compare=False)
    sim_profile: str | None = None
    url_credentials: tuple[str, str] | None = field(default=None, repr=False, compare=False)
    fields: RequestFields = DEFAULT_FIELDS
    # not the server's identity: an endpoint pinned another way is the same server
    affinity: Affinity = field(default=NO_AFFINITY, compare=False)

    def __post_init__(self) -> None:
        api_format(self.api)  # a usage error for a name no format in the registry has
        # user:password@ in the URL moves out of the URL at once (into a Basic auth header),
        # so no URL this object hands out, prints or puts in a request line carries it.
        parts = urlsplit(self.base_url)
        if parts.username is not None or parts.password is not None:
            user, password = unquote(parts.username or ""), unquote(parts.password or "")
            object.__setattr__(self, "url_credentials", (user, password))
            object.__setattr__(self, "base_url", _without_userinfo(parts))

    @classmethod
    def from_env(
        cls,
        url: str,
        *,
        api_key_env: str | None = "OPENAI_API_KEY",
        model: str | None = None,
        api: str = Api.CHAT.value,
        timeouts: Timeouts | None = None,
        sim_profile: str | None = None,
        fields: RequestFields = DEFAULT_FIELDS,
        affinity: Affinity = NO_AFFINITY,
    ) -> Endpoint:
        """An endpoint at ``url`` (normalized to end in ``/v1``) with the API key read from
        the environment variable ``api_key_env`` (None: no key)."""
        key = os.environ.get(api_key_env) if api_key_env else None
        return cls(
            base_url=normalize_base_url(url),
            model=model,
            api=api,
            timeouts=timeouts if timeouts is not None else Timeouts(),
            api_key=key or None,
            sim_profile=sim_profile,
            fields=fields,
            affinity=affinity,
        )

    @property
    def label(self) -> str:
        """Printable identity: URL without credentials, plus the simulator profile."""
        text = redact_url(self.base_url)
        return (
            f"{text} (embedded simulator, profile {self.sim_profile})" if self.sim_profile else text
        )

    @property
    def format(self) -> ApiFormat:
        """The wire format of :attr:`api` (:mod:`pytest_llmperf.apis`)."""
        return api_format(self.api)

    @property
    def request_url(self) -> str:
        return self.base_url + self.format.path

    def headers(self, api: str | None = None) -> dict[str, str]:
        """The headers of every request of ``api`` (default: this endpoint's API).

        The key goes as ``Authorization: Bearer`` on every API (vLLM's ``--api-key``
        checks that one, on ``/v1/messages`` too); the Anthropic Messages API also
        gets it as ``x-api-key`` (Anthropic's own header; llama.cpp's server reads it
        when ``Authorization`` is absent) and ``anthropic-version``, which
        Anthropic-compatible servers may require: each format adds its own
        (:attr:`~pytest_llmperf.apis.format.ApiFormat.headers`).
        """
        out: dict[str, str] = {}
        if self.api_key:
            out["Authorization"] = f"Bearer {self.api_key}"
        elif self.url_credentials:
            token = base64.b64encode(":".join(self.url_credentials).encode()).decode()
            out["Authorization"] = f"Basic {token}"
        out.update(api_format(api or self.api).headers(self.api_key))
        return out

    @property
    def secrets(self) -> tuple[str, ...]:
        """What must never be printed: the API key and a URL password (for scrubbing)."""
        found = (self.api_key, self.url_credentials[1] if self.url_credentials else None)
        return tuple(s for s in found if s)

    def with_model(self, model: str) -> Endpoint:
        return replace(self, model=model)

    def with_fields(self, fields: RequestFields) -> Endpoint:
        return replace(self, fields=fields)

    def describe(self) -> dict[str, Any]:
        """The endpoint's identity for reports (never the key); ``affinity`` only where
        some is configured."""
        out = {
            "url": redact_url(self.base_url),
            "model": self.model,
            "api": self.api,
            "simulator": self.sim_profile,
            "api_key": "set" if self.api_key else "none",
            "request_fields": self.fields.describe(self.format.field_rules),
        }
        if self.affinity.rules:
            out["affinity"] = self.affinity.describe()
        return out

    def client(self, *, max_connections: int | None = 1024) -> httpx.AsyncClient:
        """A fresh ``httpx.AsyncClient`` (httpx's own transport), for your own requests.

        Must be called inside the running event loop that will use it. It
        serves the metadata client (:mod:`~pytest_llmperf.client.metadata`,
        which bounds and retries every call outside a run) and your own
        requests in a test; the load generator
        streams through the leaner
        :class:`~pytest_llmperf.client.stream_client.StreamClient`, so httpx's
        plain transport is all that is needed here (no aiohttp underneath:
        :mod:`~pytest_llmperf.client.failures` classifies its exceptions).
        The environment is ignored (no proxies) except ``SSL_CERT_FILE`` /
        ``SSL_CERT_DIR`` (:mod:`~pytest_llmperf.tls`). The process's
        file-descriptor limit is raised to fit ``max_connections`` sockets first
        (a usage error if the OS refuses), so a big run cannot fail half-way on EMFILE.
        ``max_connections=None`` (open-loop loads) sizes the pool by the descriptor
        budget instead, so no request ever waits in the client for a connection.
        A header that would break HTTP framing (an API key with a newline) is a
        usage error naming the header, never its value.
        """
        from pytest_llmperf.client.fdlimits import connection_budget, ensure_descriptors
        from pytest_llmperf.client.http1 import check_request_headers
        from pytest_llmperf.tls import tls_context

        headers = self.headers()
        try:
            check_request_headers(headers)
        except ValueError as exc:
            raise LlmPerfUsageError(
                f"cannot send requests to {self.label}: {exc}", where="--llm-endpoint"
            ) from None
        if max_connections is None:
            max_connections = connection_budget()
        else:
            ensure_descriptors(max_connections, what="connections (concurrency)")
        limits = httpx.Limits(
            max_connections=max_connections,
            max_keepalive_connections=max_connections,
            keepalive_expiry=30.0,
        )
        t = self.timeouts
        transport = httpx.AsyncHTTPTransport(verify=tls_context(), limits=limits, trust_env=False)
        return httpx.AsyncClient(
            transport=transport,
            timeout=httpx.Timeout(connect=t.connect, read=t.stall, write=t.stall, pool=None),
            headers=headers,
            trust_env=False,
        )
