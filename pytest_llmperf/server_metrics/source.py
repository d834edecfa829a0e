"""Where a session's server metrics come from: ``--llm-server-metrics=auto|off|URL|SECONDS``.

``auto`` (the default) and ``SECONDS`` scrape the endpoint's own ``/metrics``
(the server's root beside ``/v1``: ``http://h:8000/v1`` -> ``http://h:8000/metrics``),
``URL`` a page the user names (one worker behind a router, TGI's separate
Prometheus port), ``off`` nothing. The page is read once at preflight
(:func:`resolve_source`): a server without one, or whose page is not Prometheus
text, gets no scraping for the session and the header says why — never an
error, since server metrics only explain a run, they never decide whether it
can happen. What is a usage error is an option value that means nothing
(:func:`parse_option`), found at configure time.

:func:`scrape_once` is the one bounded read every scrape goes through (the
probe, and each of the sampler's): through the metadata client
(:mod:`pytest_llmperf.client.metadata`: deadlines by cancellation, bodies
capped), never raising, a failure being a reason in words.
"""

from __future__ import annotations

import time
from collections.abc import Collection
from dataclasses import dataclass
from urllib.parse import urlsplit, urlunsplit

from pytest_llmperf.client.blocking_metadata import BlockingMetadataClient
from pytest_llmperf.client.endpoint import Endpoint, redact_url
from pytest_llmperf.client.metadata import (
    CallLimits,
    MetadataCallError,
    server_root,
)
from pytest_llmperf.client.preflight_result import METRICS_LIMIT_S, Outcome
from pytest_llmperf.errors import LlmPerfUsageError
from pytest_llmperf.server_metrics.exposition import Scrape, ScrapeFailure, parse_scrape
from pytest_llmperf.server_metrics.families import family_of
from pytest_llmperf.server_metrics.page_list import PageList, is_page_list, parse_page_list
from pytest_llmperf.server_metrics.summary import ServerFamily

__all__ = [
    "DEFAULT_INTERVAL_S",
    "OPTION",
    "PROBE_LIMIT_S",
    "SCRAPE_LIMIT_S",
    "MetricsOption",
    "ServerMetricsSource",
    "metrics_client",
    "metrics_url",
    "origin",
    "parse_option",
    "resolve_source",
    "scrape_once",
    "scraped",
]

OPTION = "--llm-server-metrics"
DEFAULT_INTERVAL_S = 1.0
SCRAPE_LIMIT_S = 2.0  # one scrape, whole: a page a server cannot serve in 2 s is not sampled
PROBE_LIMIT_S = METRICS_LIMIT_S  # the preflight read (retries of a 503 while a server warms up)
_MAX_INTERVAL_S = 3600.0
_REASON_LIMIT = 200


def metrics_url(base_url: str) -> str:
    """``http://h:p/v1`` -> ``http://h:p/metrics`` (the server's root, beside ``/v1``)."""
    return server_root(base_url) + "/metrics"


@dataclass(frozen=True, slots=True)
class MetricsOption:
    """``--llm-server-metrics`` parsed: ``mode`` is ``"auto"``, ``"off"``, ``"url"`` or
    ``"fleet"`` (a list of pages, ``pages``: :mod:`.page_list`)."""

    mode: str
    interval_s: float = DEFAULT_INTERVAL_S
    url: str | None = None
    pages: PageList | None = None


def parse_option(value: object) -> MetricsOption:
    """``--llm-server-metrics``'s value: ``auto`` (or empty), ``off``, an ``http(s)://`` URL,
    seconds between samples (``2``, ``0.5``, ``2s``; more than 0, less than an hour), or a
    list of pages (``ROLE[:NAME]=URL,...``, ``@FILE``, ``discover=URL``: :mod:`.page_list`).

    Anything else is a :class:`~pytest_llmperf.errors.LlmPerfUsageError` naming the
    option and the value (the plugin calls this at configure time).
    """
    text = str(value if value is not None else "auto").strip()
    lowered = text.lower()
    if lowered in ("", "auto"):
        return MetricsOption("auto")
    if lowered == "off":
        return MetricsOption("off")
    if lowered.startswith(("http://", "https://")):
        parts = urlsplit(text)
        if not parts.hostname:
            raise LlmPerfUsageError(f"a /metrics URL needs a host, got {value!r}", where=OPTION)
        return MetricsOption("url", url=text)
    if is_page_list(text):
        pages = parse_page_list(text, where=OPTION)
        return MetricsOption("fleet", interval_s=pages.interval_s, pages=pages)
    try:
        seconds = float(lowered.removesuffix("s"))
    except ValueError:
        raise LlmPerfUsageError(
            f"expected auto, off, a /metrics URL (http://host:port/metrics), the seconds "
            f"between samples or a list of pages (ROLE[:NAME]=URL,...; @FILE; discover=URL), "
            f"got {value!r}",
            where=OPTION,
        ) from None
    if not 0 < seconds < _MAX_INTERVAL_S:  # NaN fails this too
        raise LlmPerfUsageError(
            f"the seconds between samples must be more than 0 and less than 3600, got {value!r}",
            where=OPTION,
        )
    return MetricsOption("auto", interval_s=seconds)


