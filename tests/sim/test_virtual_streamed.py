"""Streamed virtual runs (``keep_requests=False``): the same summary as keeping every
request, from per-step token ledgers and per-request figures taken as requests end."""

from __future__ import annotations

import gc
import math
from fractions import Fraction
from typing import Any

import numpy as np
import pytest

from pytest_llmperf.sim.profiles import load_profile
from pytest_llmperf.sim.request import Request
from pytest_llmperf.sim.summary import latency_stats, weighted_latency_stats
from pytest_llmperf.sim.virtual import run_virtual
from pytest_llmperf.sim.virtual_inputs import OWN_KEYS, VirtualWorkload
from pytest_llmperf.sim.virtual_ledger import TokenLedger

# each a short run; together: preemptions (tiny's 128 blocks), shared prefixes, size
# ranges, no lockstep, adapters, closed and constant loads, dropped requests, the fixed
# profile, fleets (prefix-aware routing reads the block keys; the slow replica)
CASES: dict[str, tuple[str, dict[str, Any]]] = {
    "preempting": ("tiny", dict(rate=20, duration=5, seed=3, output_tokens=(1, 100))),
    "prefix-ranges": (
        "tiny",
        dict(rate=15, duration=15, seed=4, shared_prefix=64, input_tokens=(20, 200),
             output_tokens=(1, 60)),
    ),
    "closed": ("tiny", dict(load="concurrency", concurrency=12, duration=10, seed=5,
                            output_tokens=(1, 80))),
    "one-by-one": ("tiny", dict(rate=20, duration=4, seed=6, lockstep=False, shared_prefix=32)),
    "adapters": ("tiny", dict(rate=10, duration=5, seed=7,
                              adapters={"sim-lora-1": 0.3, "sim-lora-2": 0.3})),
    "constant-dropping": ("tiny", dict(load="constant", rate=25, duration=4, seed=8,
                                       input_tokens=(10, 3000))),
    "fixed-closed": ("fixed", dict(load="concurrency", concurrency=4, duration=2, seed=12,
                                   output_tokens=(1, 30))),
    "fleet-prefix": ("replicas-4-prefix-aware", dict(rate=40, duration=5, seed=9,
                                                     shared_prefix=256, output_tokens=(4, 64))),
    "fleet-slow": ("replicas-4-slow-one", dict(rate=30, duration=5, seed=11,
                                               output_tokens=(4, 64))),
}  # fmt: skip


@pytest.mark.parametrize("case", CASES)
def test_streamed_run_summarises_as_the_kept_one(case: str) -> None:
    profile, kw = CASES[case]
    kept = run_virtual(profile, **kw)
    streamed = run_virtual(profile, keep_requests=False, **kw)
    assert streamed.requests == [] and kept.requests
    a, b = kept.to_dict(), streamed.to_dict()
    assert b == a
    assert a["counts"]["completed"] > 0 and a["metrics"]["itl"]["count"] > 0
    if case == "preempting":
        assert a["engine"]["preemptions"] > 0  # the odd gaps (non-consecutive steps) ran
    if case == "constant-dropping":
        assert a["counts"]["failed"] > 0
    if case == "adapters":
        assert set(b["by_model"]) == {"sim-tiny", "sim-lora-1", "sim-lora-2"}


def test_a_streamed_run_keeps_no_request() -> None:
    """Nothing holds a request once it ended (the loop, the engine, the ledger, the
    stream): what lets a long run's memory stay flat."""

    def live() -> int:
        gc.collect()
        return sum(1 for o in gc.get_objects() if type(o) is Request)

    before = live()
    kept = run_virtual("tiny", rate=20, duration=3, seed=1, output_tokens=8)
    assert live() - before == len(kept.requests) > 40
    del kept
    assert live() == before
    streamed = run_virtual(
        "tiny", rate=20, duration=3, seed=1, output_tokens=8, keep_requests=False
    )
    assert streamed.to_dict()["counts"]["completed"] > 40
    # the engine's lockstep table may still name a request for a step it never reached
    stale = sum(map(len, streamed.engine.scheduler.lockstep.finishing.values()))
    assert live() - before <= stale < 5
    del streamed
    assert live() == before


