"""Virtual time: determinism, saturation behaviour and the seed's invariants."""

from __future__ import annotations

import gc
import itertools
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from pytest_llmperf.sim.virtual import arrival_times, run_virtual

ROOT = str(Path(__file__).resolve().parents[2])


def test_same_seed_same_result_other_seed_differs() -> None:
    kw = dict(
        load="poisson",
        rate=15,
        duration=20,
        input_tokens=(100, 800),
        output_tokens=(20, 120),
        shared_prefix=64,
    )
    a = json.dumps(run_virtual("tiny", seed=7, **kw).to_dict(), sort_keys=True)
    b = json.dumps(run_virtual("tiny", seed=7, **kw).to_dict(), sort_keys=True)
    c = json.dumps(run_virtual("tiny", seed=8, **kw).to_dict(), sort_keys=True)
    assert a == b
    assert a != c


def test_poisson_schedule_has_the_planned_rate() -> None:
    t = arrival_times("poisson", 50.0, 200.0, seed=1)
    assert 9_600 < len(t) < 10_400
    assert all(b > a for a, b in itertools.pairwise(t)) and t[-1] < 200.0
    assert len(arrival_times("constant", 4.0, 10.0, seed=1)) == 40


@pytest.mark.parametrize("pattern", ["poisson", "constant"])
def test_schedule_is_the_load_generators(pattern: str) -> None:
    from pytest_llmperf.loadgen.plan.arrivals import arrival_offsets_ns
    from pytest_llmperf.specs.load import LoadSpec

    ours = arrival_times(pattern, 7.5, 60.0, seed=42)
    theirs = arrival_offsets_ns(LoadSpec(pattern, rate=7.5, seed=42))
    assert ours == [next(theirs) / 1e9 for _ in ours]


def test_light_load_throughput_matches_offered_load() -> None:
    r = run_virtual("llama-3.1-8b-h100", load="constant", rate=2, duration=30, seed=1).to_dict()
    assert r["counts"] == {"issued": 60, "completed": 60, "failed": 0}
    # no queueing at 2 req/s: TTFT is one 1000-token prefill step (26.5 ms) plus API overhead
    assert 26 < r["metrics"]["ttft"]["p50"] < 35
    assert r["metrics"]["request_throughput"] == pytest.approx(60 / r["window_s"])


def test_ttft_bends_past_saturation() -> None:
    def p99(rate: float) -> float:
        d = run_virtual(
            "llama-3.1-8b-h100", load="poisson", rate=rate, duration=60, seed=2
        ).to_dict()
        return d["metrics"]["ttft"]["p99"]

    below, beyond = p99(10), p99(45)
    assert beyond > 10 * below


def test_concurrency_load_keeps_c_in_flight() -> None:
    d = run_virtual(
        "tiny",
        load="concurrency",
        concurrency=3,
        duration=10,
        input_tokens=50,
        output_tokens=20,
        seed=0,
    )
    assert d.engine.max_running == 3
    assert d.summary["counts"]["completed"] == d.summary["counts"]["issued"] > 3


