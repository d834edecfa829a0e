"""LoRA adapters: served as model names, listed by /v1/models, and their slot and time
costs (sim/adapters.py) in the engine, the fixed back end and virtual time."""

from __future__ import annotations

from typing import Any

import httpx
import hypothesis.strategies as st
import pytest
from hypothesis import HealthCheck, given, settings

from pytest_llmperf.sim import SimServer, load_profile, run_virtual
from pytest_llmperf.sim.adapters import LoraSlots
from pytest_llmperf.sim.engine import Engine
from pytest_llmperf.sim.request import RUNNING, WAITING, Request


def chat(model: str, **extra: Any) -> dict[str, Any]:
    return {
        "model": model,
        "messages": [{"role": "user", "content": "hello"}],
        "max_tokens": 3,
        **extra,
    }


@pytest.mark.asyncio
async def test_models_lists_adapters_and_requests_name_them() -> None:
    async with (
        SimServer("fixed", ttft_ms=1, itl_ms=0.2) as sim,
        httpx.AsyncClient(base_url=sim.url) as c,
    ):
        models = (await c.get("/v1/models")).json()["data"]
        answer = (await c.post("/v1/chat/completions", json=chat("sim-lora-2"))).json()
        missing = await c.post("/v1/chat/completions", json=chat("sim-lora-9"))
        msg_missing = await c.post("/v1/messages", json=chat("sim-lora-9"))
        tokenized = await c.post("/tokenize", json={"model": "sim-lora-1", "prompt": "a b"})
    assert [m["id"] for m in models] == ["sim-fixed", "sim-lora-1", "sim-lora-2"]
    assert [m["parent"] for m in models] == [None, "sim-fixed", "sim-fixed"]
    assert answer["model"] == "sim-lora-2"  # the adapter's name echoed, as vLLM does
    assert missing.status_code == 404
    assert missing.json()["error"] == {
        "message": "The model `sim-lora-9` does not exist.",
        "type": "NotFoundError",
        "param": "model",
        "code": 404,
    }
    assert msg_missing.status_code == 404
    assert msg_missing.json()["error"]["type"] == "not_found_error"
    assert tokenized.json()["count"] == 2  # adapters share the base model's tokenizer


@pytest.mark.asyncio
async def test_fixed_backend_charges_the_load_then_the_per_token_cost() -> None:
    """Server-side times (the per-request metrics): TTFT + lora_load_us when the adapter
    is swapped into the one slot, not when it is resident; every adapter token + lora_step_us."""
    kw: dict[str, Any] = {"ttft_ms": 2.0, "itl_ms": 1.0, "lora_load_us": 3000.0}
    kw["lora_step_us"] = 500.0
    async with SimServer("fixed", **kw) as sim, httpx.AsyncClient(base_url=sim.url) as c:

        async def metrics(model: str) -> dict[str, float]:
            body = (await c.post("/v1/chat/completions", json=chat(model))).json()
            got: dict[str, float] = body["metrics"]
            return got

        base = await metrics("sim-fixed")
        load = await metrics("sim-lora-1")
        resident = await metrics("sim-lora-1")
        swap = await metrics("sim-lora-2")
    assert base["time_to_first_token_ms"] == pytest.approx(2.0)
    assert load["time_to_first_token_ms"] == pytest.approx(5.0)
    assert resident["time_to_first_token_ms"] == pytest.approx(2.0)
    assert swap["time_to_first_token_ms"] == pytest.approx(5.0)  # max_loras 1: evicted lora-1
    assert base["mean_itl_ms"] == pytest.approx(1.0)
    assert load["mean_itl_ms"] == pytest.approx(1.5)


def test_slots_are_lru_and_held_by_running_requests() -> None:
    slots = LoraSlots(2, 100.0, 1000.0)
    assert slots.admit(1) and slots.admit(2)
    assert not slots.can_admit(3)  # both held
    slots.release(1)
    assert slots.can_admit(3) and slots.admit(3)
    assert list(slots.resident) == [2, 3]
    assert not slots.admit(2)  # resident: no load
    assert slots.step_cost_us({2, 3}) == 2 * 100.0 + 3 * 1000.0
    assert slots.step_cost_us({2}) == 100.0  # the loads were priced once


