"""What each prepared server told the session, read from its one preflight.

A server's preflight (:func:`~pytest_llmperf.client.preflight.preflight_server`)
asks ``GET /v1/models``, ``/version`` and ``/metrics`` once, and hands its
:class:`~pytest_llmperf.client.preflight_result.PreflightResult` here: the
identity (version and software), the ``/metrics`` source, the comparability
fingerprint and the tokenizer are each derived from those answers instead of
asking the server again. :class:`ServerFacts` keeps them by base URL (a run may
carry a copy of the endpoint, ``dataclasses.replace``), and the tokenizer by
server and model, bound once per API.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pytest_llmperf.client.endpoint import Endpoint
from pytest_llmperf.client.metadata import Answer
from pytest_llmperf.client.preflight_result import PreflightResult
from pytest_llmperf.options import LlmPerfOptions
from pytest_llmperf.reports.server_identity import server_identity
from pytest_llmperf.server_metrics.cache_reset import reset_prefix_cache
from pytest_llmperf.server_metrics.fingerprint import prefix_caching, session_fingerprint
from pytest_llmperf.server_metrics.fleet_reset import reset_fleet
from pytest_llmperf.server_metrics.fleet_source import FleetSource, MetricsSource, resolve_metrics
from pytest_llmperf.server_metrics.source import parse_option
from pytest_llmperf.session_tokenizer import session_tokenizer
from pytest_llmperf.workloads.tokenizer import Tokenizer, bind_api

__all__ = ["ServerFacts", "scrapes_own_page"]


def scrapes_own_page(options: LlmPerfOptions) -> bool:
    """Whether ``--llm-server-metrics`` scrapes the endpoint's own ``/metrics`` (``auto``
    or ``SECONDS``): then the preflight reads that page, once, for everyone."""
    return parse_option(options.server_metrics).mode == "auto"


class ServerFacts:
    """Identity, metrics source, fingerprint and tokenizer of each prepared server."""

    def __init__(self, options: LlmPerfOptions) -> None:
        self.options = options
        self._identity: dict[str, dict[str, Any]] = {}
        self._listings: dict[str, Answer] = {}  # each server's GET /v1/models, as preflighted
        self._metrics: dict[str, MetricsSource | None] = {}  # --llm-server-metrics: a page, a fleet
        self._tokenizers: dict[tuple[str, str | None], Tokenizer] = {}
        self._bound: dict[tuple[str, str | None, str], Tokenizer] = {}

    def learn(self, preflight: PreflightResult) -> None:
        """Derive everything from ``preflight``'s answers (no question asked twice)."""
        endpoint = preflight.endpoint
        self._listings[endpoint.base_url] = preflight.models
        identity = server_identity(preflight)
        source, note = resolve_metrics(
            endpoint, self.options.server_metrics, answered=preflight.metrics
        )
        self._metrics[endpoint.base_url] = source
        identity["server_metrics"] = note  # what the session line and the JSON say
        # what a baseline or history comparison must match (server_metrics/fingerprint.py)
        identity["fingerprint"] = session_fingerprint(endpoint, preflight=preflight)
        self._identity[endpoint.base_url] = identity
        # per endpoint: each model's tokenizer sizes the prompts sent to it
        self._tokenizers[endpoint.base_url, endpoint.model] = session_tokenizer(
            self.options.tokenizer, endpoint, listing=preflight.models
        )

    def listing(self, base_url: str) -> Answer | None:
        """The server's ``GET /v1/models`` answer from its preflight (None: not preflighted
        here): another API's preflight of the same server need not ask it again."""
        return self._listings.get(base_url)

    def remember_listing(self, preflight: PreflightResult) -> None:
        """Keep ``preflight``'s listing only (a server prepared apart: an A/B reference)."""
        self._listings.setdefault(preflight.endpoint.base_url, preflight.models)

    def identity(self, endpoint: Endpoint) -> dict[str, Any]:
        return dict(self._identity.get(endpoint.base_url, {}))

    def metrics_source(self, endpoint: Endpoint) -> MetricsSource | None:
        return self._metrics.get(endpoint.base_url)

    def tokenizer(self, endpoint: Endpoint) -> Tokenizer | None:
        key = (endpoint.base_url, endpoint.model)
        found = self._tokenizers.get(key)
        if found is None:
            return None
        bound = self._bound.get((*key, endpoint.api))
        if bound is None:  # bound once per API: a framing is measured once, not per test
            bound = self._bound[(*key, endpoint.api)] = bind_api(found, endpoint.api)
        return bound

    def cache_resetter(self) -> Callable[[Endpoint], dict[str, Any]] | None:
        """What resets the prefix cache before each gated run (None: ``--llm-reset-cache=off``);
        a server without a reset is asked once (cache_reset.py remembers per server). Its
        record says whether the user set the option (``asked``) and what the server's
        fingerprint tells of its prefix cache (``prefix_cache``), which decide whether a
        reset not done is said or only recorded (``cache_reset.reset_said``). Where the
        session reads a fleet of pages, each engine's server is reset instead of the
        endpoint (server_metrics/fleet_reset.py)."""
        if not self.options.reset_cache:
            return None
        asked = self.options.reset_cache_given

        def one(server: Endpoint) -> dict[str, Any]:
            return reset_prefix_cache(server).to_dict()

        def reset(target: Endpoint) -> dict[str, Any]:
            source = self._metrics.get(target.base_url)
            if isinstance(source, FleetSource):  # each engine's server, not the router
                record = reset_fleet(target, source, one)
            else:
                record = one(target)
            if record["prefix_cache"] is None:
                fingerprint = self._identity.get(target.base_url, {}).get("fingerprint")
                record["prefix_cache"] = prefix_caching(fingerprint)
            record["asked"] = asked
            return record

        return reset
