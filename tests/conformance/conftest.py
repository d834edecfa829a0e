"""The conformance tier: pytest-llmperf against real servers.

vLLM's CPU build, ``transformers serve`` and llama.cpp's ``llama-server``; vLLM's
router (``vllm-router``) in front of two llama-servers for a fleet.
It needs an install folder made by ``conformance/install.sh`` (two server
venvs, the llama-server binary and the tiny model, about 5 GB and two
minutes when the binary is cached), so it runs only when
``LLMPERF_CONFORMANCE`` points at one, as ``bash conformance/run.sh`` does.
Otherwise every test here is skipped with that reason, and ``pytest tests``
stays fast. With the variable set, a missing piece of the install is an
error, never a skip: CI must not pass a tier that did not run. Each server's
fixture checks its own pieces, so a module runs on an install that lacks
another server (``pytest tests/conformance/test_vllm.py`` without llama-server).

Servers are module-scoped and each module uses one, so at most one server
runs at a time (two cores: they would slow each other and the measurements);
a fleet module's one is a fleet: vLLM's router and its two replicas
(:func:`vllm_router_fleet` and its kin), judged on counts, not on timings.
The one exception to a start per module: ``test_vllm.py`` and
``test_vllm_apis.py`` (adjacent) use the same vLLM, started once (about 40 s
saved) and stopped after the last module that uses it (:func:`vllm`). Every
server is the plugin's :class:`~pytest_llmperf.managed_server.ManagedServer`:
stopped by its fixture, or by the plugin's watchdog if this session dies.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

ENV = "LLMPERF_CONFORMANCE"
HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
SKIP_REASON = (
    f"conformance tier: needs real servers; set {ENV} to an install folder "
    "(`bash conformance/run.sh` installs them and runs this tier)"
)


def _load_servers() -> ModuleType:
    """``conformance/servers.py`` by path: the checkout is not on sys.path (CI tests the wheel)."""
    path = ROOT / "conformance" / "servers.py"
    spec = importlib.util.spec_from_file_location("llmperf_conformance_servers", path)
    assert spec is not None and spec.loader is not None, path
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


servers = _load_servers()


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if os.environ.get(ENV):
        return
    skip = pytest.mark.skip(reason=SKIP_REASON)
    for item in items:
        if HERE in Path(str(item.path)).resolve().parents:
            item.add_marker(skip)


@pytest.fixture(scope="session")
def install() -> Any:
    """The install folder named by ``LLMPERF_CONFORMANCE``, its tiny model checked there."""
    return _checked(servers.Install(Path(os.environ[ENV]).resolve()))


def _checked(install: Any, *names: str) -> Any:
    """``install``, failing the test where it lacks the tiny model or what ``names`` need."""
    problems = install.problems(*names)
    if problems:
        pytest.fail(f"{ENV}={install.root} is not a complete install: " + "; ".join(problems))
    return install


@pytest.fixture(scope="session")
def model_dir(install: Any) -> str:
    return str(install.model)


def _start(name: str, install: Any) -> Any:
    """The server ``name`` (``servers.STARTERS``), started; a failed start fails the test."""
    try:
        server = servers.STARTERS[name](_checked(install, name))
    except servers.ServerError as exc:
        pytest.fail(str(exc), pytrace=False)
    print(f"\n{server.name} ready on {server.url} in {server.ready_s:.1f} s")
    return server


def _serve(name: str, install: Any) -> Iterator[Any]:
    """The server ``name`` (``servers.STARTERS``) while the fixture lasts, then stopped."""
    server = _start(name, install)
    try:
        yield server
    finally:
        server.stop()


# Servers kept across the modules that use them (by fixture name): see vllm().
SHARED = pytest.StashKey[dict[str, Any]]()


@pytest.fixture(scope="module")
def vllm(install: Any, request: pytest.FixtureRequest) -> Any:
    """vLLM with the tier's settings, one start for every module that uses it in a row
    (``test_vllm.py``, ``test_vllm_apis.py``): kept in the session's stash and stopped
    at the end of the last module that uses it (:func:`pytest_runtest_teardown`), so
    that the next module's server never runs beside it."""
    shared = request.config.stash.setdefault(SHARED, {})
    server = shared.get("vllm")
    if server is None or server.process.poll() is not None:
        server = shared["vllm"] = _start("vllm", install)
    return server


