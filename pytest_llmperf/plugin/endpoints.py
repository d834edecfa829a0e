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

Started servers: ``--llm-server-cmd`` (an :class:`EndpointSpec` with ``server``),
an ``llm_server`` marker's, ``--llm-reference-cmd``'s and the embedded simulator
are each a :class:`~pytest_llmperf.managed_server.ManagedServer` (own process group,
log file, readiness deadline, the session's watchdog), then preflighted like any
URL (the endpoint's URL is the server's plus ``/v1``); :meth:`EndpointPool.server_for`
gives an endpoint's server (the run's resource sampler and crash watch read it), and
:meth:`EndpointPool.close` stops them all. Under xdist the session's server is the
controller's (started once, its URL and pid sent to the workers): a worker sees it
through a :class:`~pytest_llmperf.plugin.shared_server.SharedServer`.

``pinned``: ``--llm-endpoint`` (or ``--llm-server-cmd``) given on the command line
points the whole session at one server. Every request, whatever its spec, then returns the
session's endpoint: ``pytest suite --llm-endpoint=http://host:8000`` measures
that server everywhere. (Tests that compare configurations start their own
servers and are not routed through here.)

Library use needs no pytest: the plugin only maps errors to pytest's.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from pytest_llmperf.apis.fields import RequestFields
from pytest_llmperf.client.endpoint import Endpoint, normalize_base_url
from pytest_llmperf.client.negotiation import UserFields
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

if TYPE_CHECKING:
    from pytest_llmperf.managed_server import ManagedServer, ServerCommand, ServerExit

__all__ = ["EndpointPool", "EndpointSpec", "ServerView", "several_endpoints"]

SESSION_SERVER = "session"  # server_key of --llm-server-cmd's server
REFERENCE_SERVER = "reference"  # ... and of --llm-reference-cmd's


