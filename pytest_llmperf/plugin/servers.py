"""Servers the gate starts, in pytest's terms: the ``llm_server`` marker's scopes, the
session's server that exited, and xdist.

- ``llm_server(cmd=..., restart="test"|"module"|"session")``: the test's server,
  started before the test's first use of ``llm_loadgen`` (or of ``llm_endpoint``,
  whose value the test then receives: the marker's server) and stopped when its
  scope ends (a finalizer on the test or its module; a ``session`` one at the
  session's end). Each test of ``restart="test"`` gets a server of its own, so its
  runs carry their own startup figures. One that exited is started afresh for the
  next test that asks (``test``/``module``); a ``session`` one cannot be.
- ``--llm-server-cmd``'s server (``restart`` session) that exited mid-session: the
  next test that needs the endpoint errors and the session stops (exit status 1), the
  exit recorded as the stop (gate_states.py: ``server exited``).
- xdist: the controller starts the session's server (and ``--llm-reference-cmd``'s)
  once, before any worker (plugin/collection.py's ``preflight_controller``), and
  hands their URL, pid and log to each worker (``workerinput``); a worker measures it
  as a URL and sees it through :class:`~pytest_llmperf.plugin.shared_server.SharedServer`.
  ``llm_server`` servers are started by the worker that runs the test; the servers a
  worker started come back to the controller's report (``workeroutput``).
"""

from __future__ import annotations

from typing import Any

import pytest

from pytest_llmperf.client.endpoint import Endpoint
from pytest_llmperf.errors import LlmPerfUsageError, StopCause
from pytest_llmperf.gate_states import StopPhase
from pytest_llmperf.plugin.base import (
    SHARED_SERVERS_KEY,
    WORKER_SERVERS_KEY,
    WORKER_STOP_KEY,
    PluginBase,
)
from pytest_llmperf.plugin.endpoints import REFERENCE_SERVER, SESSION_SERVER, EndpointSpec
from pytest_llmperf.plugin.markers import endpoint_spec, server_command

__all__ = ["ServersPart"]
_ENDPOINT_FIXTURES = frozenset({"llm_endpoint", "llm_loadgen"})


