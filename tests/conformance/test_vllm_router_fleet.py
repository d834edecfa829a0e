"""pytest-llmperf against a fleet: vLLM's router (``vllm-router``) over two llama-servers.

Issue 40, "against real routers": the router in front of two real replicas, each
replica's ``/metrics`` read as its own page (``--llm-server-metrics`` given as a list:
the router's own page, then one ``replica=`` page per llama-server), and the fleet's
numbers checked against the client's. What vllm-router 0.1.17 does that these cases pin
(docs/fleets.md, "Routers", has the account, with where each fact was seen):

- it names no replica in its responses (no header, nothing in the body; the worker's
  own headers pass through, and llama-server sends none that names it): every request
  is honestly "not attributed" (``RequestRecord.replica == ""``), and the fleet's view
  is the aggregate of the pages;
- its own Prometheus page is on a second port (``--prometheus-port``) and counts each
  worker's requests (``vllm_router_processed_requests_total{worker=URL}``); the serving
  port's ``/metrics`` is proxied to ONE worker, a different one each time under
  round_robin, so it is never given as a page here;
- llama.cpp's page counts no requests, only tokens: "the per-replica counts add up to
  the client's" is checked on tokens (``llamacpp:prompt_tokens_total`` plus the cached
  ones, ``llamacpp:tokens_predicted_total``): summed over the two replica pages, over
  the run's window, they equal the client's usage sums exactly; and each replica got
  requests (round_robin), which the router's own page confirms per worker.

Discovery: a second, smaller session gives ``discover=<the router's URL>`` and the
router's page: the router's ``GET /workers`` names the two replicas, whose pages are then
read as if they had been given.

Two sessions (24 requests at concurrency 4, then 8 at 2) against the fleet the module
starts: two llama-servers (``-np 2`` each) and the router; about four seconds in all.
"""

from __future__ import annotations

import json
import urllib.request
from dataclasses import dataclass
from typing import Any

import pytest
from conformance_checks import (
    Session,
    check_completed,
    load_test,
    run_records,
    run_session,
    run_token_sums,
)

from pytest_llmperf.server_metrics.exposition import Scrape, parse_scrape

REQUESTS = 24
CONCURRENCY = 4
DISCOVERY_REQUESTS = 8
INPUT_TOKENS = 64
OUTPUT_TOKENS = 16
SCRAPE_EVERY_S = 0.2
ROUTED = "vllm_router_processed_requests_total"  # the router's requests per worker
ROUTE_REQUESTS = "vllm_router_requests_total"  # ... and per route
CHAT_ROUTE = "/v1/chat/completions"
# a per-replica SLO and the same on the fleet as one: the first is inconclusive (no
# response names its replica), the second judged on every request
SLOS = ("replica.ttft.max < 60s", "ttft.max < 60s")


@dataclass
class FleetRun:
    """The session against the fleet, and the router's own page before and after it."""

    session: Session
    run: dict[str, Any]
    router_before: Scrape
    router_after: Scrape
    replica_names: list[str]  # each replica page's name: its URL's host:port

    def routed(self, scrape: Scrape) -> dict[str, float]:
        """The router's requests per worker URL, as its page counts them."""
        series = scrape.counter_series(ROUTED) or {}
        return {dict(labels).get("worker", ""): value for labels, value in series.items()}

    def routed_delta(self) -> dict[str, float]:
        before = self.routed(self.router_before)
        return {w: v - before.get(w, 0.0) for w, v in self.routed(self.router_after).items()}


def router_page(url: str) -> Scrape:
    """The router's own Prometheus page, parsed (no proxy: loopback)."""
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    with opener.open(url, timeout=10) as resp:
        body = resp.read()
    scrape = parse_scrape(body, 0)
    assert isinstance(scrape, Scrape), f"{url}: {scrape}"
    return scrape