class ServerView(Protocol):
    """What the run's sampler and crash watch read of an endpoint's server: a
    :class:`~pytest_llmperf.managed_server.ManagedServer`, or under xdist a worker's
    view of the controller's (:class:`~pytest_llmperf.plugin.shared_server.SharedServer`)."""

    @property
    def pid(self) -> int: ...

    @property
    def log_path(self) -> Path: ...

    @property
    def exit(self) -> ServerExit | None: ...

    def poll(self) -> ServerExit | None: ...

    def log_tail(self, lines: int = 30) -> str: ...

    def describe(self) -> dict[str, Any]: ...


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
    # a server the gate starts (--llm-server-cmd, an llm_server marker, --llm-reference-cmd);
    # specs are told apart by server_key (a command holds a dict: it is not hashable)
    server: ServerCommand | None = field(default=None, compare=False)
    server_key: str | None = None

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
        """The session's endpoint: ``--llm-endpoint`` (or its ini key), ``--llm-server-cmd``'s
        server, else the simulator."""
        if options.endpoint_url is not None:
            return cls(url=options.endpoint_url, model=options.model)
        if options.server is not None:
            return cls(server=options.server, server_key=SESSION_SERVER, model=options.model)
        return cls(sim_profile=options.sim_profile or DEFAULT_SIM_PROFILE, model=options.model)

    @property
    def label(self) -> str:
        """``sim:tiny``, the URL, or a started server's command, as a user would write it."""
        if self.server is not None:
            return str(self.server.describe()["cmd"])
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
        # by base URL (and model): a run may carry a copy of the endpoint (dataclasses.replace)
        self._identity: dict[str, dict[str, Any]] = {}
        self._tokenizers: dict[tuple[str, str | None], Tokenizer] = {}
        self._bound: dict[tuple[str, str | None, str], Tokenizer] = {}
        self._metrics: dict[str, ServerMetricsSource | None] = {}  # --llm-server-metrics
        # every server this pool started, in order, and by endpoint base URL
        self._started: list[ManagedServer] = []
        self._not_started: list[dict[str, Any]] = []  # servers that did not start, described
        self._servers: dict[str, ServerView] = {}
        self._log_dir_of = log_dir or _temp_log_dir
        self._log_dir: Path | None = None  # made on the first start
        self._progress = progress
        # xdist worker: the controller's servers by server_key ({"url", "pid", "log", "server"})
        self._shared = dict(shared or {})

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

    def server_for(self, endpoint: Endpoint) -> ServerView | None:
        """The server behind ``endpoint`` when the gate started it (``--llm-server-cmd``, an
        ``llm_server`` marker, ``--llm-reference-cmd``, the simulator; under xdist a
        worker's view of the controller's), else None (a URL the gate did not start)."""
        return self._servers.get(endpoint.base_url)

    def servers(self) -> list[ManagedServer]:
        """Every server this pool started (not the controller's, in a worker), in order."""
        return list(self._started)

    def not_started(self) -> list[dict[str, Any]]:
        """The servers that did not start (exited first, missed their deadline, or could
        not be run), described as :meth:`ManagedServer.describe` would (``pid`` None)."""
        return [dict(d) for d in self._not_started]

    def session_server(self) -> ServerView | None:
        """``--llm-server-cmd``'s server once started (None before, or without one)."""
        endpoint = self._ready.get(replace(self.default_spec, api=None))
        return self.server_for(endpoint) if endpoint is not None else None

    def shared_info(self, endpoint: Endpoint) -> dict[str, Any] | None:
        """What an xdist worker needs to use ``endpoint``'s server as the controller's:
        its URL, pid, log and description (None: not a server this pool started)."""
        server = self.server_for(endpoint)
        if server is None:
            return None
        return {
            "url": endpoint.base_url,
            "pid": server.pid,
            "log": str(server.log_path),
            "server": server.describe(),
        }

    def log_dir(self) -> Path:
        """Where the started servers' logs go (``--llm-server-log-dir``, else
        ``llmperf-servers/`` under pytest's basetemp), made on first use."""
        if self._log_dir is None:
            path = self._log_dir_of()
            path.mkdir(parents=True, exist_ok=True)
            self._log_dir = path
        return self._log_dir

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
        server = self._servers.get(endpoint.base_url)
        if server is not None and hasattr(server, "stop"):
            server.stop()

    def close(self) -> None:
        """Stop every server this pool started, simulators included (idempotent)."""
        started, self._started = self._started, []
        for server in reversed(started):
            server.stop()

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
        server: ServerView | None = None
        if url is None:
            shared = self._shared.get(spec.server_key or "")
            if shared is not None:  # xdist worker: the controller's server
                from pytest_llmperf.plugin.shared_server import SharedServer

                key = os.environ.get(opts.api_key_env) if opts.api_key_env else None
                server = SharedServer(shared, secrets=(key,) if key else ())
                url = str(shared["url"])
            else:
                command = spec.server if spec.server is not None else _sim_command(spec)
                started = self._start_server(command, spec.model, sim=spec.server is None)
                server = started
                url = started.url + "/v1"
        endpoint = Endpoint.from_env(
            url,
            api_key_env=opts.api_key_env if spec.sim_profile is None else None,
            model=spec.model,
            api=opts.api,
            timeouts=opts.timeouts,
            sim_profile=spec.sim_profile,
            fields=RequestFields(extra=opts.request_extra),
        )
        if server is not None:
            self._servers[endpoint.base_url] = server
        return preflight_sync(endpoint, self._user_fields)

    def _start_server(
        self, command: ServerCommand, model: str | None, *, sim: bool = False
    ) -> ManagedServer:
        """``command`` started (its log in the session's log directory, its readiness
        shown live), then its first token timed once; a server that does not start
        raises :class:`~pytest_llmperf.managed_server.ServerStartError` (a usage error
        whose cause says whose it is)."""
        from pytest_llmperf.managed_server import ManagedServer, ServerStartError

        progress = self._progress()
        try:
            server = ManagedServer.start(
                command,
                log_dir=self.log_dir(),
                model=None if sim else model,  # the simulator serves any model name
                progress=progress.show if progress is not None else None,
                api_key_env=None if sim else self.options.api_key_env,
            )
        except ServerStartError as exc:  # the report lists it, with how it ended
            self._not_started.append(_not_started(command, exc))
            raise
        finally:
            if progress is not None:
                progress.end()
        self._started.append(server)
        with contextlib.suppress(Exception):  # a figure missing, never a failed start
            server.measure_first_token(model, self.options.api)
        return server


class ServerProgress(Protocol):
    """Where a starting server's one-line status goes (plugin/live_progress.py)."""

    def show(self, line: str) -> None: ...

    def end(self) -> None: ...


def _not_started(command: ServerCommand, exc: Any) -> dict[str, Any]:
    """A server that did not start, in :meth:`ManagedServer.describe`'s shape."""
    end = getattr(exc, "exit", None)
    tail = str(getattr(exc, "log_tail", "") or "")
    message = str(getattr(exc, "message", exc))
    exited = end is not None and "before it was ready" in message  # by itself, not by us
    return {
        **command.describe(),
        "pid": None,
        "log": getattr(exc, "log_path", None),
        "url": None,
        "startup": {"ready_s": None, "first_token_s": None},
        "ready_s": None,
        "first_token_s": None,
        "exit": end.to_dict(log_tail=tail) if end is not None else None,
        "stopped_by": None if exited else "pytest-llmperf",
        "error": message.split("\n", 1)[0],
    }


def _sim_command(spec: EndpointSpec) -> ServerCommand:
    """The embedded simulator of ``spec``'s profile as a started server (its readiness:
    its ``/v1/models``)."""
    from pytest_llmperf.managed_server import ServerCommand
    from pytest_llmperf.sim.process import sim_argv, sim_env

    profile = spec.sim_profile or DEFAULT_SIM_PROFILE
    return ServerCommand(
        argv=sim_argv(profile),
        env=sim_env(),
        name=f"sim-{profile}",
        ready_timeout_s=30.0,
        stop_grace_s=5.0,
    )


def _temp_log_dir() -> Path:
    """Library use without pytest: a fresh directory under the system's temporary one."""
    import tempfile

    return Path(tempfile.mkdtemp(prefix="llmperf-servers-"))


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