def _gaps(ledger: TokenLedger) -> list[float]:
    values, weights = ledger.gaps()
    return sorted(np.repeat(values, weights).tolist())


def test_ledger_gaps_are_the_token_times_differences() -> None:
    """Consecutive steps counted, others kept as the same float subtraction."""
    ledger = TokenLedger()
    times = [0.1, 0.25, 0.3, 0.7, 0.71, 1.3, 1.35, 2.0]
    for t in times:
        ledger.record(t)
    a, b, c = Request(0, 0.0, 8, 8), Request(1, 0.0, 8, 8), Request(2, 0.0, 8, 8)
    ledger.one(a, 0)  # a: steps 0, 1..4 (a run), 6 (after a gap), 7
    ledger.span(a, 1, 5)
    ledger.one(a, 6)
    ledger.one(a, 7)
    ledger.one(b, 2)  # b: steps 2, 3..6 (a run)
    ledger.span(b, 3, 7)
    ledger.span(c, 1, 3)  # c: steps 1, 2, then 5..7 (a run after a gap)
    ledger.span(c, 5, 8)
    ledger.span(c, 8, 8)  # an empty run changes nothing
    expected = []
    for steps in ([0, 1, 2, 3, 4, 6, 7], [2, 3, 4, 5, 6], [1, 2, 5, 6, 7]):
        tt = np.array([times[k] for k in steps])
        expected += np.diff(tt).tolist()
    assert _gaps(ledger) == sorted(expected)
    assert (a.tok_last, b.tok_last, c.tok_last) == (7, 6, 7)


def test_ledger_counts_each_model_apart() -> None:
    ledger = TokenLedger(models=2)
    for t in (1.0, 2.0, 4.0):
        ledger.record(t)
    base, lora = Request(0, 0.0, 4, 4), Request(1, 0.0, 4, 4, lora=1)
    ledger.span(base, 0, 3)
    ledger.one(lora, 0)
    ledger.one(lora, 2)
    v0, w0 = ledger.gaps(0)
    v1, w1 = ledger.gaps(1)
    assert sorted(np.repeat(v0, w0).tolist()) == [1.0, 2.0]
    assert np.repeat(v1, w1).tolist() == [3.0]


def test_weighted_stats_are_the_repeated_samples_stats() -> None:
    rng = np.random.default_rng(5)
    values = rng.lognormal(-4, 0.5, 3000)
    weights = rng.integers(0, 50, 3000)
    plain = latency_stats(np.repeat(values, weights))
    weighted = weighted_latency_stats(values, weights)
    mean = weighted.pop("mean")
    assert weighted == {k: v for k, v in plain.items() if k != "mean"}
    # the mean: the exact weighted sum, rounded once; numpy's pairwise sum within an ulp
    exact = sum(Fraction(float(v * 1000.0)) * int(w) for v, w in zip(values, weights, strict=True))
    assert mean == round(float(exact / int(weights.sum())), 6)
    assert plain["mean"] is not None and math.isclose(mean, plain["mean"], abs_tol=1e-6)
    assert weighted_latency_stats(values[:0], weights[:0])["count"] == 0


def test_own_block_keys_are_unique_and_never_a_hash_value() -> None:
    """A request's own blocks: keys no other request and no ``hash()`` can have; the
    shared prefix's: the same chained hashes for every request."""
    prof = load_profile("tiny")
    work = VirtualWorkload(prof, (100, 300), (10, 40), 64, np.random.default_rng(0))
    reqs = [work.make(rid, 0.0) for rid in range(50)]
    shared = 64 // prof.block_size
    own: list[int] = []
    for r in reqs:
        assert tuple(r.block_hashes[:shared]) == work.prefix
        assert r.own_from == shared
        assert len(r.block_hashes) == (r.prompt_len + r.max_tokens) // prof.block_size
        own += r.block_hashes[shared:]
    assert len(set(own)) == len(own)
    assert all(k >= OWN_KEYS for k in own) and all(abs(h) < OWN_KEYS for h in work.prefix)
