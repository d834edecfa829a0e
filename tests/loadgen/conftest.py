"""Shared pieces for the load-generator tests: a fixed-latency simulator on 127.0.0.1."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest
import pytest_asyncio

from pytest_llmperf.client.endpoint import Endpoint, Timeouts
from pytest_llmperf.sim import SimServer
from pytest_llmperf.specs.load import LoadSpec
from pytest_llmperf.specs.run import RunSpec


@pytest_asyncio.fixture
async def fast_sim() -> AsyncIterator[Endpoint]:
    """The simulator in this loop: first token after 5 ms, then one every 1 ms."""
    async with SimServer("fixed", ttft_ms=5.0, itl_ms=1.0) as sim:
        yield Endpoint(sim.url + "/v1", timeouts=Timeouts.from_seconds(10))


@pytest.fixture
def until() -> Callable[[Callable[[], bool], str], Awaitable[None]]:
    """``await until(check, "what")``: poll ``check`` on the loop until it holds.

    For tests that act *after* something happened (a request seen by the server, a
    drain begun): wait for that evidence, never for a fixed delay, which a busy
    machine can outlast. The 30 s limit only turns a hang into a failure naming
    ``what``; it is not a timing claim.
    """

    async def wait(check: Callable[[], bool], what: str) -> None:
        end = time.monotonic() + 30.0
        while not check():
            if time.monotonic() > end:
                raise AssertionError(f"not within 30 s: {what}")
            await asyncio.sleep(0.002)

    return wait


@pytest.fixture
def make_spec() -> Callable[..., RunSpec]:
    """``make_spec(pattern, **kw)``: a small synthetic run spec."""
    return small_spec


def small_spec(pattern: str, *, output_tokens: int = 4, **kw: Any) -> RunSpec:
    """A small synthetic run; ``kw`` splits into load parameters and stop conditions."""
    load = {k: kw.pop(k) for k in list(kw) if k in ("rate", "concurrency", "seed", "sample_order")}
    return RunSpec(
        "synthetic",
        {"input_tokens": 8, "output_tokens": output_tokens},
        0,
        LoadSpec.parse(pattern, load),
        requests=kw.pop("requests", None),
        duration=kw.pop("duration", None),
        warmup=kw.pop("warmup", 0),
    )