def test_engine_skips_a_blocked_adapter_and_prices_the_step() -> None:
    prof = load_profile("tiny", max_loras=1, lora_step_us=400.0, lora_load_us=5000.0)
    engine = Engine(prof, debug=True)
    a, b, base = (
        Request(0, 0.0, 32, 4, lora=1),
        Request(1, 0.0, 32, 4, lora=2),
        Request(2, 0.0, 32, 4),
    )
    for r in (a, b, base):
        engine.enqueue(r, 0.0)
    plain = engine.latency.step_s(64, 0, 64)
    res = engine.step(0.0)
    assert (a.state, b.state, base.state) == (RUNNING, WAITING, RUNNING)  # b skipped, base not
    assert res.end == pytest.approx(plain + (400.0 + 5000.0) * 1e-6)
    t = res.end
    while a.state == RUNNING:
        t = engine.step(t).end
    assert b.state == WAITING or b.state == RUNNING
    while engine.has_work:
        t = engine.step(t).end
    assert engine.scheduler.lora.total_loads == 2 and engine.kv.allocated == 0


def test_virtual_by_model_split_and_unchanged_without_adapters() -> None:
    kw: dict[str, Any] = {"load": "poisson", "rate": 20.0, "duration": 10.0, "input_tokens": 100}
    kw["output_tokens"] = 32
    mixed = run_virtual("tiny", adapters={"sim-lora-1": 0.4, "sim-lora-2": 0.4}, **kw).to_dict()
    plain = run_virtual("tiny", **kw).to_dict()
    again = run_virtual("tiny", adapters={"sim-lora-1": 0.4, "sim-lora-2": 0.4}, **kw).to_dict()
    assert mixed == again  # same seed, same run
    assert "by_model" not in plain and "lora_loads" not in plain["engine"]
    issued = mixed["counts"]["issued"]
    counts = {m: s["counts"]["issued"] for m, s in mixed["by_model"].items()}
    assert set(counts) == {"sim-tiny", "sim-lora-1", "sim-lora-2"}
    assert sum(counts.values()) == issued == plain["counts"]["issued"]
    assert abs(counts["sim-lora-1"] / issued - 0.4) < 0.1
    assert abs(counts["sim-tiny"] / issued - 0.2) < 0.1
    assert mixed["engine"]["lora_loads"] >= 2
    assert mixed["metrics"]["ttft"]["p99"] > plain["metrics"]["ttft"]["p99"]  # slots cost


def test_adapter_names_are_checked() -> None:
    with pytest.raises(ValueError, match="not served"):
        run_virtual("tiny", adapters={"other": 0.5}, rate=1.0, duration=1.0)
    with pytest.raises(ValueError, match="sum"):
        run_virtual("tiny", adapters={"sim-lora-1": 0.7, "sim-lora-2": 0.7}, rate=1.0, duration=1.0)
    with pytest.raises(ValueError, match="lora_adapters"):
        load_profile("tiny", lora_adapters="sim-tiny")


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    max_loras=st.integers(1, 3),
    w1=st.floats(0.0, 0.5),
    w2=st.floats(0.0, 0.5),
    load=st.sampled_from(["poisson", "concurrency"]),
    policy=st.sampled_from(["fcfs", "priority", "sjf"]),
    num_blocks=st.integers(40, 200),
    seed=st.integers(0, 2**16),
)
def test_engine_invariants_hold_with_adapters(
    max_loras: int, w1: float, w2: float, load: str, policy: str, num_blocks: int, seed: int
) -> None:
    """debug=True checks the slots after every step (users = running requests per adapter,
    at most max_loras resident) besides the KV and batch invariants; the driver checks
    conservation and work conservation: a blocked adapter never idles the engine."""
    res = run_virtual(
        "tiny",
        debug=True,
        load=load,
        rate=30.0,
        concurrency=6,
        duration=2.0,
        input_tokens=(10, 200),
        output_tokens=(1, 40),
        seed=seed,
        adapters={"sim-lora-1": w1, "sim-lora-2": w2},
        max_loras=max_loras,
        scheduling_policy=policy,
        num_blocks=num_blocks,
        max_num_seqs=8,
    )
    done = [r for r in res.requests if r.state == "finished"]
    assert len(done) + res.dropped == len(res.requests)
    assert not any(res.engine.scheduler.lora.users.values())
    assert sum(s["counts"]["issued"] for s in res.by_model.values()) == len(res.requests)
