"""Two replicas, multi-turn conversations: session affinity raises the prefix-cache hit rate.

Each turn of a conversation quotes the previous turn's prompt and the server's reply
(docs/conversations.md), so the replica that served the previous turn holds all but
the new user message in its cache. Routing by the conversation's header keeps every
turn there; round robin sends consecutive turns to alternate replicas, where only the
turn before last is cached. One conversation runs at a time (concurrency 1), so the
order of requests, hence every routing decision, is the same on any machine: the hit
rates are deterministic, and so is their difference.

The hit rate is what the report shows: the run's ``cached_tokens`` over its
``input_tokens`` (per-request usage, summed in the JSON's ``metrics``), and
the server's own ``server.prefix_cache_hit_rate`` from its ``/metrics`` (the sum over
the replicas), in the JSON report of a real pytest session.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from pytest_llmperf.client.endpoint import Endpoint, Timeouts
from pytest_llmperf.client.records import RequestRecord
from pytest_llmperf.loadgen.run import LoadRun
from pytest_llmperf.sim import SimServer, start_sim_process
from pytest_llmperf.specs.load import LoadSpec
from pytest_llmperf.specs.run import RunSpec

HEADER = "X-Conversation-ID"
CONVERSATIONS, TURNS, WORDS = 4, 4, 200


def conversations_file(path: Path) -> str:
    """Distinct conversations (no two share a word), ``WORDS`` per user turn."""
    vocab = ["harbour", "lamp", "tide", "ferry", "quay", "rope", "gull", "anchor"]
    with path.open("w") as f:
        for c in range(CONVERSATIONS):
            messages = []
            for k in range(TURNS):
                text = " ".join(f"{vocab[(c * 7 + k * 3 + i) % 8]}{c}" for i in range(WORDS))
                messages.append({"role": "user", "content": text})
                messages.append({"role": "assistant", "content": " ".join(["word"] * 16)})
            f.write(json.dumps({"messages": messages}) + "\n")
    return str(path)


def spec(path: str) -> RunSpec:
    params = {
        "path": path,
        "conversations": True,
        "system_prompt_tokens": 0,
        "conversation_header": HEADER,
    }
    load = LoadSpec.parse("concurrency", {"concurrency": 1})
    return RunSpec("conversation", params, 0, load, requests=CONVERSATIONS * TURNS)


def hit_rate(metrics: dict[str, Any]) -> float:
    return float(metrics["cached_tokens"]) / float(metrics["input_tokens"])


@pytest.mark.asyncio
async def test_session_affinity_beats_round_robin_on_two_replicas(tmp_path: Path) -> None:
    path = conversations_file(tmp_path / "c.jsonl")
    runs: dict[str, tuple[dict[str, Any], list[RequestRecord]]] = {}
    for router in ("round_robin", "session"):
        async with SimServer(
            "llama-3.1-8b-h100", replicas=2, router=router, router_header=HEADER, speedup=20
        ) as sim:
            endpoint = Endpoint(sim.url + "/v1", timeouts=Timeouts.from_seconds(30))
            records: list[RequestRecord] = []
            result = await LoadRun(endpoint, spec(path), observers=[records.append]).execute()
        assert result.counts["completed"] == CONVERSATIONS * TURNS
        runs[router] = (result.to_dict()["metrics"], records)
    rr, session = (hit_rate(runs[r][0]) for r in ("round_robin", "session"))
    # per turn, as the module's docstring says: affinity finds all but the new user turn
    # (and a partial block) cached; round robin finds nothing at turn 1 (the other replica
    # never saw the conversation) and only the turn before last's from turn 2 on
    for r in runs["session"][1]:
        assert r.usage_cached_tokens is not None and r.usage_prompt_tokens is not None
        if r.turn >= 1:
            assert r.usage_cached_tokens >= r.usage_prompt_tokens - WORDS - 2 * 16, r
    for r in runs["round_robin"][1]:
        if r.turn in (0, 1):
            assert r.usage_cached_tokens == 0, r
        else:
            assert 0 < r.usage_cached_tokens < r.usage_prompt_tokens - WORDS - 2 * 16, r
    # the run's hit rate (what the JSON report's metrics carry): about 0.61 against 0.30
    assert session > 0.5 and rr < 0.4 and session - rr > 0.2, (session, rr)


# -- in the report of a pytest session ----------------------------------------------------

SUITE = """
import pytest

@pytest.mark.llm_workload(
    "conversation", path={path!r}, conversations=True, system_prompt_tokens=0,
    conversation_header={header!r},
)
@pytest.mark.llm_load("concurrency", concurrency=1, requests={requests})
async def test_conversations(llm_loadgen):
    await llm_loadgen.run()
"""


def test_the_report_shows_the_hit_rate_of_each_router(
    pytester: pytest.Pytester, tmp_path: Path
) -> None:
    """A pytest session against each simulator: its JSON report's run carries the hit
    rate twice, from the client's usage and from the server's ``/metrics``."""
    path = conversations_file(tmp_path / "c.jsonl")
    pytester.makepyfile(
        test_affinity_suite=SUITE.format(path=path, header=HEADER, requests=CONVERSATIONS * TURNS)
    )
    shown: dict[str, tuple[float, float]] = {}
    for router in ("round_robin", "session"):
        overrides = {"replicas": 2, "router": router, "router_header": HEADER}
        sim = start_sim_process("llama-3.1-8b-h100", overrides=overrides, speedup=20)
        report = tmp_path / f"{router}.json"
        try:
            outcome = pytester.runpytest(
                f"--llm-endpoint={sim.url}", f"--llm-json={report}", "-p", "no:cacheprovider"
            )
        finally:
            sim.stop()
        outcome.assert_outcomes(passed=1)
        run = json.loads(report.read_text())["tests"][0]["runs"][0]
        server = run["server_metrics"]["metrics"]["server.prefix_cache_hit_rate"]
        shown[router] = (hit_rate(run["metrics"]), float(server["value"]))
    (rr_client, rr_server), (session_client, session_server) = (
        shown["round_robin"],
        shown["session"],
    )
    assert session_client - rr_client > 0.2, shown
    assert session_server - rr_server > 0.2, shown