@pytest.fixture(scope="module")
def fleet_run(vllm_router_fleet: Any, tmp_path_factory: pytest.TempPathFactory) -> FleetRun:
    fleet = vllm_router_fleet
    workdir = tmp_path_factory.mktemp("vllm-router-fleet")
    before = router_page(fleet.metrics_url)
    s = run_session(
        workdir,
        fleet.url,
        f"--llm-server-metrics={fleet.page_list(SCRAPE_EVERY_S)}",
        f"--llm-events={workdir / 'events.jsonl'}",
        "--llm-inconclusive=warn",  # the replica SLO cannot be judged here: it says why
        test_source=load_test(REQUESTS, CONCURRENCY, INPUT_TOKENS, OUTPUT_TOKENS, slos=SLOS),
    )
    after = router_page(fleet.metrics_url)
    run = check_completed(s, REQUESTS, one_read_replies_ok=True)
    names = [r.url.split("//", 1)[1] for r in fleet.replicas]
    return FleetRun(s, run, before, after, names)


@pytest.fixture(scope="module")
def fleet(fleet_run: FleetRun) -> dict[str, Any]:
    """The run's ``fleet`` block: three pages in the order given, their roles."""
    block = fleet_run.run.get("fleet")
    assert isinstance(block, dict), (
        f"the run has no fleet block: {sorted(fleet_run.run)}\n{fleet_run.session.explain()}"
    )
    pages = block["pages"]
    assert [(p["role"], p["name"]) for p in pages][1:] == [
        ("replica", n) for n in fleet_run.replica_names
    ], json.dumps(pages, indent=1)[:3000]
    assert pages[0]["role"] == "router", pages[0]
    return block


def replica_pages(fleet: dict[str, Any]) -> list[dict[str, Any]]:
    return [p for p in fleet["pages"] if p["role"] == "replica"]


def test_every_request_completes_through_the_router(fleet_run: FleetRun) -> None:
    """All 24 requests issued and completed, none failed, and the router routed at least
    those (its own page, chat route: the client's requests plus whatever the session's
    preflight sent)."""
    counts = fleet_run.run["counts"]
    assert counts["completed"] == REQUESTS and counts["failed"] == 0, counts
    assert not fleet_run.session.leftovers, fleet_run.session.leftovers
    before = fleet_run.router_before.counter_series(ROUTE_REQUESTS) or {}
    after = fleet_run.router_after.counter_series(ROUTE_REQUESTS) or {}
    chat = [(labels, v) for labels, v in after.items() if dict(labels).get("route") == CHAT_ROUTE]
    assert len(chat) == 1, after
    labels, value = chat[0]
    assert value - before.get(labels, 0.0) >= REQUESTS, (before, after)


def test_both_replica_pages_are_read(fleet: dict[str, Any]) -> None:
    """Each llama-server's page is read as its own process: family ``llama.cpp``, at
    least the start and end scrapes, nothing missing, and each served some of the run
    (round_robin over two replicas: tokens on both pages)."""
    for page in replica_pages(fleet):
        view = page["server_metrics"]
        shown = json.dumps({k: v for k, v in view.items() if k != "buckets"}, indent=1)[:3000]
        assert view["missing"] is None, shown
        assert view["family"] == "llama.cpp", shown
        assert view["scrapes"] >= 2, shown
        assert str(view["source"]).split(" + ")[0].endswith("/metrics"), shown
        for name in ("server.prompt_tokens", "server.generation_tokens"):
            assert (view["metrics"].get(name) or {}).get("value", 0) > 0, (page["name"], shown)


def test_per_replica_token_counts_add_up_to_the_clients(
    fleet_run: FleetRun, fleet: dict[str, Any]
) -> None:
    """llama.cpp counts no requests: its token counters stand in. Summed over the two
    replica pages, over the run's window, prompt tokens (processed plus cached) and
    generated tokens equal the client's usage sums exactly; so does the fleet as one
    (``runs[].server_metrics``, the pages together)."""
    prompt, output = run_token_sums(fleet_run.run)
    sums = {"server.prompt_tokens": 0.0, "server.generation_tokens": 0.0}
    for page in replica_pages(fleet):
        for name in sums:
            sums[name] += page["server_metrics"]["metrics"][name]["value"]
    assert sums == {"server.prompt_tokens": prompt, "server.generation_tokens": output}, (
        sums,
        fleet_run.run["token_lengths"],
    )
    whole = fleet_run.run["server_metrics"]["metrics"]
    assert {k: whole[k]["value"] for k in sums} == sums, (whole, sums)