@dataclass(frozen=True, slots=True)
class ServerMetricsSource:
    """A ``/metrics`` page that answered Prometheus text at preflight.

    ``url``: the page; ``interval_s``: seconds between samples during a run;
    ``family``: whose metric names it uses, as the probe saw them.
    """

    url: str
    interval_s: float = DEFAULT_INTERVAL_S
    family: ServerFamily = ServerFamily.UNKNOWN

    def describe(self) -> str:
        """What the session header says: ``vllm at http://h:8000/metrics every 1 s``."""
        return f"{self.family.value} at {redact_url(self.url)} every {self.interval_s:g} s"


def resolve_source(
    endpoint: Endpoint,
    option: str,
    *,
    limit_s: float = PROBE_LIMIT_S,
    answered: Outcome | None = None,
) -> tuple[ServerMetricsSource | None, str]:
    """The session's source for ``--llm-server-metrics=option`` and the header's note.

    ``off``: ``(None, "off")``. Otherwise the page (the endpoint's ``/metrics``,
    or the URL given) is read once, within ``limit_s``: Prometheus text
    gives a source (``"vllm at http://h:8000/metrics every 1 s"``); anything else
    ``None`` and why (``"none (GET http://h:8000/metrics: 404)"``). Blocks the
    calling thread for at most that limit (a loop's caller: ``asyncio.to_thread``).
    A bad ``option`` is a usage error. ``answered``: the endpoint's own page as the
    preflight read it (:attr:`~pytest_llmperf.client.preflight_result.PreflightResult.metrics`):
    not asked again where that is the page (``auto``, ``SECONDS``).
    """
    parsed = parse_option(option)
    if parsed.mode == "off":
        return None, "off"
    if parsed.mode == "fleet":  # several pages: resolve.resolve_metrics
        raise LlmPerfUsageError("a list of pages is resolved as a fleet", where=OPTION)
    url = parsed.url if parsed.url is not None else metrics_url(endpoint.base_url)
    if answered is not None and parsed.url is None:
        got = scraped(url, answered, time.monotonic_ns())
    else:
        with metrics_client(endpoint, url, limit_s) as client:
            got = scrape_once(client, url, retry=True)
    if isinstance(got, ScrapeFailure):
        return None, f"none ({got.reason})"
    source = ServerMetricsSource(url, parsed.interval_s, family_of(got))
    return source, source.describe()


def metrics_client(endpoint: Endpoint, url: str, limit_s: float) -> BlockingMetadataClient:
    """A metadata client for ``url`` whose every call ends within ``limit_s``.

    The endpoint's credentials go only to its own origin: a ``/metrics`` URL on
    another host or port (a worker, TGI's Prometheus port) is asked without them.
    """
    target = endpoint
    if origin(url) != origin(endpoint.base_url):
        target = Endpoint(base_url=f"{server_root(url)}/v1", timeouts=endpoint.timeouts)
    return BlockingMetadataClient(target, limits=CallLimits.of(target.timeouts).within(limit_s))


def _plain(url: str) -> str:
    """``url`` without ``user:password@`` (its client carries them as a header instead)."""
    parts = urlsplit(url)
    if parts.username is None and parts.password is None:
        return url
    host = parts.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    if parts.port:
        host = f"{host}:{parts.port}"
    return urlunsplit(parts._replace(netloc=host))


def origin(url: str) -> tuple[str, str, int | None]:
    """``url``'s scheme, host (lower case) and port: where credentials may go."""
    parts = urlsplit(url)
    try:
        port = parts.port
    except ValueError:
        port = None
    return parts.scheme, (parts.hostname or "").lower(), port


def scrape_once(
    client: BlockingMetadataClient,
    url: str,
    *,
    retry: bool = False,
    keep: Collection[str] | None = None,
) -> Scrape | ScrapeFailure:
    """``GET url`` through ``client`` and its parse, or why there is none. Never raises.

    The scrape's time is taken once the body is in (before parsing). A status
    other than 200 is ``GET url: 404``; a page that is not Prometheus text says
    what it looks like; no answer in time says what the server did. ``keep``: the
    metric names to parse (:func:`~pytest_llmperf.server_metrics.exposition.parse_scrape`).
    """
    try:
        answer: Outcome = client.call("GET", _plain(url), retry=retry)
    except MetadataCallError as exc:
        answer = exc
    except Exception as exc:  # never out of a scrape: the run must not notice
        return ScrapeFailure(_short(f"GET {redact_url(url)}: {type(exc).__name__}: {exc}"))
    return scraped(url, answer, time.monotonic_ns(), keep=keep)


def scraped(
    url: str, answer: Outcome, at_ns: int, *, keep: Collection[str] | None = None
) -> Scrape | ScrapeFailure:
    """A read of ``url`` (an answer, or the error that ended the call) as a scrape taken
    at ``at_ns``, or why there is none (:func:`scrape_once`'s words)."""
    shown = redact_url(url)
    if isinstance(answer, MetadataCallError):
        what = answer.attempts[-1].what if answer.attempts else answer.message
        return ScrapeFailure(_short(f"GET {shown}: {what}"))
    if answer.status != 200:
        said = f" {answer.message}" if answer.message else ""
        return ScrapeFailure(_short(f"GET {shown}: {answer.status}{said}"))
    got = parse_scrape(answer.body, at_ns, keep=keep)
    if isinstance(got, ScrapeFailure):
        return ScrapeFailure(_short(f"GET {shown}: {got.reason}"))
    return got


def _short(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= _REASON_LIMIT else text[: _REASON_LIMIT - 1] + "…"
