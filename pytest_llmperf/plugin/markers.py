"""The markers: their help texts, what a test stashes, and reading them into specs.

Bad marker arguments are usage errors that name the test and the bad word
(collected in :mod:`~pytest_llmperf.plugin.collection`, before any request is sent).
So is a marker named ``llm_*`` that is not one of ours (``llm_slos``, a typo that
pytest would only warn about, and that would leave the test unjudged), unless the
user registered it (the ini's ``markers``, or another plugin's): ``llm_*`` marks of
their own are theirs.
"""

from __future__ import annotations

import inspect
from dataclasses import replace
from typing import TYPE_CHECKING, Any

import pytest

from pytest_llmperf.client.affinity import Affinity
from pytest_llmperf.errors import (
    LlmPerfUsageError,
    did_you_mean,
)
from pytest_llmperf.loadgen.generator import LoadGenerator
from pytest_llmperf.options import InconclusivePolicy
from pytest_llmperf.plugin.endpoints import EndpointSpec
from pytest_llmperf.specs.perf import PerfSpec
from pytest_llmperf.workloads.apis import Api, parse_api

if TYPE_CHECKING:
    from pytest_llmperf.managed_server import ServerCommand

MARKERS = {
    "llm_workload": "llm_workload(name, requests=N, seed=S, **params): the requests an "
    "llm_loadgen run sends (pytest-llmperf)",
    "llm_load": "llm_load(pattern, rate=R | concurrency=C, duration=S): when requests are sent; "
    "pattern is poisson, constant, concurrency or max-throughput (pytest-llmperf)",
    "llm_slo": "llm_slo('ttft.p99 < 500ms', ..., ruleset=NAME): objectives judged on the "
    "test's runs after the test body (pytest-llmperf)",
    "llm_endpoint": "llm_endpoint('sim:PROFILE' | URL, model=None, api=None, affinity=None): the "
    "endpoint this test's llm_loadgen measures (--llm-endpoint on the command line overrides "
    "the server), the API it drives (chat, completions, responses, messages, embeddings; "
    "default --llm-api) and what its conversations carry to stay on one replica (as "
    "--llm-affinity) (pytest-llmperf)",
    "llm_inconclusive": "llm_inconclusive('fail' | 'warn' | 'skip'): what an inconclusive SLO "
    "does to this test; --llm-inconclusive on the command line overrides it (pytest-llmperf)",
    "llm_server": "llm_server(cmd=..., env={...}, cwd=..., ready_url=..., ready_timeout=S, "
    "restart='test' | 'module' | 'session', name=...): a server the gate starts for this test "
    "(default), module or session and stops when that scope ends; what llm_loadgen and the "
    "test's llm_endpoint measure; cmd defaults to --llm-server-cmd's (pytest-llmperf)",
}
LLM_MARKERS = tuple(MARKERS)
SPEC_KEY = pytest.StashKey[PerfSpec]()
GEN_KEY = pytest.StashKey[LoadGenerator]()
PAYLOAD_KEY = pytest.StashKey[dict[str, Any]]()
INCONCLUSIVE_KEY = pytest.StashKey[str]()  # the llm_inconclusive fixture's value for a test


@pytest.hookimpl(tryfirst=True)
def pytest_pycollect_makeitem(collector: Any, name: str, obj: object) -> None:
    """Mark async tests that use pytest-llmperf as asyncio tests (also in strict mode)."""
    if not inspect.iscoroutinefunction(obj):
        return
    marks = getattr(obj, "pytestmark", [])
    uses_llm = any(getattr(m, "name", "") in LLM_MARKERS for m in marks) or any(
        p.startswith("llm_") for p in inspect.signature(obj).parameters
    )
    if uses_llm and not any(getattr(m, "name", "") == "asyncio" for m in marks):
        pytest.mark.asyncio(obj)


def registered_elsewhere(config: pytest.Config) -> frozenset[str]:
    """The ``llm_*`` markers registered by the user's ini (``markers =``) or another
    plugin, not by us: marks of the user's own, which collection leaves alone."""
    lines: list[str] = config.getini("markers")
    names = {line.split(":")[0].split("(")[0].strip() for line in lines}
    return frozenset(n for n in names if n.startswith("llm_") and n not in MARKERS)


