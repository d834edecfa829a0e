"""The methodology suites: their endpoint, their inconclusive policy, extra simulators.

Endpoint: the embedded simulator's ``tiny`` profile (a small KV cache and
batch, so queueing, saturation and preemption appear at request rates a 2-core
machine can offer), chosen for this directory by overriding the
``llm_endpoint`` fixture; the rest of ``example_suites`` measures the
profile in ``pytest.ini``, in the same session. ``--llm-endpoint=URL`` on the
command line measures that server here too (the suites that compare
configurations still start their own simulators).

Inconclusive policy: the simulator shares the machine's cores with the load
generator, so on a busy 2-core box a run can be judged "generator-bound"
(inconclusive, never passed): here that warns instead of failing. A violated
SLO still fails. Use ``--llm-inconclusive=fail`` (the command line wins)
against a real server on its own machine.

Comparisons (prefix cache on/off, guardrails on/off) need a second
configuration: ``sim_url(profile, **overrides)`` starts one more embedded
simulator in its own process for the module and returns its URL.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from pytest_llmperf import Endpoint
from pytest_llmperf.plugin.endpoints import EndpointPool
from pytest_llmperf.sim import start_sim_process


@pytest.fixture(scope="session")
def llm_endpoint(llm_endpoints: EndpointPool) -> Endpoint:
    return llm_endpoints.get("sim:tiny")


@pytest.fixture(scope="session")
def llm_inconclusive() -> str:
    return "warn"


@pytest.fixture(scope="module")
def sim_url() -> Iterator[Callable[..., str]]:
    started = []

    def start(profile: str, **overrides: float | int | str) -> str:
        process = start_sim_process(profile, overrides=dict(overrides))
        started.append(process)
        return process.url

    yield start
    for process in started:
        process.stop()