@pytest.hookimpl(trylast=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> None:
    """At the end of a module, stop each shared server that no test of the next module
    asks for (by name, among its fixtures; none follows: all of them).

    Decided per module, not per test: a module's tests may reach the server through
    ``request.getfixturevalue`` (test_vllm.py's ``session``), which a test's fixture
    names do not show; the module's own fixture keeps it alive meanwhile."""
    shared = item.config.stash.get(SHARED, {})
    module = getattr(nextitem, "module", None)
    if not shared or (nextitem is not None and module is getattr(item, "module", None)):
        return
    wanted: set[str] = set()
    if nextitem is not None:
        for other in item.session.items:
            if getattr(other, "module", None) is module:
                wanted.update(getattr(other, "fixturenames", ()))
    for name in [n for n in shared if n not in wanted]:
        shared.pop(name).stop()


def pytest_sessionfinish(session: pytest.Session) -> None:
    for server in session.config.stash.get(SHARED, {}).values():
        server.stop()


@pytest.fixture(scope="module")
def transformers_serve(install: Any) -> Iterator[Any]:
    yield from _serve("transformers", install)


@pytest.fixture(scope="module")
def llama_server(install: Any) -> Iterator[Any]:
    yield from _serve("llama-server", install)


@pytest.fixture(scope="module")
def vllm_router_fleet(install: Any) -> Iterator[Any]:
    """vLLM's router in front of two llama-servers (``servers.start_vllm_router_fleet``):
    three processes, started one after the other and stopped together."""
    yield from _fleet(install, prefill=0)


@pytest.fixture(scope="module")
def vllm_router_pd_fleet(install: Any) -> Iterator[Any]:
    """The same three processes, the router in its prefill/decode mode: the first
    llama-server the prefill pool, the second the decode pool."""
    yield from _fleet(install, prefill=1)


@pytest.fixture(scope="module")
def vllm_router_vllm_fleet(install: Any) -> Iterator[Any]:
    """vLLM's router in front of two vLLM servers (CPU, the tiny model): about 2 GB and
    45 s to start each, one after the other."""
    yield from _fleet(install, prefill=0, replica="vllm")


def _fleet(install: Any, prefill: int, replica: str = "llama-server") -> Iterator[Any]:
    needs = "vllm-router-fleet" if replica == "llama-server" else "vllm-router-vllm-fleet"
    try:
        fleet = servers.start_vllm_router_fleet(
            _checked(install, needs), prefill=prefill, replica=replica
        )
    except servers.ServerError as exc:
        pytest.fail(str(exc), pytrace=False)
    replicas = ", ".join(r.url for r in fleet.replicas)
    print(f"\nvllm-router ready on {fleet.url} (page {fleet.metrics_url}) over {replicas}")
    try:
        yield fleet
    finally:
        fleet.stop()


@pytest.fixture(scope="module")
def llama_server_embeddings(install: Any) -> Iterator[Any]:
    """llama-server with ``--embeddings --pooling mean``: generation and embeddings in one."""
    yield from _serve("llama-server-embeddings", install)


@pytest.fixture(scope="module")
def vllm_paths(install: Any) -> Iterator[Any]:
    """vLLM with two LoRA adapters and a tool parser (``servers.start_vllm_paths``)."""
    yield from _serve("vllm-paths", install)


@pytest.fixture(scope="module")
def vllm_agentic(install: Any) -> Iterator[Any]:
    """vLLM whose usages carry the prompt's cached tokens (``servers.start_vllm_agentic``)."""
    yield from _serve("vllm-agentic", install)


@pytest.fixture(scope="module", params=["vllm", "transformers"])
def blank_server(request: pytest.FixtureRequest, install: Any) -> Iterator[Any]:
    """vLLM, then ``transformers serve``, on the blank model (``build_blank_model.py``).

    Module-scoped and parametrized: pytest runs the module's tests grouped by server
    and stops the first before it starts the second, so one server runs at a time.
    vLLM is started here (the module's two sessions share it); ``transformers serve``,
    whose one session starts and stops it itself (``--llm-server-cmd``), is its
    ``servers.Launch``, not started here.
    """
    if request.param == "transformers":
        yield servers.transformers_launch(_checked(install, "transformers-blank"), blank=True)
        return
    yield from _serve(f"{request.param}-blank", install)
