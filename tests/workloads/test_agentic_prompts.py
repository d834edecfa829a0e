"""Agentic prompts (workloads/agentic/prompts.py, scripts.py): exact with real tokenizers,
the recorded block sharing reproduced as equal text, the server's replies quoted, mid
starts, and the scripts' purity.

The exact counts are checked against :class:`ReferenceCounter` (the chat template rendered
and tokenized as a vLLM-like server does, written apart from the code under test), with the
tokenizers trained in tests/workloads/conftest.py.
"""

from __future__ import annotations

import pickle
import random
from collections.abc import Iterator
from pathlib import Path

import pytest
from agentic_fixture import BLOCK, write_weka
from tokenize_server import ReferenceCounter

from pytest_llmperf.tokens import count_tokens
from pytest_llmperf.workloads import build_workload
from pytest_llmperf.workloads.agent_script import AgentScript, AgentSource, agents_of
from pytest_llmperf.workloads.agentic.scripts import RecordedThread, mid_turn
from pytest_llmperf.workloads.conversations import TurnResult
from pytest_llmperf.workloads.corpus import default_corpus
from pytest_llmperf.workloads.hf_tokenizer import load_hf_tokenizer


@pytest.fixture(scope="module")
def weka_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_weka(tmp_path_factory.mktemp("agentic") / "weka")


@pytest.fixture(params=["llama", "chatml"])
def folder(request: pytest.FixtureRequest) -> Path:
    return request.getfixturevalue(f"{request.param}_dir")


def _threads(script: AgentScript) -> Iterator[AgentScript]:
    yield script
    for k in range(script.turns):
        for sub in script.spawns(k):
            yield from _threads(sub.script)


def _replay(script: AgentScript, count, reply_text) -> Iterator[tuple[int, object]]:  # type: ignore[no-untyped-def]
    """Every turn of one thread, each fed a made-up reply and the server's count."""
    earlier: list[TurnResult] = []
    for k in range(script.first_turn, script.turns):
        sample = script.turn(k, earlier)
        yield k, sample
        while len(earlier) < k:  # turns before a mid start: never sent
            earlier.append(TurnResult("", 0, 0))
        earlier.append(TurnResult(reply_text(k, sample.max_tokens), count(sample), 0))


@pytest.mark.parametrize("api", ["chat", "completions"])
@pytest.mark.parametrize("replies", ["server", "trace"])
def test_the_server_counts_every_call_as_recorded(
    folder: Path, weka_dir: Path, api: str, replies: str
) -> None:
    tok = load_hf_tokenizer(folder).for_api(api)
    server = ReferenceCounter(folder)
    corpus = default_corpus()
    workload = build_workload(
        "trace", seed=5, path=str(weka_dir), format="weka", tokenizer=tok, replies=replies
    )
    source = agents_of(workload)
    assert source is not None and isinstance(source, AgentSource)
    rng = random.Random(1)

    def reply(k: int, n: int) -> str:  # a reply of about n tokens, as a server's would be
        return tok.window(corpus, rng.randrange(5000), max(1, n - rng.randrange(3)))

    quoted = 0
    for i in range(source.count):
        for thread in _threads(source.conversation(i)):
            for k, sample in _replay(thread, lambda s: server.prompt_tokens(s, api), reply):
                assert server.prompt_tokens(sample, api) == sample.input_tokens, (i, k)
                assert isinstance(thread, RecordedThread)
                assert sample.input_tokens == thread.thread.calls[k].input_tokens
                quoted += bool(sample.history)
    described = workload.describe()
    assert described["inexact_prompts"] == 0
    if replies == "server":
        # a reply with its template tokens may not fit the next call (Llama's header is 19
        # tokens here): that call goes as block text, exact still, and is counted
        too_long = described["replies_too_long"]
        assert quoted >= 3 and quoted + too_long == described["calls_quoting_reply"] == 9
    else:
        assert quoted == 0 and "calls_quoting_reply" not in described
        assert described["replies_too_long"] == 0


def test_a_continuation_quotes_the_previous_prompt_and_the_servers_reply(
    weka_dir: Path,
) -> None:
    w = build_workload("trace", seed=0, path=str(weka_dir), format="weka")
    root = w.agent_source.conversation(0)
    first = root.turn(0, [])
    assert first.history == () and count_tokens(first.prompt) == 40
    reply = "the reply the server really sent"
    second = root.turn(1, [TurnResult(reply, 40, 6)])
    assert second.history == (
        {"role": "user", "content": first.prompt},
        {"role": "assistant", "content": reply},
    )
    assert count_tokens(reply) + 40 + count_tokens(second.prompt) == 70
    # the third call quotes the second's reply after the second's whole prompt
    third = root.turn(2, [TurnResult(reply, 40, 6), TurnResult("another one", 70, 6)])
    assert third.history[:3] == (*second.history, {"role": "user", "content": second.prompt})
    assert third.history[3] == {"role": "assistant", "content": "another one"}
    # the compaction starts afresh: block text of its own ids
    fourth = root.turn(
        3, [TurnResult(reply, 40, 6), TurnResult("x", 70, 6), TurnResult("y", 110, 6)]
    )
    assert fourth.history == () and count_tokens(fourth.prompt) == 50


