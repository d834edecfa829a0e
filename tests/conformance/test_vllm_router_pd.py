"""pytest-llmperf against vLLM's router in its prefill/decode mode, over two llama-servers.

``vllm-router --vllm-pd-disaggregation --prefill W1 --decode W2`` sends each request
first to the prefill worker (one token generated: the prefill's), then to the decode
worker, which answers the client. llama-server has no KV connector, so no KV cache
moves: the decode worker computes the prompt again. What this pins (docs/fleets.md, "Routers"):

- the router's ``GET /workers`` says each worker's role (``worker_type`` ``prefill`` /
  ``decode``), so ``discover=`` finds a prefill page and a decode page;
- each pool's page counts what that pool did, over the run's window: the prefill pool
  every prompt token and one generated token per request, the decode pool every prompt
  token again and every generated token the client received; the client's requests all
  complete (its view is the decode worker's answer).

One session (8 requests at concurrency 2) against the fleet the module starts: two
llama-servers and the router; about three seconds.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from conformance_checks import check_completed, load_test, run_session, run_token_sums

REQUESTS = 8
INPUT_TOKENS = 64
OUTPUT_TOKENS = 16


@pytest.fixture(scope="module")
def pd_run(vllm_router_pd_fleet: Any, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    fleet = vllm_router_pd_fleet
    workdir = tmp_path_factory.mktemp("vllm-router-pd")
    option = f"discover,router={fleet.metrics_url},0.2"  # discover: the endpoint's own list
    s = run_session(
        workdir,
        fleet.url,
        f"--llm-server-metrics={option}",
        test_source=load_test(REQUESTS, 2, INPUT_TOKENS, OUTPUT_TOKENS),
    )
    assert not s.leftovers, s.leftovers
    return check_completed(s, REQUESTS, one_read_replies_ok=True)


def pool(run: dict[str, Any], role: str) -> dict[str, float]:
    """The token counters of the one page of ``role``, read with nothing missing."""
    pages = [p for p in run["fleet"]["pages"] if p["role"] == role]
    assert len(pages) == 1, json.dumps(run["fleet"]["pages"], indent=1)[:3000]
    view = pages[0]["server_metrics"]
    assert view["missing"] is None and view["family"] == "llama.cpp", view
    names = ("server.prompt_tokens", "server.generation_tokens")
    return {n: view["metrics"][n]["value"] for n in names}


def test_discovery_finds_a_prefill_and_a_decode_page(
    vllm_router_pd_fleet: Any, pd_run: dict[str, Any]
) -> None:
    block = pd_run["fleet"]
    assert "GET /workers" in str(block["discovered"]), block["discovered"]
    prefill, decode = (r.url.split("//", 1)[1] for r in vllm_router_pd_fleet.replicas)
    pairs = sorted((p["role"], p["name"]) for p in block["pages"] if p["role"] != "router")
    assert pairs == [("decode", decode), ("prefill", prefill)], pairs
    assert sorted(block["roles"]) == ["decode", "prefill", "router"], sorted(block["roles"])


def test_each_pool_counts_what_it_did(pd_run: dict[str, Any]) -> None:
    """Prefill: every prompt token and one token per request; decode: every prompt token
    again (no KV connector: recomputed) and every token the client received."""
    prompt, output = run_token_sums(pd_run)
    assert pool(pd_run, "prefill") == {
        "server.prompt_tokens": prompt,
        "server.generation_tokens": REQUESTS,
    }
    assert pool(pd_run, "decode") == {
        "server.prompt_tokens": prompt,
        "server.generation_tokens": output,
    }
