"""Several endpoints in one session: each started, preflighted and described once.

A suite may measure more than one server, or more than one simulator profile:
``example_suites/`` measures the simulator's ``llama-3.1-8b-h100`` profile and
its ``methodology/`` directory the small ``tiny`` profile, in one ``pytest``
call. A directory chooses its endpoint by overriding the ``llm_endpoint``
fixture in its ``conftest.py`` (``llm_endpoints.get("sim:tiny")``); a test,
class or module by the ``llm_endpoint("sim:tiny")`` marker.

:class:`EndpointPool` holds them, keyed by what was asked for (``sim``,
``sim:PROFILE`` or a URL, and the model): the first request for a key starts
its simulator (own process) or checks its server, later ones reuse it, and
:meth:`EndpointPool.close` stops every simulator at session end. Every endpoint
is prepared like the session's own: same API, timeouts, request fields and
key variable (URLs only), the same preflight (model resolved, the user's
request fields probed), its server identity and its own tokenizer. Each server is
asked ``GET /v1/models``, ``/version`` and ``/metrics`` once, at its preflight; the
identity, fingerprint, metrics source and tokenizer read those answers
(:mod:`~pytest_llmperf.plugin.endpoint_facts`).

Started servers: ``--llm-server-cmd`` (an :class:`EndpointSpec` with ``server``),
an ``llm_server`` marker's, ``--llm-reference-cmd``'s and the embedded simulator
are started by :mod:`~pytest_llmperf.plugin.endpoint_servers` (under xdist, the
controller's), then preflighted like any URL (the endpoint's URL is the server's plus
``/v1``); :meth:`EndpointPool.server_for` gives an endpoint's server (the run's
resource sampler and crash watch read it), and :meth:`EndpointPool.close` stops them
all. What a test asks for is an :class:`EndpointSpec`
(:mod:`~pytest_llmperf.plugin.endpoint_spec`).

``pinned``: ``--llm-endpoint`` (or ``--llm-server-cmd``) given on the command line
points the whole session at one server. Every request, whatever its spec, then returns the
session's endpoint: ``pytest suite --llm-endpoint=http://host:8000`` measures
that server everywhere. (Tests that compare configurations start their own
servers and are not routed through here.)

Library use needs no pytest: the plugin only maps errors to pytest's.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pytest_llmperf.apis.fields import RequestFields
from pytest_llmperf.client.endpoint import Endpoint
from pytest_llmperf.client.negotiation import UserFields
from pytest_llmperf.client.preflight import preflight_server_sync
from pytest_llmperf.client.preflight_result import PreflightResult
from pytest_llmperf.errors import LlmPerfUsageError
from pytest_llmperf.options import LlmPerfOptions
from pytest_llmperf.plugin.endpoint_facts import ServerFacts, scrapes_own_page
from pytest_llmperf.plugin.endpoint_servers import StartedServers
from pytest_llmperf.plugin.endpoint_spec import (
    REFERENCE_SERVER,
    SESSION_SERVER,
    EndpointSpec,
    ServerProgress,
    ServerView,
    several_endpoints,
)
from pytest_llmperf.workloads.apis import parse_api
from pytest_llmperf.workloads.tokenizer import Tokenizer

if TYPE_CHECKING:
    from pytest_llmperf.managed_server import ManagedServer
    from pytest_llmperf.server_metrics.fleet_source import MetricsSource

__all__ = [
    "REFERENCE_SERVER",
    "SESSION_SERVER",
    "EndpointPool",
    "EndpointSpec",
    "ServerProgress",
    "ServerView",
    "several_endpoints",
]


class EndpointPool:
    """The session's endpoints by spec, prepared on first use (see the module's docstring).

    ``user_fields``: the tests' ``extra_body`` fields, probed at each preflight (the
    list may grow until collection ends; it is read when an endpoint is prepared).
    ``on_first_use``: called once, before the first endpoint is prepared (the plugin
    arms the SIGTERM handler there: from then on the session measures).
    """

    def __init__(
        self,
        options: LlmPerfOptions,
        user_fields: Sequence[UserFields] = (),
        *,
        pinned: bool = False,
        on_first_use: Callable[[], None] = lambda: None,
        log_dir: Callable[[], Path] | None = None,
        progress: Callable[[], ServerProgress | None] = lambda: None,
        shared: Mapping[str, Mapping[str, Any]] | None = None,
    ) -> None:
        self.options = options
        self.default_spec = EndpointSpec.of_options(options)
        self.pinned = pinned
        self._user_fields = user_fields
        self._on_first_use: Callable[[], None] | None = on_first_use
        self._ready: dict[EndpointSpec, Endpoint] = {}
        self._failed: dict[EndpointSpec, LlmPerfUsageError] = {}
        self._facts = ServerFacts(options)  # what each server answered at its preflight
        # xdist worker: the controller's servers by server_key ({"url", "pid", "log", "server"})
        self._servers = StartedServers(options, log_dir=log_dir, progress=progress, shared=shared)

    def default(self) -> Endpoint:
        """The session's endpoint (``--llm-endpoint``, its ini key, or the default simulator)."""
        return self._prepared(self.default_spec)

    def get(self, spec: str | EndpointSpec, *, model: str | None = None) -> Endpoint:
        """The endpoint for ``spec`` (``"sim:tiny"``, a URL, or an :class:`EndpointSpec`),
        started and preflighted on first use; the session's endpoint when pinned.

        A bad spec, a simulator that does not start or a server that does not answer
        raises :class:`LlmPerfUsageError`; a failure is remembered, so the tests that
        ask again fail at once with the same message instead of waiting again.
        """
        wanted = (
            spec
            if isinstance(spec, EndpointSpec)
            else EndpointSpec.parse(spec, model=model, where="llm_endpoints.get()")
        )
        if self.pinned:  # the session's server, through the API the test asks for
            wanted = replace(self.default_spec, api=wanted.api)
        elif wanted.model is None:  # a URL of the session's server keeps its --llm-model
            wanted = replace(wanted, model=self._model_for(wanted))
        return self._prepared(wanted)

    def used(self) -> list[Endpoint]:
        """The endpoints prepared so far, in order of first use."""
        return list(self._ready.values())

    def identity(self, endpoint: Endpoint) -> dict[str, Any]:
        """What the server says it is (``server_version``, ``server_software``)."""
        return self._facts.identity(endpoint)

    def metrics_source(self, endpoint: Endpoint) -> MetricsSource | None:
        """Where ``endpoint``'s server metrics are scraped (None: off, or none answered)."""
        return self._facts.metrics_source(endpoint)

    def cache_resetter(self, endpoint: Endpoint) -> Callable[[Endpoint], dict[str, Any]] | None:
        """What resets the prefix cache before each gated run (None: ``--llm-reset-cache=off``;
        :meth:`~pytest_llmperf.plugin.endpoint_facts.ServerFacts.cache_resetter`)."""
        return self._facts.cache_resetter()

    def tokenizer(self, endpoint: Endpoint) -> Tokenizer | None:
        """The tokenizer that sizes prompts for ``endpoint`` (None before it is prepared;
        every API of one server and model shares what it measured, each with its own
        framing: chat's template for Responses and Messages, special tokens per input
        for embeddings)."""
        return self._facts.tokenizer(endpoint)

    def describe(self, endpoint: Endpoint) -> dict[str, Any]:
        """The endpoint's identity for reports: :meth:`Endpoint.describe` plus the server's."""
        return {**endpoint.describe(), **self.identity(endpoint)}

    def server_for(self, endpoint: Endpoint) -> ServerView | None:
        """The server behind ``endpoint`` when the gate started it (``--llm-server-cmd``, an
        ``llm_server`` marker, ``--llm-reference-cmd``, the simulator; under xdist a
        worker's view of the controller's), else None (a URL the gate did not start)."""
        return self._servers.server_for(endpoint.base_url)

    def servers(self) -> list[ManagedServer]:
        """Every server this pool started (not the controller's, in a worker), in order."""
        return self._servers.servers()

    def not_started(self) -> list[dict[str, Any]]:
        """The servers that did not start (exited first, missed their deadline, or could
        not be run), described as :meth:`ManagedServer.describe` would (``pid`` None)."""
        return self._servers.not_started()

    def session_server(self) -> ServerView | None:
        """``--llm-server-cmd``'s server once started (None before, or without one)."""
        endpoint = self._ready.get(replace(self.default_spec, api=None))
        return self.server_for(endpoint) if endpoint is not None else None

    def shared_info(self, endpoint: Endpoint) -> dict[str, Any] | None:
        """What an xdist worker needs to use ``endpoint``'s server as the controller's:
        its URL, pid, log and description (None: not a server this pool started)."""
        return self._servers.shared_info(endpoint.base_url)

    def log_dir(self) -> Path:
        """Where the started servers' logs go (``--llm-server-log-dir``, else
        ``llmperf-servers/`` under pytest's basetemp), made on first use."""
        return self._servers.log_dir()

    def started(self, spec: EndpointSpec) -> Endpoint:
        """``spec``'s endpoint (a server the gate starts: an ``llm_server`` marker's),
        started and preflighted on first use; never pinned to the session's server."""
        if spec.model is None:
            spec = replace(spec, model=self.options.model)
        return self._prepared(spec)

    def endpoint_of(self, spec: EndpointSpec) -> Endpoint | None:
        """``spec``'s prepared endpoint (None: not prepared)."""
        return self._ready.get(spec)

    def is_ready(self, spec: EndpointSpec) -> bool:
        """Whether ``spec``'s endpoint is prepared (its server started)."""
        return spec in self._ready

    def release(self, spec: EndpointSpec) -> None:
        """Stop ``spec``'s started server and forget it: the next request for ``spec``
        starts a new one (an ``llm_server`` marker's scope ended, or its server exited)."""
        endpoint = self._ready.pop(spec, None)
        self._failed.pop(spec, None)
        if endpoint is None:
            return
        for other in [s for s, e in self._ready.items() if e.base_url == endpoint.base_url]:
            del self._ready[other]  # the same server driven through another API
        self._servers.stop(endpoint.base_url)

    def close(self) -> None:
        """Stop every server this pool started, simulators included (idempotent)."""
        self._servers.close()

    def _model_for(self, spec: EndpointSpec) -> str | None:
        # --llm-model names the session's model: it follows the session's server only
        return self.options.model if spec.url == self.default_spec.url else None

    def _prepared(self, spec: EndpointSpec) -> Endpoint:
        if spec.api is not None and spec.api == self.options.api:
            spec = replace(spec, api=None)  # the session's own API: one preflight, not two
        if spec in self._ready:
            return self._ready[spec]
        if spec in self._failed:
            raise self._failed[spec]
        if self._on_first_use is not None:
            first, self._on_first_use = self._on_first_use, None
            first()
        try:
            if spec.api is not None:  # the server prepared once; this API preflighted apart
                endpoint = self.through_api(self._prepared(replace(spec, api=None)), spec.api)
            else:
                endpoint = self._prepare(spec)
        except LlmPerfUsageError as exc:
            self._failed[spec] = exc
            raise
        self._ready[spec] = endpoint
        return endpoint

    def _prepare(self, spec: EndpointSpec) -> Endpoint:
        preflight = self._start(spec, describe=True)
        self._facts.learn(preflight)  # identity, metrics source, fingerprint, tokenizer
        return preflight.endpoint

    def through_api(self, server: Endpoint, api: str) -> Endpoint:
        """``server`` (prepared) driven through ``api``: preflighted for that API, whose
        optional request fields are its own to negotiate (the user's are probed again);
        the server's ``GET /v1/models`` is its first preflight's, not asked again."""
        fields = RequestFields(extra=self.options.request_extra)
        return preflight_server_sync(
            replace(server, api=parse_api(api, where="--llm-api").value, fields=fields),
            self._user_fields,
            describe=False,
            listing=self._facts.listing(server.base_url),
        ).endpoint

    def start_apart(self, spec: EndpointSpec) -> Endpoint:
        """Start and preflight ``spec`` as an endpoint of its own, never shared by spec: a
        simulator gets a new process even where one of the same profile runs (an A/B
        reference must not be the candidate's server); stopped at :meth:`close`.

        Raises :class:`LlmPerfUsageError` if the simulator does not start, nothing
        answers, or the user's fields are refused.
        """
        preflight = self._start(spec, describe=False)
        self._facts.remember_listing(preflight)
        return preflight.endpoint

    def _start(self, spec: EndpointSpec, *, describe: bool) -> PreflightResult:
        """``spec``'s server started (or found), its endpoint made and preflighted
        (``describe``: :func:`~pytest_llmperf.client.preflight.preflight_server`'s)."""
        opts = self.options
        url, server = self._servers.url_for(spec)
        endpoint = Endpoint.from_env(
            url,
            api_key_env=opts.api_key_env if spec.sim_profile is None else None,
            model=spec.model,
            api=opts.api,
            timeouts=opts.timeouts,
            sim_profile=spec.sim_profile,
            fields=RequestFields(extra=opts.request_extra),
            affinity=opts.affinity,
        )
        if server is not None:
            self._servers.serves(endpoint.base_url, server)
        return preflight_server_sync(
            endpoint,
            self._user_fields,
            describe=describe,
            metrics=describe and scrapes_own_page(opts),
        )