def test_turns_are_pure_whatever_order_they_are_asked_in(weka_dir: Path) -> None:
    w = build_workload("trace", seed=0, path=str(weka_dir), format="weka")
    earlier = [TurnResult("one two three", 40, 3), TurnResult("four five", 70, 2)]
    a = w.agent_source.conversation(0)
    in_order = [a.turn(k, earlier[:k]) for k in range(3)]
    b = w.agent_source.conversation(0)
    backwards = [b.turn(k, earlier[:k]) for k in (2, 1, 0)][::-1]
    assert in_order == backwards
    again = pickle.loads(pickle.dumps(w))
    assert again.agent_source.conversation(0).turn(2, earlier) == in_order[2]
    # other replies, other prompts: nothing is kept from a different history
    other = [TurnResult("six", 40, 1), TurnResult("seven eight nine ten", 70, 4)]
    assert a.turn(2, other) != in_order[2]
    assert count_tokens(" ".join(m["content"] for m in a.turn(2, other).messages())) == 110


def _block_prefix(sample_a: str, sample_b: str) -> int:
    n = 0
    for x, y in zip(sample_a.split(), sample_b.split(), strict=False):
        if x != y:
            break
        n += 1
    return n


def test_shared_hash_ids_are_shared_text_within_their_scope(weka_dir: Path) -> None:
    w = build_workload("trace", seed=0, path=str(weka_dir), format="weka", replies="trace")
    src = w.agent_source
    a, b, c, d = (src.conversation(i) for i in range(4))
    # global scope: conv-d's first two blocks are conv-a's system prompt
    a0, d0 = a.turn(0, []).prompt, d.turn(0, []).prompt
    assert count_tokens(" ".join(a0.split()[: _block_prefix(a0, d0)])) >= 2 * BLOCK
    # a subagent starts with its root's system blocks (same namespace)
    sub = a.spawns(1)[0].script
    s0 = sub.turn(0, []).prompt
    assert count_tokens(" ".join(a0.split()[: _block_prefix(a0, s0)])) >= 2 * BLOCK
    # local scope: conv-b and conv-c name the same ids, yet share no block
    b0, c0 = b.turn(0, []).prompt, c.turn(0, []).prompt
    assert count_tokens(" ".join(b0.split()[: _block_prefix(b0, c0)])) < BLOCK
    # a repeat round of a local conversation gets blocks of its own, a global one the same
    assert src.count == 4
    w6 = build_workload("trace", path=str(weka_dir), format="weka", conversations=8)
    again_b, again_a = w6.agent_source.conversation(5), w6.agent_source.conversation(4)
    assert again_b.conversation_id == "conv-b~1" and again_a.conversation_id == "conv-a~1"
    assert again_b.turn(0, []).prompt != b0
    assert again_a.turn(0, []).prompt == a0


def test_the_conversation_header_names_the_tree_on_every_thread(weka_dir: Path) -> None:
    w = build_workload(
        "trace", path=str(weka_dir), format="weka", conversation_header="X-Session-Id",
        conversations=5,
    )  # fmt: skip
    root = w.agent_source.conversation(4)
    for thread in _threads(root):
        assert thread.conversation_id == "conv-a~1"
        assert thread.turn(0, []).headers == {"X-Session-Id": "conv-a~1"}
    paths = sorted(t.agent_id for t in _threads(root))
    assert paths == ["", "agent_001", "agent_001/agent_002"]
    assert root.turn(0, []).max_tokens == 8
    assert root.turn(0, []).extra_body == {}  # ignore_eos: the client sends it by default


def test_mid_start_warms_the_cache_with_the_context_it_builds_on(weka_dir: Path) -> None:
    w = build_workload("trace", seed=9, path=str(weka_dir), format="weka", start="mid")
    described = w.describe()
    assert described["start"] == "mid"
    for i in range(4):
        root = w.agent_source.conversation(i)
        calls = root.thread.calls
        f = root.first_turn
        assert f == mid_turn(9, i, len(calls))
        assert 1 <= f <= len(calls) - 1
        assert len(calls) // 4 <= f <= (3 * len(calls)) // 4 or f == 1
        warm = root.warmup_sample()
        assert warm is not None and warm.max_tokens == 1
        assert count_tokens(warm.prompt) == calls[f - 1].input_tokens
        first = root.turn(f, [])  # nothing earlier was sent: block text
        assert first.history == () and count_tokens(first.prompt) == calls[f].input_tokens
        shared = _block_prefix(warm.prompt, first.prompt)
        assert count_tokens(" ".join(first.prompt.split()[:shared])) >= BLOCK
        assert w.sample(i) == first
    plain = build_workload("trace", path=str(weka_dir), format="weka")
    assert plain.agent_source.conversation(0).warmup_sample() is None
    # seeded: another seed moves some starts, the same seed none
    same = build_workload("trace", seed=9, path=str(weka_dir), format="weka", start="mid")
    assert [same.agent_source.conversation(i).first_turn for i in range(40)] == [
        w.agent_source.conversation(i).first_turn for i in range(40)
    ]


