"""Synthetic runs built from request records, so verdict and regression maths can be checked
against known distributions without a server."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import pytest

from pytest_llmperf.client.records import RequestRecord
from pytest_llmperf.results.accumulator import MetricsAccumulator

MakeAcc = Callable[..., MetricsAccumulator]


def synthetic_accumulator(
    ttft_ms: Sequence[float],
    *,
    tpot_ms: float | Sequence[float] = 5.0,
    n_out: int = 8,
    spacing_ms: float = 10.0,
    failed: int = 0,
) -> MetricsAccumulator:
    """One completed request per TTFT value, sent ``spacing_ms`` apart; ``failed`` more fail."""
    acc = MetricsAccumulator()
    tpots = [tpot_ms] * len(ttft_ms) if isinstance(tpot_ms, (int, float)) else list(tpot_ms)
    for i, (ttft, tpot) in enumerate(zip(ttft_ms, tpots, strict=True)):
        t0 = int(i * spacing_ms * 1e6)
        first = t0 + int(ttft * 1e6)
        gap = int(tpot * 1e6)
        record = RequestRecord(index=i, t_sched=t0, t_send=t0, t_first=first)
        record.t_last = first + gap * (n_out - 1)
        record.t_end = record.t_last
        record.token_events = n_out
        record.gaps_ns = [gap] * (n_out - 1)
        record.usage_completion_tokens = n_out
        acc.add(record)
    for j in range(failed):
        t0 = int((len(ttft_ms) + j) * spacing_ms * 1e6)
        record = RequestRecord(index=len(ttft_ms) + j, t_sched=t0, t_send=t0)
        record.fail("http_error", "500", now=t0 + 1_000_000)
        acc.add(record)
    return acc


@pytest.fixture
def make_acc() -> MakeAcc:
    return synthetic_accumulator


@pytest.fixture
def lognormal() -> Callable[..., np.ndarray]:
    def draw(median_ms: float, n: int, *, seed: int, sigma: float = 0.3) -> np.ndarray:
        return np.random.default_rng(seed).lognormal(np.log(median_ms), sigma, n)

    return draw
