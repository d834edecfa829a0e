"""pytest-llmperf against vLLM's router over two vLLM replicas (CPU, the tiny model).

Issue 40's done-when, literally: "vLLM's router over two real replicas: every request
completes, both replicas' pages are read, and the per-replica request counts add up to
the client's". vLLM's page counts finished requests (``vllm:request_success_total``,
``server.requests``), which llama-server's does not (``test_vllm_router_fleet.py``
checks tokens there): here each replica page's request count over the run's window is
read, both are above zero (round_robin), and they add up to the client's completed
requests, as do the pages' token counters to the client's usage sums. The router names
no replica in its responses, and vLLM none of its own: nothing is attributed
(docs/fleets.md, "Routers").

The module starts two vLLMs one after the other (about 45 s each on two cores, 2 GB
each) and the router, then runs one session of 24 requests.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from conformance_checks import (
    check_completed,
    load_test,
    run_records,
    run_session,
    run_token_sums,
)

REQUESTS = 24
CONCURRENCY = 4
INPUT_TOKENS = 64
OUTPUT_TOKENS = 16


@pytest.fixture(scope="module")
def vllm_fleet_run(
    vllm_router_vllm_fleet: Any, tmp_path_factory: pytest.TempPathFactory
) -> dict[str, Any]:
    fleet = vllm_router_vllm_fleet
    workdir = tmp_path_factory.mktemp("vllm-router-vllm")
    s = run_session(
        workdir,
        fleet.url,
        f"--llm-server-metrics={fleet.page_list(0.2)}",
        f"--llm-events={workdir / 'events.jsonl'}",
        test_source=load_test(REQUESTS, CONCURRENCY, INPUT_TOKENS, OUTPUT_TOKENS),
    )
    assert not s.leftovers, s.leftovers
    return check_completed(s, REQUESTS)


def replica_pages(run: dict[str, Any]) -> list[dict[str, Any]]:
    block = run.get("fleet")
    assert isinstance(block, dict), sorted(run)
    pages = [p for p in block["pages"] if p["role"] == "replica"]
    assert len(pages) == 2, json.dumps(block["pages"], indent=1)[:3000]
    return pages


def test_both_vllm_pages_are_read(vllm_fleet_run: dict[str, Any]) -> None:
    for page in replica_pages(vllm_fleet_run):
        view = page["server_metrics"]
        shown = json.dumps({k: v for k, v in view.items() if k != "buckets"}, indent=1)[:3000]
        assert view["missing"] is None, shown
        assert view["family"] == "vllm", shown
        assert view["scrapes"] >= 2, shown


def test_per_replica_request_counts_add_up_to_the_clients(vllm_fleet_run: dict[str, Any]) -> None:
    """Each replica's ``server.requests`` over the run's window (``runs[].fleet.requests``,
    by page name): both served some, and together exactly the client's completed
    requests; the fleet as one says the same."""
    completed = vllm_fleet_run["counts"]["completed"]
    names = [p["name"] for p in replica_pages(vllm_fleet_run)]
    per_replica = vllm_fleet_run["fleet"]["requests"]
    assert sorted(per_replica) == sorted(names), per_replica
    assert all(n > 0 for n in per_replica.values()), per_replica
    assert sum(per_replica.values()) == completed, (per_replica, completed)
    whole = vllm_fleet_run["server_metrics"]["metrics"]
    assert whole["server.requests"]["value"] == completed, whole["server.requests"]


def test_per_replica_token_counts_add_up_to_the_clients(vllm_fleet_run: dict[str, Any]) -> None:
    prompt, output = run_token_sums(vllm_fleet_run)
    pages = replica_pages(vllm_fleet_run)
    for name, want in (("server.prompt_tokens", prompt), ("server.generation_tokens", output)):
        got = sum(p["server_metrics"]["metrics"][name]["value"] for p in pages)
        assert got == want, (name, got, want)


def test_no_request_is_attributed_to_a_replica(vllm_fleet_run: dict[str, Any]) -> None:
    records = run_records(vllm_fleet_run)
    assert {r.replica for r in records} == {""}, {r.replica for r in records}
    assert "by_replica" not in vllm_fleet_run
