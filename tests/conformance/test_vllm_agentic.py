"""An agentic replay against vLLM CPU (issue 39): every call completes, and the server's
prefix cache serves more of each prompt as a conversation goes on.

The trace is written here, in the Weka format (``llm_load("trace", format="weka")``):
two conversations of four root calls each, the second launching a subagent of two
calls after its second call, with short tool waits. Each root call's prompt is the
last prompt, the server's real reply and new content, so turn ``k + 1`` starts with
all of turn ``k``'s prompt; its ``hash_ids`` say so (a block of 64 tokens each, every
call's list the last one's plus its new blocks). Lengths stay under the tier's
1024-token context.

vLLM (``servers.start_vllm_agentic``: the tier's flags plus
``--enable-prompt-tokens-details``) says in each usage how many of the prompt's
tokens its prefix cache served (``prompt_tokens_details.cached_tokens``, whole KV
blocks). The child session keeps every record (an observer), so the checks read them
per conversation, thread and turn: the root's cached tokens rise with the turn index,
and the first call of each conversation (nothing of it cached yet) has the fewest.

The requests also carry the affinity headers (``--llm-affinity=dynamo,sglang``), which
vLLM ignores: pinning must never make a plain server refuse a call. vLLM names no
replica, so none is attributed.

Needs the agentic replay (the Weka reader and the agent-tree issuer of issue 39); a
tree without them fails the child session with a usage error naming the format.
"""

from __future__ import annotations

import json
from collections import defaultdict
from itertools import pairwise
from pathlib import Path
from typing import Any

import pytest
from conformance_checks import Session, check_no_traceback, run_session

BLOCK = 64
OUT = 16  # every call's output tokens
ROOT_IN = (160, 384, 608, 832)  # each root call's prompt: the last one, its reply, new text
SUB_IN = (128, 320)
TOOL_S = 0.2  # the recorded wait between calls
LIMIT_S = 180.0


def _blocks(start: int, tokens: int) -> list[int]:
    return list(range(start, start + -(-tokens // BLOCK)))


def _call(t: float, tokens: int, first_block: int) -> dict[str, Any]:
    return {
        "type": "s",
        "t": round(t, 3),
        "in": tokens,
        "out": OUT,
        "hash_ids": _blocks(first_block, tokens),
        "api_time": 0.5,
    }


def weka_conversation(cid: str, *, subagent: bool) -> dict[str, Any]:
    """Four root calls growing by a prefix each time, and optionally a two-call subagent
    after the second (its own blocks: it shares nothing with its parent)."""
    requests: list[dict[str, Any]] = []
    t = 0.0
    for k, tokens in enumerate(ROOT_IN):
        requests.append(_call(t, tokens, 1))
        t += 0.5 + TOOL_S
        if subagent and k == 1:
            calls = []
            for tokens_sub in SUB_IN:
                calls.append(_call(t, tokens_sub, 1000))
                t += 0.5 + TOOL_S
            requests.append(
                {"type": "subagent", "t": calls[0]["t"], "agent_id": "explore", "requests": calls}
            )
    return {"id": cid, "block_size": BLOCK, "hash_id_scope": "local", "requests": requests}


CHILD_TEST = """
import json
from pathlib import Path

import pytest

SEEN = []


@pytest.mark.llm_load("trace", path={trace!r}, format="weka")
async def test_agentic_replay(llm_loadgen):
    llm_loadgen.observers.append(SEEN.append)
    await llm_loadgen.run()
    rows = [
        {{
            "conversation": r.conversation,
            "agent": r.agent,
            "turn": r.turn,
            "tracked": r.tracked,
            "error": r.error_detail if r.error is not None else None,
            "prompt": r.usage_prompt_tokens,
            "requested": r.input_requested,
            "cached": r.usage_cached_tokens,
            "replica": r.replica,
        }}
        for r in SEEN
    ]
    Path("records.json").write_text(json.dumps(rows))
"""


@pytest.fixture(scope="module")
def replay(vllm_agentic: Any, tmp_path_factory: pytest.TempPathFactory) -> tuple[Session, list]:
    workdir = tmp_path_factory.mktemp("vllm-agentic")
    trace = workdir / "trace"
    trace.mkdir()
    for cid, subagent in (("conv-a", False), ("conv-b", True)):
        (trace / f"{cid}.json").write_text(json.dumps(weka_conversation(cid, subagent=subagent)))
    session = run_session(
        workdir,
        vllm_agentic.url,
        "--llm-affinity=dynamo,sglang",
        test_source=CHILD_TEST.format(trace=str(trace)),
        limit_s=LIMIT_S,
    )
    records_path = Path(workdir / "records.json")
    assert records_path.exists(), f"the child wrote no records\n{session.explain()}"
    return session, json.loads(records_path.read_text())


def test_every_call_completes(replay: tuple[Session, list]) -> None:
    session, records = replay
    check_no_traceback(session)
    assert session.returncode == 0, session.explain()
    calls = len(ROOT_IN) * 2 + len(SUB_IN)
    tracked = [r for r in records if r["tracked"]]
    assert len(tracked) == calls, (len(tracked), records)
    assert [r for r in tracked if r["error"]] == [], session.explain()
    by_thread = defaultdict(list)
    for r in tracked:
        by_thread[(r["conversation"], r["agent"])].append(r["turn"])
    assert sorted(len(v) for v in by_thread.values()) == [2, 4, 4], by_thread
    for turns in by_thread.values():
        assert sorted(turns) == list(range(len(turns))), by_thread


def test_prompt_lengths_are_the_traces(replay: tuple[Session, list]) -> None:
    """Each call's prompt is as long as recorded, by the server's count (the replay's
    prompts are token-exact with the model's own tokenizer)."""
    _, records = replay
    expected = sorted([*ROOT_IN, *ROOT_IN, *SUB_IN])
    assert sorted(r["prompt"] for r in records if r["tracked"]) == expected, records


def test_cache_hits_rise_with_the_turn_index(replay: tuple[Session, list]) -> None:
    _, records = replay
    roots: dict[int, dict[int, int]] = defaultdict(dict)
    for r in records:
        if r["tracked"] and r["agent"] == "":
            assert r["cached"] is not None, f"vLLM said no cached tokens: {r}"
            roots[r["conversation"]][r["turn"]] = r["cached"]
    assert len(roots) == 2, roots
    for conversation, cached in roots.items():
        by_turn = [cached[k] for k in sorted(cached)]
        assert len(by_turn) == len(ROOT_IN), (conversation, by_turn)
        # each turn adds 224 new tokens (several KV blocks of any size vLLM uses) to a
        # prompt that begins with all of the last one: strictly more of it is cached
        assert all(a < b for a, b in pairwise(by_turn)), (conversation, by_turn)
        # and most of the last prompt is served from the cache (all but a partial block
        # of up to 128 tokens, vLLM's largest CPU block size, and the reply's tail)
        for k in range(1, len(by_turn)):
            assert by_turn[k] >= ROOT_IN[k - 1] - 2 * BLOCK, (conversation, by_turn)


def test_no_replica_is_attributed_where_the_server_names_none(
    replay: tuple[Session, list],
) -> None:
    _, records = replay
    assert {r["replica"] for r in records} == {""}