def test_unservable_requests_are_dropped_and_counted() -> None:
    d = run_virtual(
        "tiny", load="constant", rate=10, duration=2, input_tokens=(100, 3000), seed=1
    ).to_dict()
    assert d["engine"]["dropped_unservable"] > 0
    assert d["counts"]["failed"] == d["engine"]["dropped_unservable"]
    assert d["counts"]["completed"] + d["counts"]["failed"] == d["counts"]["issued"]


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    policy=st.sampled_from(["fcfs", "priority", "sjf"]),
    num_blocks=st.integers(40, 300),
    max_num_seqs=st.integers(1, 16),
    budget=st.integers(16, 600),
    chunk=st.integers(0, 200),
    caching=st.booleans(),
    load=st.sampled_from(["poisson", "constant", "concurrency"]),
    rate=st.floats(1.0, 60.0),
    in_lo=st.integers(1, 300),
    in_span=st.integers(0, 300),
    out_lo=st.integers(1, 80),
    out_span=st.integers(0, 80),
    prefix=st.sampled_from([0, 16, 100]),
    seed=st.integers(0, 2**16),
)
# regression: an arrival during a step that emptied the engine started a step before it ended
@example(
    policy="fcfs",
    num_blocks=40,
    max_num_seqs=1,
    budget=16,
    chunk=0,
    caching=False,
    load="poisson",
    rate=5.0,
    in_lo=1,
    in_span=0,
    out_lo=1,
    out_span=1,
    prefix=0,
    seed=0,
)
def test_invariants_hold_for_random_configurations(
    policy: str,
    num_blocks: int,
    max_num_seqs: int,
    budget: int,
    chunk: int,
    caching: bool,
    load: str,
    rate: float,
    in_lo: int,
    in_span: int,
    out_lo: int,
    out_span: int,
    prefix: int,
    seed: int,
) -> None:
    kw = dict(
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
        input_tokens=(in_lo, in_lo + in_span),
        output_tokens=(out_lo, out_lo + out_span),
        shared_prefix=prefix,
        seed=seed,
        max_model_len=4096,
    )
    # debug=True checks KV conservation, reference counts, batch limits after every step;
    # the driver checks the clock, work conservation and request conservation.
    res = run_virtual("tiny", debug=True, **kw)
    e = res.engine
    kv = e.kv
    assert kv.allocated == 0 and kv.free == kv.total
    done = [r for r in res.requests if r.state == "finished"]
    assert len(done) + res.dropped == len(res.requests)
    for r in done:
        assert r.arrival <= r.enqueue_time <= r.schedule_time <= r.first_token_time <= r.finish_time
        assert len(r.token_times) == r.generated == r.max_tokens
        assert r.token_times == sorted(r.token_times)
        assert r.token_times[0] == r.first_token_time and r.token_times[-1] == r.finish_time
    assert e.trace is not None
    for (_s0, e0, _b0, run0, wait0), (s1, _e1, _b1, _r1, _w1) in zip(
        e.trace, e.trace[1:], strict=False
    ):
        assert s1 >= e0  # steps never overlap: the clock never goes back
        if run0 or wait0:
            assert s1 == e0  # work-conserving: no idle gap while work waits
    assert all(batch <= max_num_seqs for _s, _e, batch, _r, _w in e.trace)
    # same seed => same output
    again = run_virtual("tiny", debug=False, **kw)
    assert json.dumps(again.to_dict(), sort_keys=True) == json.dumps(res.to_dict(), sort_keys=True)


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONPATH=ROOT)
    return subprocess.run(
        [sys.executable, "-m", "pytest_llmperf.sim", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )


def test_cli_virtual_is_byte_identical_and_writes_json(tmp_path: Path) -> None:
    args = [
        "--virtual",
        "--profile",
        "tiny",
        "--load",
        "poisson",
        "--rate",
        "8",
        "--duration",
        "20",
        "--input-tokens",
        "50:400",
        "--output-tokens",
        "10:100",
        "--seed",
        "3",
    ]
    one = _cli(*args, "--json", str(tmp_path / "run.json"))
    two = _cli(*args)
    assert one.returncode == 0, one.stderr
    assert one.stdout == two.stdout
    assert "ttft ms" in one.stdout and "request_throughput" in one.stdout
    data = json.loads((tmp_path / "run.json").read_text())
    assert set(data["metrics"]["ttft"]) == {
        "p50",
        "p90",
        "p95",
        "p99",
        "p99.9",
        "mean",
        "max",
        "count",
    }
    assert data["counts"]["issued"] == data["counts"]["completed"] > 100
    assert data["load"] == {"pattern": "poisson", "rate": 8.0, "duration": 20.0}


def test_cli_virtual_errors() -> None:
    r = _cli("--virtual", "--profile", "tiny", "--load", "poisson", "--duration", "5")
    assert r.returncode == 2 and "--rate" in r.stderr
    r = _cli("--virtual", "--profile", "tiny", "--set", "num_blocks=lots", "--rate", "5")
    assert r.returncode == 2 and "num_blocks" in r.stderr and "lots" in r.stderr


def test_fixed_profile_in_virtual_time() -> None:
    d = run_virtual(
        "fixed", load="constant", rate=4, duration=10, output_tokens=11, ttft_ms=30, itl_ms=7
    ).to_dict()
    m = d["metrics"]
    assert d["counts"]["completed"] == 40
    assert m["ttft"]["p50"] == m["ttft"]["max"] == pytest.approx(30)
    assert m["itl"]["p99"] == pytest.approx(7) and m["e2e"]["p50"] == pytest.approx(100)
    # load dependence: +2 ms of TTFT per request in flight; concurrency 3 => 2 others
    c = run_virtual(
        "fixed",
        load="concurrency",
        concurrency=3,
        duration=5,
        output_tokens=5,
        ttft_ms=10,
        itl_ms=1,
        ttft_per_active_ms=2,
    ).to_dict()
    assert c["metrics"]["ttft"]["p99"] == pytest.approx(14)


def test_virtual_run_leaves_the_collector_as_it_found_it() -> None:
    assert gc.isenabled()
    run_virtual("tiny", load="constant", rate=5, duration=2, seed=1)
    assert gc.isenabled()
    gc.disable()
    try:
        run_virtual("tiny", load="constant", rate=5, duration=2, seed=1)
        assert not gc.isenabled()
    finally:
        gc.enable()