def test_the_router_sent_requests_to_both_replicas(fleet_run: FleetRun) -> None:
    """The router's own page counts its requests per worker: both replicas got some of the
    session's, and the workers it names are the two replicas."""
    delta = fleet_run.routed_delta()
    assert sorted(delta) == sorted(f"http://{n}" for n in fleet_run.replica_names), delta
    assert all(v > 0 for v in delta.values()), delta


def test_no_request_is_attributed_to_a_replica(fleet_run: FleetRun) -> None:
    """vllm-router names no worker in its responses and llama-server names none of its
    own: every request's replica is ``""`` (not attributed), none is guessed, and the run
    has no per-replica breakdown (``runs[].by_replica`` only where a response named one)."""
    records = run_records(fleet_run.run)
    assert len(records) == REQUESTS, len(records)
    replicas = {r.replica for r in records}
    assert replicas == {""}, replicas
    assert "by_replica" not in fleet_run.run, fleet_run.run["by_replica"]


def test_a_replica_slo_says_it_cannot_judge_and_the_fleet_is_judged(fleet_run: FleetRun) -> None:
    """Nothing attributed: ``replica.ttft.max`` is inconclusive and says how to name the
    replicas (``--llm-replica-header``), never judged on a guess; the same target on the
    fleet as one is judged on all 24 requests."""
    report = fleet_run.session.report
    assert report is not None
    verdicts = {v["expr"]: v for v in report["tests"][0]["slos"]}
    replica, fleet = (verdicts[e] for e in SLOS)
    assert replica["verdict"] == "inconclusive" and "replica" not in replica, replica
    assert "--llm-replica-header" in replica["reason"], replica
    assert fleet["verdict"] == "pass", fleet


@pytest.fixture(scope="module")
def discovered(
    vllm_router_fleet: Any, fleet_run: FleetRun, tmp_path_factory: pytest.TempPathFactory
) -> dict[str, Any]:
    """A session whose replica pages come from the router's own list (``discover=``); the
    router's Prometheus page given beside it (its API cannot say where that is)."""
    fleet = vllm_router_fleet
    workdir = tmp_path_factory.mktemp("vllm-router-discover")
    option = f"discover={fleet.url},router={fleet.metrics_url},{SCRAPE_EVERY_S:g}"
    s = run_session(
        workdir,
        fleet.url,
        f"--llm-server-metrics={option}",
        test_source=load_test(DISCOVERY_REQUESTS, 2, INPUT_TOKENS, OUTPUT_TOKENS),
    )
    return check_completed(s, DISCOVERY_REQUESTS, one_read_replies_ok=True)


def test_discovery_finds_both_replicas_from_the_routers_worker_list(
    fleet_run: FleetRun, discovered: dict[str, Any]
) -> None:
    """``GET /workers`` names both llama-servers (``worker_type`` regular: role replica),
    named by ``host:port`` as given pages would be; the fleet says how it was found; the
    replicas' token counters again add up to the client's usage."""
    block = discovered.get("fleet")
    assert isinstance(block, dict), sorted(discovered)
    assert "GET /workers" in str(block["discovered"]), block["discovered"]
    pairs = [(p["role"], p["name"]) for p in block["pages"]]
    assert pairs[0][0] == "router", pairs
    assert sorted(pairs[1:]) == sorted(("replica", n) for n in fleet_run.replica_names), pairs
    prompt, output = run_token_sums(discovered)
    pages = replica_pages(block)
    for name, want in (("server.prompt_tokens", prompt), ("server.generation_tokens", output)):
        assert all(p["server_metrics"]["missing"] is None for p in pages), pages
        got = sum(p["server_metrics"]["metrics"][name]["value"] for p in pages)
        assert got == want, (name, got, want)
