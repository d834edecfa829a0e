"""Shared fixtures of the methodology suites: extra simulators for comparisons.

Most suites measure the endpoint under test (``llm_loadgen``). The draft's
comparison tests (prefix cache on/off, guardrails on/off) need a second
configuration: ``sim_url(profile, **overrides)`` starts one more embedded
simulator in its own process for the module and returns its URL.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from pytest_llmperf.sim import start_sim_process


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
