"""The simulator's ``POST /reset_prefix_cache`` (vLLM's, development mode): the cache's own
reset, then over real sockets to a simulator process, where a shared-prefix run after the
reset starts with no prefix-cache hits and one without it hits at once."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from pytest_llmperf.client.endpoint import Endpoint, normalize_base_url
from pytest_llmperf.server_metrics.cache_reset import reset_prefix_cache
from pytest_llmperf.sim import start_sim_process
from pytest_llmperf.sim.kv_cache import KVCache
from pytest_llmperf.sim.process import SimProcess
from pytest_llmperf.sim.request import Request

# ~200 tokens of the simulator's tokenizer: 12 full blocks of 16 shared by every request
SHARED = " ".join(f"context{i % 37} word{i}" for i in range(100))


def test_the_cache_forgets_its_prefixes_only_when_no_block_is_in_use() -> None:
    kv = KVCache(num_blocks=8, block_size=4)
    hashes = (11, 12, 13)
    a = Request(1, 0.0, 13, 10, hashes)
    assert kv.match_prefix(a, 13) == 0
    assert kv.allocate_new(a, 0, 13)
    kv.publish(a, 13)
    assert not kv.reset_prefix_cache()  # a holds its blocks: refused, nothing changed
    assert a.held == [11, 12, 13] and kv.refs == {11: 1, 12: 1, 13: 1}
    kv.check([a])
    kv.release(a)
    assert list(kv.lru) == [13, 12, 11]
    warm = Request(2, 0.0, 13, 10, hashes)
    assert kv.match_prefix(warm, 13) == 3  # without a reset, the same prompt hits
    assert kv.reset_prefix_cache()
    assert not kv.lru and not kv.refs and kv.free == kv.total == 8
    kv.check([])
    cold = Request(3, 0.0, 13, 10, hashes)
    assert kv.match_prefix(cold, 13) == 0  # the same prompt: nothing cached any more
    assert (kv.hit_tokens, kv.query_tokens) == (12, 39)  # counters keep counting


@pytest.fixture(scope="module")
def tiny() -> Iterator[SimProcess]:
    with start_sim_process("tiny") as sim:
        yield sim


def prefix_counters(url: str) -> tuple[float, float]:
    """``vllm:prefix_cache_hits_total`` and ``…_queries_total`` from the simulator's
    ``/metrics`` (tokens)."""
    text = httpx.get(url + "/metrics", timeout=10).text
    values = {
        s.name: s.value for family in text_string_to_metric_families(text) for s in family.samples
    }
    return values["vllm:prefix_cache_hits_total"], values["vllm:prefix_cache_queries_total"]


def shared_prefix_run(url: str, n: int = 3) -> float:
    """``n`` requests sharing :data:`SHARED`, one after another; the run's prefix-cache
    hit rate from the server's counters (hits / queried tokens)."""
    hits0, queries0 = prefix_counters(url)
    for i in range(n):
        body = {"model": "sim-tiny", "prompt": f"{SHARED} question {i}", "max_tokens": 2}
        response = httpx.post(url + "/v1/completions", json=body, timeout=30)
        assert response.status_code == 200, response.text
    hits1, queries1 = prefix_counters(url)
    assert queries1 > queries0
    return (hits1 - hits0) / (queries1 - queries0)


def first_request_hits(url: str) -> float:
    """The prefix-cache hits (tokens) of one shared-prefix request."""
    hits0, _ = prefix_counters(url)
    body = {"model": "sim-tiny", "prompt": f"{SHARED} first", "max_tokens": 2}
    assert httpx.post(url + "/v1/completions", json=body, timeout=30).status_code == 200
    return prefix_counters(url)[0] - hits0


def test_a_reset_makes_the_next_shared_prefix_run_start_cold(tiny: SimProcess) -> None:
    url = tiny.url
    endpoint = Endpoint(normalize_base_url(url))
    reset = reset_prefix_cache(endpoint)
    assert reset.done and reset.how == "POST /reset_prefix_cache", reset
    cold = shared_prefix_run(url)
    assert cold > 0.3  # within a run, the shared prefix hits after its first request
    warm = shared_prefix_run(url)  # the same run again, no reset between
    assert warm > cold and warm > 0.9  # warmed by the first run: hits from its start
    assert reset_prefix_cache(endpoint).done
    assert shared_prefix_run(url) == pytest.approx(cold)  # cold again
    assert first_request_hits(url) >= 12 * 16  # no reset: the first request hits at once
    assert reset_prefix_cache(endpoint).done
    assert first_request_hits(url) == 0  # after one: it prefills the whole prompt


def test_the_fixed_profile_has_no_prefix_cache_and_no_reset() -> None:
    with start_sim_process("fixed") as sim:
        reset = reset_prefix_cache(Endpoint(normalize_base_url(sim.url)))
        assert not reset.done and "POST /reset_prefix_cache: 404" in reset.why
        assert httpx.post(sim.url + "/reset_prefix_cache", timeout=10).status_code == 404