def test_a_reply_longer_than_the_next_call_falls_back_to_block_text_and_is_counted(
    weka_dir: Path,
) -> None:
    w = build_workload("trace", path=str(weka_dir), format="weka")
    root = w.agent_source.conversation(0)
    long_reply = " ".join(["word"] * 50)  # the next call (70) has room for 30 - 1 at most
    second = root.turn(1, [TurnResult(long_reply, 40, 50)])
    assert second.history == () and count_tokens(second.prompt) == 70
    assert w.describe()["replies_too_long"] == 1


def test_starts_come_from_the_recording_or_the_stagger(weka_dir: Path, tmp_path: Path) -> None:
    from agentic_fixture import write_agentic

    staggered = build_workload("trace", path=str(weka_dir), format="weka", stagger=2.5)
    src = staggered.agent_source
    assert [src.start_ns(i) for i in range(5)] == [round(i * 2.5e9) for i in range(5)]
    assert staggered.describe()["starts"] == "every 2.5 s"
    timed = build_workload("trace", path=str(write_agentic(tmp_path / "a.jsonl")),
                           format="agentic", conversations=6, stagger=1)  # fmt: skip
    src = timed.agent_source
    assert [src.start_ns(i) for i in range(4)] == [0, 2_000_000_000, 4_000_000_000, 6_000_000_000]
    assert src.start_ns(1, time_scale=0.5) == 1_000_000_000
    # round 1 starts after the whole recording (6 s) and the stagger (1 s)
    assert src.start_ns(4) == 7_000_000_000 and src.start_ns(5) == 9_000_000_000
    assert timed.describe()["starts"] == "recorded"


def test_after_a_mid_start_earlier_may_hold_the_tracked_turns_only(weka_dir: Path) -> None:
    w = build_workload("trace", seed=9, path=str(weka_dir), format="weka", start="mid")
    root = w.agent_source.conversation(4)  # conv-a again: 4 root calls, starts at call 1
    f = root.first_turn
    assert f == 1
    reply = TurnResult("the tracked reply", 70, 3)
    padded = root.turn(f + 1, [TurnResult("", 0, 0), reply])
    assert root.turn(f + 1, [reply]) == padded
    assert padded.history[-1] == {"role": "assistant", "content": "the tracked reply"}
    assert count_tokens(" ".join(m["content"] for m in padded.messages())) == 110


def _long_conversation(folder: Path, calls: int) -> Path:
    """One agent of ``calls`` calls, each keeping the whole previous prompt."""
    requests, ids, n_in = [], [1, 2, 3], 70
    for k in range(calls):
        requests.append({"type": "s", "t": 2.0 * k, "in": n_in, "out": 12, "hash_ids": ids,
                         "api_time": 1.0})  # fmt: skip
        n_in += 12 + 40 + k
        ids = [*ids, *range(100 * k + 10, 100 * k + 10 + 4)][: n_in // BLOCK + 1]
    folder.mkdir()
    (folder / "long.json").write_text(
        __import__("json").dumps({"id": "long", "block_size": BLOCK, "requests": requests})
    )
    return folder


@pytest.mark.parametrize("api", ["chat", "completions"])
def test_a_long_conversation_stays_exact_past_the_measured_exchanges(
    folder: Path, tmp_path: Path, api: str
) -> None:
    tok = load_hf_tokenizer(folder).for_api(api)
    server = ReferenceCounter(folder)
    path = _long_conversation(tmp_path / "long", 16)
    w = build_workload("trace", seed=2, path=str(path), format="weka", tokenizer=tok)
    root = w.agent_source.conversation(0)
    rng = random.Random(4)
    corpus = default_corpus()
    turns = list(
        _replay(
            root,
            lambda s: server.prompt_tokens(s, api),
            lambda k, n: tok.window(corpus, rng.randrange(5000), n),
        )
    )
    assert len(turns) == 16
    for k, sample in turns:
        assert server.prompt_tokens(sample, api) == sample.input_tokens, k
    assert len(turns[-1][1].history) == 30  # every call quoted the one before it
    assert w.describe()["replies_too_long"] == 0
