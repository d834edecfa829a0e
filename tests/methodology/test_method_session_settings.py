"""Every run a procedure makes has the session's settings (issue 17's two bugs).

Procedures used to build load generators by hand: A/B comparisons ran the
other configurations without ``--llm-workers`` (and without ``--llm-events``),
and warm-up probes skipped ``--llm-events``. Now every run comes from the
configured generator (``run``, ``run_spec``, ``for_endpoint``).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_llmperf.client.endpoint import Endpoint, Timeouts
from pytest_llmperf.methodology import LlmLoadgen, run_configurations
from pytest_llmperf.results.event_log import read_meta
from pytest_llmperf.sim import SimServer
from pytest_llmperf.specs.perf import PerfSpec


def small_spec(**load: object) -> PerfSpec:
    return PerfSpec.from_markers(
        (("synthetic",), {"input_tokens": 16, "output_tokens": 4, "requests": 4}),
        ((), dict(load)) if load else None,
        [],
    )


@pytest.mark.asyncio
async def test_other_configurations_run_with_the_session_workers_and_event_logs(
    tmp_path: Path,
) -> None:
    async with (
        SimServer("fixed", ttft_ms=2, itl_ms=1) as a,
        SimServer("fixed", ttft_ms=4, itl_ms=1) as b,
    ):
        gen = LlmLoadgen(
            Endpoint.from_env(a.url, api_key_env=None, timeouts=Timeouts.from_seconds(20)),
            small_spec(pattern="concurrency", concurrency=2),
            workers=2,
            events_dir=tmp_path,
            events_name="ab",
        )
        other_url = b.url
        runs = await run_configurations(gen, {"A": None, "B": other_url}, repetitions=3)
    other = runs.results["B"]
    assert [r.self_check["workers"] for r in other] == [2, 2, 2]
    assert all(r.events_path and Path(r.events_path).exists() for r in other)
    assert read_meta(str(other[0].events_path))["label"] == "B rep 1"
    # the other configuration's runs are kept in the test's record, as the endpoint's are
    assert [r.label for r in gen.results] == [f"{n} rep {i}" for i in (1, 2, 3) for n in "AB"]
    assert {r.endpoint["url"] for r in other} == {other_url + "/v1"}


@pytest.mark.asyncio
async def test_warm_up_probes_keep_their_event_logs(tmp_path: Path) -> None:
    async with SimServer("fixed", ttft_ms=5, itl_ms=1) as sim:
        gen = LlmLoadgen(
            Endpoint.from_env(sim.url, api_key_env=None),
            small_spec(),
            events_dir=tmp_path,
            events_name="warm",
        )
        await gen.warm_up(requests=4, probes=2, requests_per_probe=1, max_rounds=1)
    labels = [r.label for r in gen.results]
    assert labels == ["warm-up probe before", "warm-up round 1", "warm-up probes round 1"]
    assert all(r.events_path and Path(r.events_path).exists() for r in gen.results)
    assert len(list(tmp_path.glob("*.sqlite"))) == len(gen.results)
    probes = read_meta(str(gen.results[-1].events_path))
    assert probes["label"] == "warm-up probes round 1"
    assert probes["summary"]["e2e"]["count"] == 2


def test_for_endpoint_keeps_the_session_settings() -> None:
    tokenizer_like = object()
    seen: list[object] = []
    gen = LlmLoadgen(
        Endpoint.from_env("http://127.0.0.1:9", api_key_env=None, timeouts=Timeouts(1, 2, 3, 4)),
        small_spec(),
        scale=0.5,
        observers=[seen.append],
        on_result=seen.append,
        events_dir="events",
        events_name="t",
        workers=3,
        tokenizer=tokenizer_like,  # type: ignore[arg-type]
    )
    other = gen.for_endpoint("http://127.0.0.2:8000")
    assert isinstance(other, LlmLoadgen)
    assert other.endpoint.base_url == "http://127.0.0.2:8000/v1"
    assert other.endpoint.timeouts == gen.endpoint.timeouts
    assert other.endpoint.api == gen.endpoint.api
    assert (other.workers, other.events_dir, other.scale) == (3, "events", 0.5)
    assert other.tokenizer is tokenizer_like and other.on_result == gen.on_result
    assert other.observers == gen.observers and other.observers is not gen.observers
    assert other.results is gen.results and other.analyses is gen.analyses
    assert gen.endpoint.base_url == "http://127.0.0.1:9/v1"  # the original is unchanged
