"""The lockstep decoders (sim/lockstep.py) against stepping every request one by one.

The fast path must change nothing: each test runs the same thing both ways and
compares everything observable, float for float, and checks the fast path ran.
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pytest_llmperf.sim import summary
from pytest_llmperf.sim.engine import Engine
from pytest_llmperf.sim.profiles import load_profile
from pytest_llmperf.sim.request import Request
from pytest_llmperf.sim.virtual import VirtualResult, run_virtual


def _observed(res: VirtualResult) -> tuple[str, list[tuple[Any, ...]]]:
    """The run's JSON and, per request, every time and counter it ends with."""
    rows = [
        (
            r.rid,
            r.state,
            r.generated,
            r.preemptions,
            r.cached_tokens,
            r.enqueue_time.hex(),
            r.schedule_time.hex(),
            r.first_token_time.hex(),
            r.finish_time.hex(),
            [t.hex() for t in r.token_times],
        )
        for r in res.requests
    ]
    e = res.engine
    rows.append((e.steps, e.generation_tokens, e.prompt_tokens_computed, e.kv.free, e.now.hex()))
    return json.dumps(res.to_dict(), sort_keys=True), rows


def _both_ways(profile: str, **kw: Any) -> VirtualResult:
    fast = run_virtual(profile, **kw)
    slow = run_virtual(profile, lockstep=False, **kw)
    assert _observed(fast) == _observed(slow)
    assert slow.engine.scheduler.lockstep.joins == 0
    return fast


@pytest.mark.parametrize(
    "profile, kw",
    [
        # the benchmark's shape, shorter: plain decode between arrivals
        ("llama-3.1-8b-h100", dict(load="poisson", rate=20, duration=30, seed=1)),
        # overloaded: a full batch, a long queue, the lockstep runs the whole time
        ("llama-3.1-8b-h100", dict(load="poisson", rate=100, duration=15, seed=2)),
        # closed loop: the finished requests' order decides the next requests' ids
        (
            "llama-3.1-8b-h100",
            dict(
                load="concurrency",
                concurrency=24,
                duration=20,
                input_tokens=(100, 1500),
                output_tokens=(1, 300),
                seed=3,
            ),
        ),
        # shared prefixes, LoRA adapters taking turns in one slot, output delay
        (
            "llama-3.1-8b-h100",
            dict(
                load="constant",
                rate=15,
                duration=20,
                shared_prefix=256,
                output_tokens=(10, 200),
                adapters={"sim-lora-1": 0.4, "sim-lora-2": 0.3},
                max_loras=1,
                alpha2_us=120.0,
                seed=4,
            ),
        ),
        # a small cache: preemption, recompute, requests leaving and rejoining
        (
            "tiny",
            dict(
                load="poisson",
                rate=12,
                duration=20,
                input_tokens=(50, 600),
                output_tokens=(20, 300),
                shared_prefix=64,
                num_blocks=80,
                seed=5,
            ),
        ),
        # chunked prefill and a token budget that cuts the batch short
        (
            "tiny",
            dict(
                load="constant",
                rate=9,
                duration=20,
                input_tokens=(20, 900),
                output_tokens=(5, 200),
                num_blocks=100,
                scheduling_policy="sjf",
                long_prefill_token_threshold=128,
                max_num_batched_tokens=160,
                seed=6,
            ),
        ),
    ],
)
def test_lockstep_changes_no_result(profile: str, kw: dict[str, Any]) -> None:
    fast = _both_ways(profile, **kw)
    assert fast.engine.scheduler.lockstep.joins > 0  # the fast path ran


def test_preemption_happens_in_the_compared_runs() -> None:
    res = _both_ways(
        "tiny",
        load="poisson",
        rate=12,
        duration=20,
        input_tokens=(50, 600),
        output_tokens=(20, 300),
        num_blocks=80,
        seed=5,
    )
    assert res.engine.scheduler.preemptions > 0
    assert res.engine.scheduler.lockstep.joins > 0


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    policy=st.sampled_from(["fcfs", "priority", "sjf"]),
    num_blocks=st.integers(40, 400),
    max_num_seqs=st.integers(1, 24),
    budget=st.integers(16, 600),
    chunk=st.integers(0, 200),
    caching=st.booleans(),
    load=st.sampled_from(["poisson", "constant", "concurrency"]),
    rate=st.floats(1.0, 60.0),
    out_lo=st.integers(1, 80),
    out_span=st.integers(0, 200),
    prefix=st.sampled_from([0, 16, 100]),
    lora=st.booleans(),
    seed=st.integers(0, 2**16),
)
def test_lockstep_matches_one_by_one_on_random_configurations(
    policy: str,
    num_blocks: int,
    max_num_seqs: int,
    budget: int,
    chunk: int,
    caching: bool,
    load: str,
    rate: float,
    out_lo: int,
    out_span: int,
    prefix: int,
    lora: bool,
    seed: int,
) -> None:
    _both_ways(
        "tiny",
        scheduling_policy=policy,
        num_blocks=num_blocks,
        max_num_seqs=max_num_seqs,
        max_num_batched_tokens=budget,
        long_prefill_token_threshold=chunk,
        enable_prefix_caching=caching,
        load=load,
        rate=rate,
        concurrency=max(1, int(rate) // 4),
        duration=3.0,
        input_tokens=(1, 300),
        output_tokens=(out_lo, out_lo + out_span),
        shared_prefix=prefix,
        adapters={"sim-lora-1": 0.3, "sim-lora-2": 0.3} if lora else None,
        max_model_len=4096,
        seed=seed,
    )


def _stepped(lockstep: bool) -> list[tuple[Any, ...]]:
    """A real-time-style session: enqueue between steps, abort mid-decode, and what
    each step emitted and finished, in order (what realtime.py streams)."""
    engine = Engine(load_profile("tiny", num_blocks=90), lockstep=lockstep)
    reqs = [
        Request(i, 0.0, 40 + 37 * i % 300, 30 + 53 * i % 120, tuple(range(i, i + 8)))
        for i in range(24)
    ]
    log: list[tuple[Any, ...]] = []
    t = 0.0
    pending = list(reqs)
    while pending or engine.has_work:
        if pending and (engine.steps % 3 == 0 or not engine.has_work):
            r = pending.pop(0)
            engine.enqueue(r, t)
        if engine.steps in (40, 41, 90):
            victim = next((r for r in reqs if r.state == "running"), None)
            if victim is not None:
                engine.abort(victim)
        res = engine.step(t)
        t = res.end
        log.append(
            (
                res.end.hex(),
                res.batch_size,
                [r.rid for r in res.emitted],
                [r.rid for r in res.finished],
            )
        )
    log.append(tuple((r.rid, r.state, r.generated, len(r.token_times)) for r in reqs))
    log.append((engine.kv.free, engine.scheduler.preemptions, engine.aborted))
    return log


def test_engine_steps_emit_the_same_requests_either_way() -> None:
    assert _stepped(lockstep=True) == _stepped(lockstep=False)


def test_pooled_itl_in_slices_equals_all_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    res = run_virtual("tiny", load="poisson", rate=10, duration=10, output_tokens=(1, 40), seed=7)
    done = [r for r in res.requests if r.state == "finished"]
    n_out = np.array([r.generated for r in done])
    flat = np.array([t for r in done for t in r.token_times])
    whole = np.delete(np.diff(flat), np.cumsum(n_out)[:-1] - 1)
    monkeypatch.setattr(summary, "_ITL_SLICE", 3)
    assert summary._pooled_itl(done, n_out).tobytes() == whole.tobytes()