class ServersPart(PluginBase):
    """The ``llm_server`` marker, the session's server's exit, and xdist's shared server."""

    def endpoint_for(self, item: pytest.Item) -> Endpoint | None:
        """The ``llm_server`` marker's server for ``item`` (started on first use), else the
        ``llm_endpoint`` marker's endpoint (None without either)."""
        mark = item.get_closest_marker("llm_server")
        if mark is None:
            return super().endpoint_for(item)
        return self._marker_endpoint(item, mark)

    def _marker_endpoint(self, item: pytest.Item, mark: pytest.Mark) -> Endpoint:
        from pytest_llmperf.managed_server import Restart

        try:
            command = server_command(item, mark, self.options.server)
            api_mark = item.get_closest_marker("llm_endpoint")
            api = (
                endpoint_spec(item, api_mark, self.endpoints.default_spec).api
                if api_mark is not None
                else None
            )
        except LlmPerfUsageError as exc:  # checked at collection: only a changed marker
            pytest.fail(f"pytest-llmperf: {exc}", False)
        node: pytest.Item | pytest.Module | None
        identity = repr((command.argv, sorted(command.env.items()), command.cwd, command.ready_url))
        if command.restart is Restart.TEST:
            key, node = f"test:{item.nodeid}", item
        elif command.restart is Restart.MODULE:
            module = item.getparent(pytest.Module)
            key, node = f"module:{module.nodeid if module else '?'}:{identity}", module
        else:
            key, node = f"marker:{identity}", None
        spec = EndpointSpec(server=command, server_key=key, model=self.options.model, api=api)
        base = EndpointSpec(server=command, server_key=key, model=self.options.model)
        if self.endpoints.is_ready(base):
            running = self.endpoints.endpoint_of(base)
            server = self.endpoints.server_for(running) if running is not None else None
            if server is not None and server.poll() is not None:
                if command.restart is Restart.SESSION:
                    self._server_exited(item, server, f"{item.nodeid} llm_server marker")
                self.endpoints.release(base)  # test, module: a fresh one for what follows
        first = not self.endpoints.is_ready(base)
        try:
            endpoint = self.endpoints.started(spec)
        except LlmPerfUsageError as exc:
            where = f"{item.nodeid} llm_server marker: "
            shown = str(command.describe()["cmd"])
            state = self.record_stop(exc, StopPhase.ENDPOINT_START, shown, where)
            pytest.exit(f"pytest-llmperf: {where}{exc}", state.exit_status)
        if first and node is not None:  # stopped as its scope ends
            node.addfinalizer(lambda: self.endpoints.release(base))
        return endpoint

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_setup(self, item: pytest.Item) -> None:
        """Before the test's fixtures: the session's server (``--llm-server-cmd``, or the
        controller's under xdist) exited since the last test? It cannot be restarted: this
        test errors and the session stops, the exit recorded (gate_states.py)."""
        if not _ENDPOINT_FIXTURES & set(getattr(item, "fixturenames", ())):
            return
        if item.get_closest_marker("llm_server") is not None:
            return  # its own server (checked as it asks for it)
        server = self.endpoints.session_server()
        if server is not None and server.poll() is not None:
            self._server_exited(item, server, "--llm-server-cmd")

    def _server_exited(self, item: pytest.Item, server: Any, where: str) -> None:
        exit_ = server.poll()
        words = exit_.describe() if exit_ is not None else "server exited"
        tail = server.log_tail(30)
        body = "\n".join(f"    {line}" for line in tail.splitlines()) or "    (the log is empty)"
        message = (
            f"{words}; it serves the whole session (restart='session') and cannot be "
            f"restarted: the session stops (log: {server.log_path}); its last lines:\n{body}"
        )
        error = LlmPerfUsageError(message, where=where, cause=StopCause.SERVER_EXITED)
        self.record_stop(error, StopPhase.SERVER_EXITED, getattr(server, "url", None))
        self.stop_said_here = True
        item.session.shouldfail = f"pytest-llmperf: {where}: {words}: the session stops"
        pytest.fail(f"pytest-llmperf: {error}", pytrace=False)

    @pytest.hookimpl(tryfirst=True)
    def pytest_pyfunc_call(self, pyfuncitem: pytest.Function) -> None:
        """A test with an ``llm_server`` marker that takes ``llm_endpoint`` (a session
        fixture) receives the marker's server as that argument."""
        if "llm_endpoint" not in pyfuncitem.funcargs:
            return
        if pyfuncitem.get_closest_marker("llm_server") is None:
            return
        pyfuncitem.funcargs["llm_endpoint"] = self.endpoint_for(pyfuncitem)

    @pytest.hookimpl(optionalhook=True)
    def pytest_configure_node(self, node: Any) -> None:
        """pytest-xdist, controller: each worker gets the session's started servers."""
        shared: dict[str, Any] = {}
        if self._endpoint is not None:
            info = self.endpoints.shared_info(self._endpoint)
            if info is not None:
                shared[SESSION_SERVER] = info
        if self._reference is not None:
            info = self.endpoints.shared_info(self._reference)
            if info is not None:
                shared[REFERENCE_SERVER] = info
        if shared:
            node.workerinput[SHARED_SERVERS_KEY] = shared

    @pytest.hookimpl(optionalhook=True)
    def pytest_testnodedown(self, node: Any, error: Any) -> None:
        """pytest-xdist, controller: the servers a worker started, for the session's report."""
        output = getattr(node, "workeroutput", None) or {}
        self.worker_servers += list(output.get(WORKER_SERVERS_KEY) or [])
        stop = output.get(WORKER_STOP_KEY)
        if stop and self.stop is None:  # a worker saw the session's server exit
            self.stop = dict(stop)
            self.stop_said_here = True