def unknown_marks(item: pytest.Item, registered: frozenset[str]) -> list[str]:
    """One line per ``llm_*`` mark on ``item`` (at any level) that is neither ours nor
    ``registered``: its name, the nearest of ours, and all of ours."""
    names = dict.fromkeys(m.name for m in item.iter_markers())  # first seen, once each
    return [
        f"unknown marker {name}{did_you_mean(name, MARKERS)}; pytest-llmperf's markers are "
        f"{', '.join(MARKERS)} (register a marker of your own in the ini's markers)"
        for name in names
        if name.startswith("llm_") and name not in MARKERS and name not in registered
    ]


def endpoint_spec(item: pytest.Item, mark: pytest.Mark, default: EndpointSpec) -> EndpointSpec:
    """``llm_endpoint("sim:tiny" | URL, model=None, api=None, affinity=None)``, or
    ``llm_endpoint(api=..., affinity=...)`` without a spec (the session's endpoint,
    ``default``, driven through another API or pinned another way: :func:`marked_affinity`);
    a bad one names the test."""
    where = f"{item.nodeid} llm_endpoint marker"
    args, kwargs = mark.args, mark.kwargs
    if (
        len(args) > 1
        or set(kwargs) - {"model", "api", "affinity"}
        or not (args or "api" in kwargs or "affinity" in kwargs)
    ):
        raise LlmPerfUsageError(
            f"takes one spec ('sim:PROFILE' or a URL), model=..., api=... and affinity=..., "
            f"or api=... / affinity=... alone, got args={args!r} kwargs={kwargs!r}",
            where=where,
        )
    api = parse_api(kwargs["api"], where=f"{where} api=") if "api" in kwargs else None
    if not args:
        if "model" in kwargs:
            raise LlmPerfUsageError("model= needs a spec ('sim:PROFILE' or a URL)", where=where)
        return replace(default, api=api)
    return EndpointSpec.parse(args[0], model=kwargs.get("model"), api=api, where=where)


def marked_affinity(item: pytest.Item, session: Affinity) -> Affinity | None:
    """The ``llm_endpoint`` marker's ``affinity=`` (``"dynamo"``, ``"header:NAME"``, ...:
    ``--llm-affinity``'s values; ``"none"`` for none) for ``item``, read as
    ``--llm-affinity`` is, with the session's replica headers; None where the closest
    marker has none (the session's ``--llm-affinity`` holds). A bad one names the test."""
    mark = item.get_closest_marker("llm_endpoint")
    if mark is None or "affinity" not in mark.kwargs:
        return None
    where = f"{item.nodeid} llm_endpoint marker affinity="
    value = mark.kwargs["affinity"]
    return Affinity.parse(
        "none" if value is None else value, replica_headers=session.replica_headers, where=where
    )


def api_of_test(item: pytest.Item, default: EndpointSpec, session_api: str) -> Api:
    """The API ``item`` drives: its ``llm_endpoint`` marker's ``api=``, else the session's."""
    mark = item.get_closest_marker("llm_endpoint")
    spec = endpoint_spec(item, mark, default) if mark is not None else None
    return Api(spec.api if spec is not None and spec.api is not None else session_api)


def marked_inconclusive(item: pytest.Item) -> InconclusivePolicy | None:
    """``llm_inconclusive("warn")`` (closest wins); a bad one names the test."""
    mark = item.get_closest_marker("llm_inconclusive")
    if mark is None:
        return None
    values = [p.value for p in InconclusivePolicy]
    if len(mark.args) != 1 or mark.kwargs or mark.args[0] not in values:
        raise LlmPerfUsageError(
            f"takes one of {', '.join(values)}, got args={mark.args!r} kwargs={mark.kwargs!r}",
            where=f"{item.nodeid} llm_inconclusive marker",
        )
    return InconclusivePolicy(mark.args[0])


