"""A quiet green (issue 36): a cache reset that could not be done is *said* (terminal,
Markdown) only where the server has a prefix cache or the user set ``--llm-reset-cache``;
elsewhere (the default simulator, which has no prefix cache) it is recorded in the JSON
and said nowhere else. Whole sessions against real simulators, one behind a proxy that
answers 404 to the reset routes as vLLM does outside development mode."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from reset_stubs import Serve, proxy_without_reset

from pytest_llmperf.server_metrics.cache_reset import reset_said, with_run_evidence
from pytest_llmperf.server_metrics.summary import ServerFamily, ServerMetrics
from pytest_llmperf.sim import SimProcess, start_sim_process

SUITE = """
import pytest

@pytest.mark.llm_workload("synthetic", input_tokens=32, output_tokens=8, requests=20)
@pytest.mark.llm_load("concurrency", concurrency=4)
@pytest.mark.llm_slo("error_rate < 50%")
async def test_a(llm_loadgen):
    await llm_loadgen.run()
"""
NO_RESET = "the server has no cache reset (POST /reset_prefix_cache: 404"


def _run(pytester: pytest.Pytester, *args: str) -> tuple[str, dict[str, Any]]:
    """The session's terminal text and its one run's ``cache_reset`` from the JSON."""
    pytester.makepyfile(test_a=SUITE)
    result = pytester.runpytest("-p", "no:cacheprovider", "--llm-json=out.json", *args)
    result.assert_outcomes(passed=1)
    report = json.loads((pytester.path / "out.json").read_text())
    (run,) = report["tests"][0]["runs"]
    return result.stdout.str(), run["cache_reset"]


def test_the_default_simulator_says_nothing_of_a_cache_it_does_not_have(
    pytester: pytest.Pytester,
) -> None:
    """The default ``sim`` (the ``fixed`` profile) has no prefix cache: nothing to reset,
    so no note on the terminal, no warning; the JSON still records what happened."""
    text, reset = _run(pytester, "--llm-endpoint=sim")
    assert "cache not reset" not in text and "VLLM_SERVER_DEV_MODE" not in text, text
    assert "warning" not in text.lower(), text
    assert reset["done"] is False and reset["why"].startswith(NO_RESET), reset
    assert reset["prefix_cache"] is None and reset["asked"] is False, reset


def test_a_reset_the_user_asked_for_is_said_with_what_to_do(pytester: pytest.Pytester) -> None:
    """``--llm-reset-cache=auto`` given (not the default): a reset not done is said."""
    text, reset = _run(pytester, "--llm-endpoint=sim", "--llm-reset-cache=auto")
    said = " ".join(text.split())  # the server line wraps at the terminal's width
    assert f"cache not reset: {NO_RESET}" in said, text
    assert "(--llm-reset-cache=off to accept a warm cache)" in said, text
    assert reset["asked"] is True and reset["done"] is False, reset


@pytest.fixture(scope="module")
def tiny() -> Iterator[SimProcess]:
    """The ``tiny`` engine profile: a prefix cache, and counters of its lookups."""
    sim = start_sim_process("tiny")
    try:
        yield sim
    finally:
        sim.stop()


def test_a_server_with_a_prefix_cache_and_no_reset_is_warned_of(
    pytester: pytest.Pytester, serve: Serve, tiny: SimProcess
) -> None:
    """A server whose prefix-cache counters move during the run, and whose reset routes
    answer 404 (vLLM outside development mode): the run may start warm, so it is said,
    with what to do, under the option's default."""
    proxy = serve(proxy_without_reset(tiny.url))
    text, reset = _run(pytester, f"--llm-endpoint={proxy}")
    said = " ".join(text.split())
    assert f"cache not reset: {NO_RESET}" in said, text
    assert "VLLM_SERVER_DEV_MODE=1" in said and "--llm-reset-cache=off" in said, text
    assert reset["prefix_cache"] is True and reset["asked"] is False, reset


def _metrics(**metrics: dict[str, float]) -> ServerMetrics:
    return ServerMetrics("http://h:8000/metrics", ServerFamily.VLLM, metrics=dict(metrics))


def test_the_runs_prefix_cache_lookups_are_evidence_of_a_cache() -> None:
    not_done = {"done": False, "how": None, "why": "404", "prefix_cache": None, "asked": False}
    looked_up = with_run_evidence(
        not_done, _metrics(**{"server.prefix_cache_hit_rate": {"value": 0.0}})
    )
    assert looked_up == {**not_done, "prefix_cache": True}
    assert (
        with_run_evidence(not_done, _metrics(**{"server.preemptions": {"value": 0.0}})) == not_done
    )
    assert with_run_evidence(not_done, None) == not_done  # metrics off: nothing learnt
    assert with_run_evidence(None, _metrics()) is None  # --llm-reset-cache=off


@pytest.mark.parametrize(
    ("reset", "said"),
    [
        ({"done": True, "how": "POST /reset_prefix_cache", "prefix_cache": True}, True),
        ({"done": False, "why": "404", "prefix_cache": None, "asked": False}, False),
        ({"done": False, "why": "404", "prefix_cache": False, "asked": False}, False),
        ({"done": False, "why": "404", "prefix_cache": True, "asked": False}, True),
        ({"done": False, "why": "404", "prefix_cache": None, "asked": True}, True),
        ({"done": False, "why": "404"}, False),  # a report written before these keys
        (None, False),  # --llm-reset-cache=off
    ],
)
def test_which_resets_are_said(reset: dict[str, Any] | None, said: bool) -> None:
    assert reset_said(reset) is said
