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
request fields probed), its server identity and its own tokenizer.

``pinned``: ``--llm-endpoint`` given on the command line points the whole
session at one server. Every request, whatever its spec, then returns the
session's endpoint: ``pytest suite --llm-endpoint=http://host:8000`` measures
that server everywhere. (Tests that compare configurations start their own
servers and are not routed through here.)

Library use needs no pytest: the plugin only maps errors to pytest's.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from pytest_llmperf.client.endpoint import Endpoint, normalize_base_url
from pytest_llmperf.client.negotiation import UserFields
from pytest_llmperf.client.openai import RequestFields
from pytest_llmperf.client.preflight import preflight_sync
from pytest_llmperf.errors import LlmPerfUsageError
from pytest_llmperf.options import DEFAULT_SIM_PROFILE, LlmPerfOptions, sim_profile_of
from pytest_llmperf.reports.server_identity import probe_server_identity
from pytest_llmperf.server_metrics.cache_reset import reset_prefix_cache
from pytest_llmperf.server_metrics.fingerprint import prefix_caching, session_fingerprint
from pytest_llmperf.server_metrics.source import ServerMetricsSource, resolve_source
from pytest_llmperf.session_tokenizer import session_tokenizer
from pytest_llmperf.workloads.apis import Api, parse_api
from pytest_llmperf.workloads.tokenizer import Tokenizer, bind_api

__all__ = ["EndpointPool", "EndpointSpec", "several_endpoints"]


