"""The servers a session starts for its endpoints, and the controller's under xdist.

``--llm-server-cmd``, an ``llm_server`` marker's command, ``--llm-reference-cmd``
and the embedded simulator are each a
:class:`~pytest_llmperf.managed_server.ManagedServer` (own process group, log file,
readiness deadline, the session's watchdog); :class:`StartedServers` starts them,
remembers which endpoint each serves (the run's resource sampler and crash watch
read it), lists those that did not start for the report, and stops them all at the
session's end. Under xdist the session's server is the controller's (started once,
its URL and pid sent to the workers): a worker sees it through a
:class:`~pytest_llmperf.plugin.shared_server.SharedServer`. The pool
(:mod:`~pytest_llmperf.plugin.endpoints`) preflights what starts here.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pytest_llmperf.options import DEFAULT_SIM_PROFILE, LlmPerfOptions
from pytest_llmperf.plugin.endpoint_spec import EndpointSpec, ServerProgress, ServerView

if TYPE_CHECKING:
    from pytest_llmperf.managed_server import ManagedServer, ServerCommand

__all__ = ["StartedServers"]


class StartedServers:
    """Every server the pool started, in order and by endpoint base URL.

    ``log_dir``: where their logs go, made on the first start; ``progress``: where a
    starting server's status line goes; ``shared``: under xdist, the controller's
    servers by ``server_key`` (``{"url", "pid", "log", "server"}``).
    """

    def __init__(
        self,
        options: LlmPerfOptions,
        *,
        log_dir: Callable[[], Path] | None = None,
        progress: Callable[[], ServerProgress | None] = lambda: None,
        shared: Mapping[str, Mapping[str, Any]] | None = None,
    ) -> None:
        self.options = options
        self._started: list[ManagedServer] = []
        self._not_started: list[dict[str, Any]] = []  # servers that did not start, described
        self._by_url: dict[str, ServerView] = {}
        self._log_dir_of = log_dir or _temp_log_dir
        self._log_dir: Path | None = None
        self._progress = progress
        self._shared = dict(shared or {})

    def url_for(self, spec: EndpointSpec) -> tuple[str, ServerView | None]:
        """``spec``'s base URL (ending in ``/v1``) and, where the gate runs it, its server:
        the controller's under xdist, else started now; a URL spec is its own URL."""
        if spec.url is not None:
            return spec.url, None
        shared = self._shared.get(spec.server_key or "")
        if shared is not None:  # xdist worker: the controller's server
            from pytest_llmperf.plugin.shared_server import SharedServer

            env = self.options.api_key_env
            key = os.environ.get(env) if env else None
            return str(shared["url"]), SharedServer(shared, secrets=(key,) if key else ())
        command = spec.server if spec.server is not None else _sim_command(spec)
        started = self._start(command, spec.model, sim=spec.server is None)
        return started.url + "/v1", started

    def serves(self, base_url: str, server: ServerView) -> None:
        """Remember that ``server`` serves the endpoint at ``base_url``."""
        self._by_url[base_url] = server

    def server_for(self, base_url: str) -> ServerView | None:
        return self._by_url.get(base_url)

    def stop(self, base_url: str) -> None:
        """Stop the server at ``base_url`` (a view of the controller's is not stopped)."""
        server = self._by_url.get(base_url)
        if server is not None and hasattr(server, "stop"):
            server.stop()

    def shared_info(self, base_url: str) -> dict[str, Any] | None:
        """The URL, pid, log and description of the server at ``base_url`` (None: none)."""
        server = self._by_url.get(base_url)
        if server is None:
            return None
        return {
            "url": base_url,
            "pid": server.pid,
            "log": str(server.log_path),
            "server": server.describe(),
        }

    def servers(self) -> list[ManagedServer]:
        return list(self._started)

    def not_started(self) -> list[dict[str, Any]]:
        return [dict(d) for d in self._not_started]

    def log_dir(self) -> Path:
        """Where the started servers' logs go, made on first use."""
        if self._log_dir is None:
            path = self._log_dir_of()
            path.mkdir(parents=True, exist_ok=True)
            self._log_dir = path
        return self._log_dir

    def close(self) -> None:
        """Stop every server started here, last first (idempotent)."""
        started, self._started = self._started, []
        for server in reversed(started):
            server.stop()

    def _start(
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
