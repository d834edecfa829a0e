"""What a test, directory or option asks for (:class:`EndpointSpec`), and the report's
view of several endpoints (:func:`several_endpoints`).

Kept apart from the pool (:mod:`~pytest_llmperf.plugin.endpoints`) that prepares
them: markers and fixtures parse a spec without starting or asking anything.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from pytest_llmperf.client.endpoint import normalize_base_url
from pytest_llmperf.errors import LlmPerfUsageError
from pytest_llmperf.options import DEFAULT_SIM_PROFILE, LlmPerfOptions, sim_profile_of
from pytest_llmperf.workloads.apis import Api

if TYPE_CHECKING:
    from pytest_llmperf.managed_server import ServerCommand, ServerExit

__all__ = [
    "REFERENCE_SERVER",
    "SESSION_SERVER",
    "EndpointSpec",
    "ServerProgress",
    "ServerView",
    "several_endpoints",
]

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


class ServerProgress(Protocol):
    """Where a starting server's one-line status goes (plugin/live_progress.py)."""

    def show(self, line: str) -> None: ...

    def end(self) -> None: ...


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
