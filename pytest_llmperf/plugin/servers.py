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
  once, before any worker (plugin/preflight.py's ``preflight_controller``), and
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
from pytest_llmperf.plugin.endpoints import REFERENCE_SERVER, SESSION_SERVER, EndpointSpec
from pytest_llmperf.plugin.markers import endpoint_spec, server_command
from pytest_llmperf.plugin.state import SessionState
from pytest_llmperf.plugin.stops import exit_session, record_stop
from pytest_llmperf.plugin.under_test import marked_endpoint

__all__ = [
    "SHARED_SERVERS_KEY",
    "WORKER_SERVERS_KEY",
    "WORKER_STOP_KEY",
    "ServersHooks",
    "endpoint_for",
    "servers_at_end",
]

SHARED_SERVERS_KEY = "llmperf_servers"  # workerinput: the controller's started servers
WORKER_SERVERS_KEY = "llmperf_started_servers"  # workeroutput: the servers a worker started
WORKER_STOP_KEY = "llmperf_stop"  # workeroutput: a worker's stop (its session server exited)
_ENDPOINT_FIXTURES = frozenset({"llm_endpoint", "llm_loadgen"})


def endpoint_for(state: SessionState, item: pytest.Item) -> Endpoint | None:
    """The ``llm_server`` marker's server for ``item`` (started on first use), else the
    ``llm_endpoint`` marker's endpoint (None without either)."""
    mark = item.get_closest_marker("llm_server")
    if mark is None:
        return marked_endpoint(state, item)
    return _marker_endpoint(state, item, mark)


def _marker_endpoint(state: SessionState, item: pytest.Item, mark: pytest.Mark) -> Endpoint:
    from pytest_llmperf.managed_server import Restart

    pool = state.endpoints
    try:
        command = server_command(item, mark, state.options.server)
        api_mark = item.get_closest_marker("llm_endpoint")
        api = endpoint_spec(item, api_mark, pool.default_spec).api if api_mark is not None else None
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
    spec = EndpointSpec(server=command, server_key=key, model=state.options.model, api=api)
    base = EndpointSpec(server=command, server_key=key, model=state.options.model)
    if pool.is_ready(base):
        running = pool.endpoint_of(base)
        server = pool.server_for(running) if running is not None else None
        if server is not None and server.poll() is not None:
            if command.restart is Restart.SESSION:
                _server_exited(state, item, server, f"{item.nodeid} llm_server marker")
            pool.release(base)  # test, module: a fresh one for what follows
    first = not pool.is_ready(base)
    try:
        endpoint = pool.started(spec)
    except LlmPerfUsageError as exc:
        where = f"{item.nodeid} llm_server marker: "
        shown = str(command.describe()["cmd"])
        exit_session(state, exc, StopPhase.ENDPOINT_START, shown, where)
    if first and node is not None:  # stopped as its scope ends
        node.addfinalizer(lambda: pool.release(base))
    return endpoint


def _server_exited(state: SessionState, item: pytest.Item, server: Any, where: str) -> None:
    exit_ = server.poll()
    words = exit_.describe() if exit_ is not None else "server exited"
    tail = server.log_tail(30)
    body = "\n".join(f"    {line}" for line in tail.splitlines()) or "    (the log is empty)"
    message = (
        f"{words}; it serves the whole session (restart='session') and cannot be "
        f"restarted: the session stops (log: {server.log_path}); its last lines:\n{body}"
    )
    error = LlmPerfUsageError(message, where=where, cause=StopCause.SERVER_EXITED)
    record_stop(state, error, StopPhase.SERVER_EXITED, getattr(server, "url", None))
    state.stop_said_here = True
    item.session.shouldfail = f"pytest-llmperf: {where}: {words}: the session stops"
    pytest.fail(f"pytest-llmperf: {error}", pytrace=False)


def servers_at_end(state: SessionState) -> list[dict[str, Any]]:
    """At the session's end: every server this process started, stopped, described
    (an xdist worker sends its own to the controller), with the workers'."""
    servers = state.endpoints.servers()
    state.endpoints.close()
    described = [s.describe() for s in servers] + state.endpoints.not_started()
    workeroutput = getattr(state.config, "workeroutput", None)
    if workeroutput is not None:
        workeroutput[WORKER_SERVERS_KEY] = described
        if state.stop is not None:  # the controller's reports record it
            workeroutput[WORKER_STOP_KEY] = dict(state.stop)
    return described + list(state.worker_servers)


class ServersHooks:
    """The ``llm_server`` marker, the session's server's exit, and xdist's shared server."""

    def __init__(self, state: SessionState) -> None:
        self.state = state

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_setup(self, item: pytest.Item) -> None:
        """Before the test's fixtures: the session's server (``--llm-server-cmd``, or the
        controller's under xdist) exited since the last test? It cannot be restarted: this
        test errors and the session stops, the exit recorded (gate_states.py)."""
        if not _ENDPOINT_FIXTURES & set(getattr(item, "fixturenames", ())):
            return
        if item.get_closest_marker("llm_server") is not None:
            return  # its own server (checked as it asks for it)
        server = self.state.endpoints.session_server()
        if server is not None and server.poll() is not None:
            _server_exited(self.state, item, server, "--llm-server-cmd")

    @pytest.hookimpl(tryfirst=True)
    def pytest_pyfunc_call(self, pyfuncitem: pytest.Function) -> None:
        """A test with an ``llm_server`` marker that takes ``llm_endpoint`` (a session
        fixture) receives the marker's server as that argument."""
        if "llm_endpoint" not in pyfuncitem.funcargs:
            return
        if pyfuncitem.get_closest_marker("llm_server") is None:
            return
        pyfuncitem.funcargs["llm_endpoint"] = endpoint_for(self.state, pyfuncitem)

    @pytest.hookimpl(optionalhook=True)
    def pytest_configure_node(self, node: Any) -> None:
        """pytest-xdist, controller: each worker gets the session's started servers."""
        state = self.state
        shared: dict[str, Any] = {}
        if state.endpoint is not None:
            info = state.endpoints.shared_info(state.endpoint)
            if info is not None:
                shared[SESSION_SERVER] = info
        if state.reference is not None:
            info = state.endpoints.shared_info(state.reference)
            if info is not None:
                shared[REFERENCE_SERVER] = info
        if shared:
            node.workerinput[SHARED_SERVERS_KEY] = shared

    @pytest.hookimpl(optionalhook=True)
    def pytest_testnodedown(self, node: Any, error: Any) -> None:
        """pytest-xdist, controller: the servers a worker started, for the session's report."""
        state = self.state
        output = getattr(node, "workeroutput", None) or {}
        state.worker_servers += list(output.get(WORKER_SERVERS_KEY) or [])
        stop = output.get(WORKER_STOP_KEY)
        if stop and state.stop is None:  # a worker saw the session's server exit
            state.stop = dict(stop)
            state.stop_said_here = True