@dataclass(frozen=True, slots=True)
class EndpointSpec:
    """What a test, directory or option asks for: a simulator profile or a base URL.

    ``model`` None: the session's ``--llm-model`` (else discovered at preflight).
    ``api`` None: the session's ``--llm-api``; another one is the same server driven
    through that API (its own preflight: each API negotiates its own fields).
    """

    url: str | None = None  # normalized base URL ending in /v1; None: the simulator
    sim_profile: str | None = None
    model: str | None = None
    api: Api | None = None

    @classmethod
    def parse(
        cls, text: object, *, model: str | None = None, api: Api | None = None, where: str
    ) -> EndpointSpec:
        """``sim``, ``sim:PROFILE`` or ``http(s)://host:port[/v1]``; anything else is a
        usage error naming ``where`` (the test and marker, or the fixture)."""
        if not isinstance(text, str) or not text.strip():
            raise LlmPerfUsageError(
                f"expected 'sim', 'sim:PROFILE' or an http(s) URL, got {text!r}", where=where
            )
        if model is not None and (not isinstance(model, str) or not model.strip()):
            raise LlmPerfUsageError(f"model must be a non-empty string, got {model!r}", where=where)
        raw = text.strip()
        if raw == "sim" or raw.startswith("sim:"):
            return cls(sim_profile=sim_profile_of(where, raw), model=model, api=api)
        try:
            url = normalize_base_url(raw)
        except LlmPerfUsageError as exc:
            raise LlmPerfUsageError(str(exc), where=where) from None
        return cls(url=url, model=model, api=api)

    @classmethod
    def of_options(cls, options: LlmPerfOptions) -> EndpointSpec:
        """The session's endpoint: ``--llm-endpoint`` (or its ini key), else the simulator."""
        if options.endpoint_url is not None:
            return cls(url=options.endpoint_url, model=options.model)
        return cls(sim_profile=options.sim_profile or DEFAULT_SIM_PROFILE, model=options.model)

    @property
    def label(self) -> str:
        """``sim:tiny`` or the URL, as a user would write it."""
        return self.url if self.url is not None else f"sim:{self.sim_profile}"


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
    ) -> None:
        self.options = options
        self.default_spec = EndpointSpec.of_options(options)
        self.pinned = pinned
        self._user_fields = user_fields
        self._on_first_use: Callable[[], None] | None = on_first_use
        self._ready: dict[EndpointSpec, Endpoint] = {}
        self._failed: dict[EndpointSpec, LlmPerfUsageError] = {}
        # by base URL (and model): a run may carry a copy of the endpoint (dataclasses.replace)
        self._identity: dict[str, dict[str, Any]] = {}
        self._tokenizers: dict[tuple[str, str | None], Tokenizer] = {}
        self._bound: dict[tuple[str, str | None, str], Tokenizer] = {}
        self._metrics: dict[str, ServerMetricsSource | None] = {}  # --llm-server-metrics
        self._sims: list[Any] = []

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
        return dict(self._identity.get(endpoint.base_url, {}))

    def metrics_source(self, endpoint: Endpoint) -> ServerMetricsSource | None:
        """Where ``endpoint``'s server metrics are scraped (None: off, or none answered)."""
        return self._metrics.get(endpoint.base_url)

    def cache_resetter(self, endpoint: Endpoint) -> Callable[[Endpoint], dict[str, Any]] | None:
        """What resets the prefix cache before each gated run (None: ``--llm-reset-cache=off``);
        a server without a reset is asked once (cache_reset.py remembers per server). Its
        record says whether the user set the option (``asked``) and what the server's
        fingerprint tells of its prefix cache (``prefix_cache``), which decide whether a
        reset not done is said or only recorded (``cache_reset.reset_said``)."""
        if not self.options.reset_cache:
            return None
        asked = self.options.reset_cache_given

        def reset(target: Endpoint) -> dict[str, Any]:
            record = reset_prefix_cache(target).to_dict()
            if record["prefix_cache"] is None:
                fingerprint = self._identity.get(target.base_url, {}).get("fingerprint")
                record["prefix_cache"] = prefix_caching(fingerprint)
            record["asked"] = asked
            return record

        return reset

    def tokenizer(self, endpoint: Endpoint) -> Tokenizer | None:
        """The tokenizer that sizes prompts for ``endpoint`` (None before it is prepared;
        every API of one server and model shares what it measured, each with its own
        framing: chat's template for Responses and Messages, special tokens per input
        for embeddings)."""
        key = (endpoint.base_url, endpoint.model)
        found = self._tokenizers.get(key)
        if found is None:
            return None
        bound = self._bound.get((*key, endpoint.api))
        if bound is None:  # bound once per API: a framing is measured once, not per test
            bound = self._bound[(*key, endpoint.api)] = bind_api(found, endpoint.api)
        return bound

    def describe(self, endpoint: Endpoint) -> dict[str, Any]:
        """The endpoint's identity for reports: :meth:`Endpoint.describe` plus the server's."""
        return {**endpoint.describe(), **self.identity(endpoint)}

    def close(self) -> None:
        """Stop every simulator this pool started (idempotent)."""
        sims, self._sims = self._sims, []
        for sim in sims:
            sim.stop()

    # -- internals -------------------------------------------------------------

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
        endpoint = self.start_apart(spec)
        identity = probe_server_identity(endpoint)
        source, note = resolve_source(endpoint, self.options.server_metrics)
        self._metrics[endpoint.base_url] = source
        identity["server_metrics"] = note  # what the session line and the JSON say
        # what a baseline or history comparison must match (server_metrics/fingerprint.py)
        identity["fingerprint"] = session_fingerprint(endpoint)
        self._identity[endpoint.base_url] = identity
        # per endpoint: each model's tokenizer sizes the prompts sent to it
        self._tokenizers[endpoint.base_url, endpoint.model] = session_tokenizer(
            self.options.tokenizer, endpoint
        )
        return endpoint

    def through_api(self, server: Endpoint, api: str) -> Endpoint:
        """``server`` (prepared) driven through ``api``: preflighted for that API, whose
        optional request fields are its own to negotiate (the user's are probed again)."""
        fields = RequestFields(extra=self.options.request_extra)
        return preflight_sync(
            replace(server, api=parse_api(api, where="--llm-api").value, fields=fields),
            self._user_fields,
        )

    def start_apart(self, spec: EndpointSpec) -> Endpoint:
        """Start and preflight ``spec`` as an endpoint of its own, never shared by spec: a
        simulator gets a new process even where one of the same profile runs (an A/B
        reference must not be the candidate's server); stopped at :meth:`close`.

        Raises :class:`LlmPerfUsageError` if the simulator does not start, nothing
        answers, or the user's fields are refused.
        """
        opts = self.options
        url = spec.url
        if url is None:
            from pytest_llmperf.sim import start_sim_process

            profile = spec.sim_profile or DEFAULT_SIM_PROFILE
            try:
                sim = start_sim_process(profile)
            except Exception as exc:  # a broken profile: one clear message, not a traceback
                raise LlmPerfUsageError(
                    f"cannot start the embedded simulator ({profile}): {exc}"
                ) from None
            self._sims.append(sim)
            url = sim.url
        endpoint = Endpoint.from_env(
            url,
            api_key_env=opts.api_key_env if spec.url is not None else None,
            model=spec.model,
            api=opts.api,
            timeouts=opts.timeouts,
            sim_profile=spec.sim_profile,
            fields=RequestFields(extra=opts.request_extra),
        )
        return preflight_sync(endpoint, self._user_fields)


def several_endpoints(described: Sequence[dict[str, Any]]) -> dict[str, Any] | None:
    """The report's ``endpoint`` block when a session measured more than one endpoint
    (None for one or none): no single URL or model is claimed; ``endpoints`` lists each,
    and every test's own ``endpoint`` says which one it measured."""
    distinct: dict[tuple[Any, ...], dict[str, Any]] = {}
    for d in described:
        distinct.setdefault((d.get("url"), d.get("model"), d.get("simulator")), dict(d))
    if len(distinct) < 2:
        return None
    apis = {d.get("api") for d in distinct.values()}
    return {
        "url": None,
        "model": None,
        "api": apis.pop() if len(apis) == 1 else None,
        "simulator": None,
        "several": True,
        "endpoints": list(distinct.values()),
    }
