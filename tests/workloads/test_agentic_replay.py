"""A Weka trace replayed against the simulator, call by call, without the load generator.

Each call goes through the real client to the simulator on 127.0.0.1 (engine kind, prefix
caching on, block size 16 as the fixture trace's), one at a time in the order the trace
sends them (each thread's calls in order; a subagent's calls after the call that launched
it). What is checked is the workload's half of issue 39's first "Done when": every call's
prompt counted by the server (``usage.prompt_tokens``) is the trace's ``in``, and the
server's cached tokens match the blocks the trace says each call shares with the calls
before it (within one block). Timing is the load generator's (tests/loadgen).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from agentic_fixture import BLOCK, write_weka

from pytest_llmperf.client import Endpoint, RequestRecord, send_request
from pytest_llmperf.client.stream_client import StreamClient
from pytest_llmperf.sim import SimServer
from pytest_llmperf.workloads import build_workload
from pytest_llmperf.workloads.agent_script import AgentScript
from pytest_llmperf.workloads.agentic.model import AgentCall
from pytest_llmperf.workloads.agentic.scripts import RecordedThread
from pytest_llmperf.workloads.conversations import TurnResult

pytestmark = pytest.mark.asyncio


@dataclass
class Sent:
    """One call as replayed: where it is in the trace and what the server said."""

    namespace: str  # whose blocks its hash ids name ("" = global)
    call: AgentCall
    continued: bool  # sent as the previous call's messages + the reply + new text
    prompt_tokens: int
    cached_tokens: int
    previous: Sent | None  # the thread's call before it


def _order(script: AgentScript) -> Iterator[tuple[AgentScript, int]]:
    """A thread's turns, each followed by the subagents it launched (depth first)."""
    for k in range(script.first_turn, script.turns):
        yield script, k
        for sub in script.spawns(k):
            yield from _order(sub.script)


async def _replay(path: Path, replies: str, conversations: int) -> list[Sent]:
    workload = build_workload(
        "trace", seed=3, path=str(path), format="weka", replies=replies,
        conversations=conversations,
    )  # fmt: skip
    source = workload.agent_source
    sent: list[Sent] = []
    async with SimServer("tiny", num_blocks=4096, max_model_len=8192) as sim:
        endpoint = Endpoint.from_env(sim.url, api_key_env=None, model="sim-tiny", api="chat")
        async with StreamClient(endpoint) as http:
            for i in range(source.count):
                root = source.conversation(i)
                results: dict[str, list[TurnResult]] = {}
                last: dict[str, Sent] = {}
                for script, k in _order(root):
                    assert isinstance(script, RecordedThread)
                    earlier = results.setdefault(script.agent_id, [])
                    sample = script.turn(k, earlier)
                    record = RequestRecord(index=i, t_sched=time.monotonic_ns())
                    record.reply = []
                    await send_request(http, endpoint, sample, record)
                    assert record.ok, record.error_detail
                    assert record.usage_prompt_tokens is not None
                    earlier.append(
                        TurnResult(
                            "".join(record.reply), record.usage_prompt_tokens,
                            record.output_tokens,
                        )
                    )  # fmt: skip
                    done = Sent(
                        script.namespace or "",
                        script.thread.calls[k],
                        bool(sample.history),
                        record.usage_prompt_tokens,
                        record.usage_cached_tokens or 0,
                        last.get(script.agent_id),
                    )
                    last[script.agent_id] = done
                    sent.append(done)
    return sent


def _shared_blocks(call: AgentCall, before: AgentCall) -> int:
    """Full blocks of ``before``'s prompt that ``call``'s prompt starts with (trace ids)."""
    full = min(before.input_tokens // BLOCK, call.input_tokens // BLOCK)
    n = 0
    for a, b in zip(call.hash_ids[:full], before.hash_ids[:full], strict=False):
        if a != b:
            break
        n += 1
    return n


def _expected_hit(done: Sent, sent: list[Sent]) -> int:
    """Tokens the trace says ``done`` finds cached: its longest block prefix shared with
    a call sent before it in the same hash namespace."""
    best = 0
    for other in sent:
        if other is done:
            break
        if other.namespace == done.namespace:
            best = max(best, _shared_blocks(done.call, other.call))
    return best * BLOCK


@pytest.fixture(scope="module")
def weka_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_weka(tmp_path_factory.mktemp("agentic") / "weka")


async def test_trace_replies_every_prompt_exact_and_cache_hits_the_recorded_blocks(
    weka_dir: Path,
) -> None:
    sent = await _replay(weka_dir, "trace", conversations=4)
    assert len(sent) == 17  # every call of every thread, none skipped
    for done in sent:
        assert done.prompt_tokens == done.call.input_tokens, done.call.where
        assert not done.continued  # block text only
        expected = _expected_hit(done, sent)
        assert abs(done.cached_tokens - expected) <= BLOCK, (
            done.call.where, done.cached_tokens, expected,
        )  # fmt: skip
    hits = [d.cached_tokens for d in sent]
    assert sum(hits) > 0 and any(_expected_hit(d, sent) >= 2 * BLOCK for d in sent)


async def test_server_replies_every_prompt_exact_and_cache_covers_the_quoted_reply(
    weka_dir: Path,
) -> None:
    sent = await _replay(weka_dir, "server", conversations=4)
    continued = [d for d in sent if d.continued]
    assert len(continued) >= 6  # most calls quote the server's reply
    for done in sent:
        assert done.prompt_tokens == done.call.input_tokens, done.call.where
        expected = _expected_hit(done, sent)
        assert done.cached_tokens >= expected - BLOCK, (done.call.where, done.cached_tokens)
        if done.continued:
            prev = done.previous
            assert prev is not None
            # the whole previous prompt, and at most it plus the reply it quotes
            quoted = prev.call.input_tokens + prev.call.output_tokens
            assert prev.call.input_tokens - BLOCK < done.cached_tokens <= quoted, done.call.where
        else:
            assert abs(done.cached_tokens - expected) <= BLOCK, done.call.where
