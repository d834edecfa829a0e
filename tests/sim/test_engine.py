"""The engine: step-time calibration, batching limits, chunked prefill, preemption."""

from __future__ import annotations

import pytest

from pytest_llmperf.sim.engine import Engine
from pytest_llmperf.sim.latency_model import LatencyModel
from pytest_llmperf.sim.profiles import load_profile
from pytest_llmperf.sim.request import Request


def run_to_completion(engine: Engine, reqs: list[Request], max_steps: int = 100_000) -> float:
    for r in reqs:
        engine.enqueue(r, r.arrival)
    t = 0.0
    for _ in range(max_steps):
        if not engine.has_work:
            return t
        t = engine.step(t).end
    raise AssertionError("did not finish")


def test_h100_decode_step_calibration() -> None:
    lm = LatencyModel.from_profile(load_profile("llama-3.1-8b-h100"))
    one = lm.step_s(0, 1, 1000) * 1000
    sixty_four = lm.step_s(0, 64, 64 * 1000) * 1000
    assert 6.4 <= one <= 6.8, one
    assert 11.5 <= sixty_four <= 12.5, sixty_four
    assert lm.step_s(1000, 0, 1000) * 1000 == pytest.approx(6.5 + 20 + 0.02, abs=0.1)


def test_single_request_timeline() -> None:
    p = load_profile("llama-3.1-8b-h100")
    e = Engine(p, debug=True)
    r = Request(0, 0.0, 1000, 5)
    run_to_completion(e, [r])
    lm = e.latency
    prefill = lm.step_s(1000, 0, 1000)
    assert r.first_token_time == pytest.approx(prefill)
    gaps = [b - a for a, b in zip(r.token_times, r.token_times[1:], strict=False)]
    for i, g in enumerate(gaps):
        assert g == pytest.approx(lm.step_s(0, 1, 1000 + i + 1))
    assert r.state == "finished" and r.generated == 5 and e.kv.allocated == 0


def test_chunked_prefill_respects_token_budget() -> None:
    p = load_profile("llama-3.1-8b-h100", max_num_batched_tokens=512)
    e = Engine(p, debug=True)
    r = Request(0, 0.0, 2000, 2)
    run_to_completion(e, [r])
    assert e.trace is not None
    # 2000 prompt tokens in chunks of 512: 4 steps, then one decode step
    assert len(e.trace) == 5
    assert r.first_token_time == pytest.approx(e.trace[3][1])


def test_max_num_seqs_and_budget_limit_the_batch() -> None:
    p = load_profile("tiny", max_num_seqs=4, num_blocks=1000, max_num_batched_tokens=64)
    e = Engine(p, debug=True)
    reqs = [Request(i, 0.0, 10, 20) for i in range(10)]
    run_to_completion(e, reqs)
    assert e.trace is not None
    assert max(batch for _s, _e, batch, _r, _w in e.trace) == 4
    assert e.max_running == 4
    assert all(r.generated == 20 for r in reqs)


def test_preemption_under_cache_pressure_recomputes_and_completes() -> None:
    p = load_profile("tiny")  # 128 blocks of 16 tokens
    e = Engine(p, debug=True)
    reqs = [Request(i, 0.0, 300, 300) for i in range(8)]  # 8 x 600 tokens > 2048-token cache
    run_to_completion(e, reqs)
    assert e.scheduler.preemptions > 0
    assert any(r.preemptions for r in reqs)
    assert all(
        r.state == "finished" and r.generated == 300 and len(r.token_times) == 300 for r in reqs
    )
    assert e.kv.allocated == 0
    # a preempted request restarts from scratch but keeps what it already streamed
    victim = next(r for r in reqs if r.preemptions)
    assert victim.token_times == sorted(victim.token_times)


def test_prefix_cache_shortens_second_prefill() -> None:
    p = load_profile("llama-3.1-8b-h100")
    e = Engine(p, debug=True)
    hashes = tuple(range(62))  # 62 full blocks of a 1000-token prompt
    a = Request(0, 0.0, 1000, 2, hashes)
    run_to_completion(e, [a])
    b = Request(1, e.now, 1000, 2, hashes)
    t0 = e.trace[-1][1] if e.trace else 0.0
    e.enqueue(b, t0)
    res = e.step(t0)
    assert b.cached_tokens == 62 * 16  # every full block; the last 8 tokens are computed
    assert res.prefill_tokens == 1000 - 62 * 16
    assert a.cached_tokens == 0


def test_abort_frees_blocks_wherever_the_request_is() -> None:
    e = Engine(load_profile("tiny", max_num_seqs=1), debug=True)
    a, b = Request(0, 0.0, 100, 50), Request(1, 0.0, 100, 50)
    e.enqueue(a, 0.0)
    e.enqueue(b, 0.0)
    e.step(0.0)
    assert a.state == "running" and b.state == "waiting"
    e.abort(b)
    e.abort(a)
    e.abort(a)  # idempotent
    assert not e.has_work and e.kv.allocated == 0 and e.aborted == 2
    e.check()


@pytest.mark.parametrize("policy", ["sjf", "priority"])
def test_policies_order_the_wait_queue(policy: str) -> None:
    e = Engine(load_profile("tiny", max_num_seqs=1, scheduling_policy=policy), debug=True)
    long = Request(0, 0.0, 500, 1, priority=5)
    short = Request(1, 0.0, 20, 1, priority=1)
    e.enqueue(long, 0.0)
    e.enqueue(short, 0.0)
    e.step(0.0)
    assert short.state == "finished" and long.state == "waiting"


def test_unservable_requests() -> None:
    e = Engine(load_profile("tiny"))
    assert e.unservable(1000, 100) is None
    assert "max_model_len" in (e.unservable(2000, 100) or "")
    e2 = Engine(load_profile("tiny", max_model_len=100_000))
    assert "whole cache" in (e2.unservable(2000, 100) or "")