def spec_for(item: pytest.Item) -> PerfSpec:
    workload = item.get_closest_marker("llm_workload")
    load = item.get_closest_marker("llm_load")
    # Every llm_slo applies: module, class and function levels add up.
    slos = [(m.args, m.kwargs) for m in item.iter_markers("llm_slo")]
    return PerfSpec.from_markers(
        (workload.args, workload.kwargs) if workload else None,
        (load.args, load.kwargs) if load else None,
        slos,
    )


_SERVER_KWARGS = ("cmd", "env", "cwd", "ready_url", "ready_timeout", "restart", "name")


def server_command(
    item: pytest.Item, mark: pytest.Mark, session: ServerCommand | None
) -> ServerCommand:
    """``llm_server(cmd=..., env=..., cwd=..., ready_url=..., ready_timeout=...,
    restart=..., name=...)`` (``cmd`` also as its one positional argument) as a
    :class:`~pytest_llmperf.managed_server.ServerCommand`; without ``cmd``, the
    session's ``--llm-server-cmd`` (``session``) with the marker's changes, its
    environment extended. Restart defaults to ``test``. A bad one names the test."""
    from pytest_llmperf.managed_server import Restart, ServerCommand

    where = f"{item.nodeid} llm_server marker"
    args, kwargs = mark.args, dict(mark.kwargs)
    unknown = sorted(set(kwargs) - set(_SERVER_KWARGS))
    if len(args) > 1 or unknown or (args and "cmd" in kwargs):
        raise LlmPerfUsageError(
            f"takes cmd (a command line or a list of arguments) and "
            f"{', '.join(k + '=' for k in _SERVER_KWARGS[1:])} got args={args!r} "
            f"kwargs={kwargs!r}" + (did_you_mean(unknown[0], _SERVER_KWARGS) if unknown else ""),
            where=where,
        )
    cmd = args[0] if args else kwargs.get("cmd")
    restart = kwargs.get("restart", Restart.TEST.value)
    if restart not in [r.value for r in Restart]:
        raise LlmPerfUsageError(
            f"restart must be one of {', '.join(r.value for r in Restart)}, got {restart!r}",
            where=where,
        )
    env = kwargs.get("env", {})
    if not isinstance(env, dict) or not all(
        isinstance(k, str) and k and isinstance(v, str | int | float) for k, v in env.items()
    ):
        raise LlmPerfUsageError(f"env must be a dict of names to strings, got {env!r}", where=where)
    fields: dict[str, Any] = {"restart": Restart(restart)}
    for key, kind in (("cwd", str), ("ready_url", str), ("name", str)):
        if key in kwargs:
            if not isinstance(kwargs[key], kind) or not kwargs[key].strip():
                raise LlmPerfUsageError(
                    f"{key} must be a non-empty string, got {kwargs[key]!r}", where=where
                )
            fields[key] = kwargs[key]
    if "ready_timeout" in kwargs:
        timeout = kwargs["ready_timeout"]
        if (
            isinstance(timeout, bool)
            or not isinstance(timeout, int | float)
            or not 0 < timeout < float("inf")
        ):
            raise LlmPerfUsageError(
                f"ready_timeout must be a number of seconds > 0, got {timeout!r}", where=where
            )
        fields["ready_timeout_s"] = float(timeout)
    if cmd is None:
        if session is None:
            raise LlmPerfUsageError(
                "give the server's command (cmd=...), or --llm-server-cmd for it to restart",
                where=where,
            )
        fields["env"] = {**session.env, **{k: str(v) for k, v in env.items()}}
        try:
            return replace(session, **fields)
        except LlmPerfUsageError as exc:
            raise exc.located(where) from None
    if not isinstance(cmd, str) and not (
        isinstance(cmd, list | tuple) and all(isinstance(a, str) for a in cmd)
    ):
        raise LlmPerfUsageError(
            f"cmd must be a command line or a list of strings, got {cmd!r}", where=where
        )
    base: dict[str, Any] = {}
    if session is not None:  # the session's server options apply to the marker's command
        base = {
            "cwd": session.cwd,
            "ready_timeout_s": session.ready_timeout_s,
            "stop_grace_s": session.stop_grace_s,
        }
    env = {**(session.env if session is not None else {}), **{k: str(v) for k, v in env.items()}}
    return ServerCommand.parse(cmd, where=where, **{**base, **fields, "env": env})
