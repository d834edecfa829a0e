"""``conversation`` with ``conversations=True``: the conversation scripts, their parameters,
traces."""

from __future__ import annotations

import json
import statistics
from pathlib import Path
from typing import Any, ClassVar

import pytest
from tokenize_server import ReferenceCounter

from pytest_llmperf.errors import LlmPerfUsageError
from pytest_llmperf.workloads import build_workload
from pytest_llmperf.workloads.conversations import (
    ChatScript,
    ThinkTime,
    TraceConversations,
    TurnResult,
    conversation_header,
    conversations_of,
    think_time,
)
from pytest_llmperf.workloads.hf_tokenizer import load_hf_tokenizer

DATA = Path(__file__).parent / "data" / "traces"


def write(path: Path, records: list[dict[str, Any]]) -> str:
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return str(path)


def chat(*turns: tuple[str, str]) -> dict[str, Any]:
    return {"messages": [{"role": r, "content": c} for r, c in turns]}


@pytest.fixture
def three_turns(tmp_path: Path) -> str:
    records = [
        chat(
            ("user", f"c{c} first question"),
            ("assistant", "one two three"),
            ("user", f"c{c} second question here"),
            ("assistant", "four five"),
            ("user", f"c{c} third"),
            ("assistant", "six seven eight nine ten"),
        )
        for c in range(5)
    ]
    return write(tmp_path / "c.jsonl", records)


def multi_turn(**params: Any) -> Any:
    source = conversations_of(build_workload("conversation", **params))
    assert source is not None
    return source


# -- defaults --------------------------------------------------------------------------


def test_conversations_are_off_by_default_and_samples_unchanged() -> None:
    plain = build_workload("conversation", seed=4)
    off = build_workload("conversation", seed=4, conversations=False)
    on = build_workload("conversation", seed=4, conversations=True)
    assert conversations_of(plain) is None and conversations_of(off) is None
    assert [plain.sample(i) for i in range(40)] == [off.sample(i) for i in range(40)]
    assert [plain.sample(i) for i in range(40)] == [on.sample(i) for i in range(40)]
    assert "sessions" not in plain.describe()
    assert on.describe()["sessions"]["think_time"] == "0 s"
    assert conversations_of(build_workload("synthetic")) is None


# -- the scripts -----------------------------------------------------------------------


def test_turn_k_quotes_the_replies_it_is_given(three_turns: str) -> None:
    source = multi_turn(path=three_turns, conversations=True, system_prompt_tokens=0)
    script = source.conversation(0)
    assert isinstance(script, ChatScript) and script.turns == 3
    first = script.turn(0, [])
    assert first.history == () and first.prompt.endswith("first question")
    assert first.max_tokens == 3  # the recorded answer's length
    replies = [TurnResult("the real reply", 40, 3), TurnResult("another", 50, 1)]
    third = script.turn(2, replies)
    c = first.prompt.split()[0]
    assert third.messages() == [
        {"role": "user", "content": f"{c} first question"},
        {"role": "assistant", "content": "the real reply"},
        {"role": "user", "content": f"{c} second question here"},
        {"role": "assistant", "content": "another"},
        {"role": "user", "content": f"{c} third"},
    ]
    assert third.max_tokens == 5
    # the estimate: the previous prompt as counted + its reply + the new user turn (+ template: 0)
    assert script.turn(1, replies[:1]).input_tokens == 40 + 3 + 4
    assert third.input_tokens == 50 + 1 + 2
    assert first.input_tokens == 3


def test_conversation_ids_headers_and_order(three_turns: str) -> None:
    source = multi_turn(
        path=three_turns, conversations=True, seed=7, conversation_header="X-Session-ID"
    )
    scripts = [source.conversation(i) for i in range(10)]
    assert [s.conversation_id for s in scripts] == [f"s7-{i}" for i in range(10)]
    for s in scripts:
        assert {s.turn(k, [TurnResult("r", 9, 1)] * k).headers["X-Session-ID"]
                for k in range(s.turns)} == {s.conversation_id}  # fmt: skip
    firsts = [s.turn(0, []).prompt.split()[0] for s in scripts]
    assert sorted(firsts[:5]) == [f"c{c}" for c in range(5)]  # a pass covers every conversation
    assert sorted(firsts[5:]) == [f"c{c}" for c in range(5)]
    again = multi_turn(
        path=three_turns, conversations=True, seed=7, conversation_header="X-Session-ID"
    )
    assert [again.conversation(i) for i in range(10)] == scripts  # seeded
    none = multi_turn(path=three_turns, conversations=True, seed=7)
    assert none.conversation(0).turn(0, []).headers == {}


def test_the_system_prompt_is_drawn_per_conversation(three_turns: str) -> None:
    always = multi_turn(path=three_turns, conversations=True, system_prompt_share=1.0)
    never = multi_turn(path=three_turns, conversations=True, system_prompt_share=0.0)
    half = multi_turn(path=three_turns, conversations=True, system_prompt_share=0.5, seed=2)
    s = always.conversation(3)
    turns = [s.turn(k, [TurnResult("r", 300, 1)] * k) for k in range(3)]
    assert {t.history[0]["role"] for t in turns} == {"system"}
    assert {t.category for t in turns} == {"system-prompt"}
    assert turns[0].input_tokens == 200 + 3
    assert never.conversation(3).turn(0, []).category == "plain"
    mix = {half.conversation(i).category for i in range(40)}
    assert mix == {"plain", "system-prompt"}


def test_leading_system_turns_of_the_file_stay_and_unanswered_turns_go(tmp_path: Path) -> None:
    path = write(
        tmp_path / "c.jsonl",
        [
            chat(
                ("system", "be brief"),
                ("user", "hello there"),
                ("assistant", "hi"),
                ("user", "unanswered"),
                ("user", "and now"),
                ("assistant", "ok then"),
                ("user", "trailing"),
            )
        ],
    )
    s = multi_turn(path=path, conversations=True, system_prompt_tokens=0).conversation(0)
    assert s.turns == 2
    second = s.turn(1, [TurnResult("HI", 6, 1)])
    assert second.messages() == [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": "hello there"},
        {"role": "assistant", "content": "HI"},
        {"role": "user", "content": "and now"},
    ]
    assert s.turn(0, []).input_tokens == 2 + 2


def test_max_input_tokens_cuts_a_conversation_before_its_first_long_turn(three_turns: str) -> None:
    # recorded sizes: turn 1 = 3, turn 2 = 3 + 3 + 4 = 10, turn 3 = 10 + 2 + 2 = 14
    source = multi_turn(path=three_turns, conversations=True, max_input_tokens=12)
    assert {source.conversation(i).turns for i in range(5)} == {2}
    assert source.describe()["cut_turns"] == 5


def test_output_limits_apply_to_each_turn(three_turns: str) -> None:
    s = multi_turn(
        path=three_turns, conversations=True, min_output_tokens=4, max_output_tokens=4
    ).conversation(0)
    assert [s.turn(k, [TurnResult("r", 9, 1)] * k).max_tokens for k in range(3)] == [4, 4, 4]


@pytest.fixture(params=["llama", "chatml"])
def folder(request: pytest.FixtureRequest) -> Path:
    path: Path = request.getfixturevalue(f"{request.param}_dir")
    return path


def test_the_template_s_tokens_are_in_the_estimate(three_turns: str, folder: Path) -> None:
    """Against a real chat template: turn 1 exact, later turns estimated from the server's
    count of the previous turn plus its reply (here: replies of corpus prose)."""
    tok = load_hf_tokenizer(folder).for_api("chat")
    server = ReferenceCounter(folder)
    source = multi_turn(path=three_turns, conversations=True, tokenizer=tok, seed=3)
    errors = []
    for i in range(6):
        script = source.conversation(i)
        earlier: list[TurnResult] = []
        for k in range(script.turns):
            sample = script.turn(k, earlier)
            counted = server.prompt_tokens(sample, "chat")
            if k == 0:
                assert sample.input_tokens == counted, (i, sample)
            else:
                errors.append(sample.input_tokens - counted)
            reply = f"The harbour woke before the sun, reply {i}.{k}."
            earlier.append(TurnResult(reply, counted, tok.count(reply)))
    assert max(map(abs, errors)) <= 2, errors  # an estimate: token merges at the seams


# -- think time ------------------------------------------------------------------------


def test_think_times_are_seeded_per_conversation_and_follow_their_distribution(
    three_turns: str,
) -> None:
    def draws(think: Any, seed: int = 0) -> list[int]:
        source = multi_turn(path=three_turns, conversations=True, think_time=think, seed=seed)
        out = []
        for i in range(400):
            s = source.conversation(i)
            out += [s.think_ns(k) for k in range(1, s.turns)]
        return out

    assert set(draws(1.5)) == {1_500_000_000}
    assert set(draws({"distribution": "fixed", "value": 0.25})) == {250_000_000}
    uniform = draws({"distribution": "uniform", "min": 0.5, "max": 3})
    assert min(uniform) >= 5e8 and max(uniform) <= 3e9 and len(set(uniform)) > 700
    expo = draws({"distribution": "exponential", "mean": 2.0})
    assert statistics.mean(expo) / 1e9 == pytest.approx(2.0, rel=0.1)
    assert expo == draws({"distribution": "exponential", "mean": 2.0})  # seeded
    assert expo != draws({"distribution": "exponential", "mean": 2.0}, seed=1)
    source = multi_turn(path=three_turns, conversations=True, think_time=2)
    assert source.conversation(0).think_ns(0) == 0  # nothing before the first turn


@pytest.mark.parametrize(
    ("value", "parsed"),
    [
        (None, ThinkTime()),
        (0, ThinkTime()),
        (2, ThinkTime("fixed", 2.0)),
        ({"distribution": "exponential", "mean": 2.0}, ThinkTime("exponential", 2.0)),
        ({"distribution": "uniform", "min": 0.5, "max": 3}, ThinkTime("uniform", 0.5, 3.0)),
        ({"distribution": "uniform", "min": 1, "max": 1}, ThinkTime("uniform", 1.0, 1.0)),
        ({"distribution": "fixed", "value": 1.0}, ThinkTime("fixed", 1.0)),
    ],
)
def test_good_think_times(value: Any, parsed: ThinkTime) -> None:
    assert think_time(value) == parsed


@pytest.mark.parametrize(
    ("value", "named"),
    [
        (-1, "think_time"),
        (float("nan"), "think_time"),
        (float("inf"), "think_time"),
        (True, "think_time"),
        ("2s", "think_time"),
        ([1, 2], "think_time"),
        ({"distribution": "gamma", "mean": 1}, "think_time['distribution']"),
        ({"mean": 1}, "think_time['distribution']"),
        ({"distribution": "exponential", "mean": 0}, "think_time['mean']"),
        ({"distribution": "exponential", "mean": -2}, "think_time['mean']"),
        ({"distribution": "exponential"}, "think_time"),
        ({"distribution": "exponential", "mean": 1, "max": 3}, "think_time"),
        ({"distribution": "uniform", "min": 3, "max": 1}, "think_time"),
        ({"distribution": "uniform", "min": -1, "max": 1}, "think_time['min']"),
        ({"distribution": "fixed", "value": "1"}, "think_time['value']"),
    ],
)
def test_bad_think_times_are_usage_errors(value: Any, named: str, three_turns: str) -> None:
    with pytest.raises(LlmPerfUsageError) as info:
        build_workload("conversation", path=three_turns, conversations=True, think_time=value)
    message = str(info.value)
    assert message.startswith(named) or f"{named} " in message, message
    assert repr(value) in message, message


@pytest.mark.parametrize(
    "value", ["X Session", "X-Session:", "", "Sessión", 42, "Host", "content-length"]
)
def test_bad_conversation_headers_are_usage_errors(value: Any) -> None:
    with pytest.raises(LlmPerfUsageError, match="conversation_header") as info:
        build_workload("conversation", conversations=True, conversation_header=value)
    assert repr(value) in str(info.value)


def test_good_conversation_headers() -> None:
    assert conversation_header("X-Session-ID") == "X-Session-ID"
    assert conversation_header("x-affinity_key.1") == "x-affinity_key.1"
    assert conversation_header(None) is None


@pytest.mark.parametrize(
    "params",
    [
        {"conversations": "yes"},
        {"conversations": 1},
        {"think_time": 2},
        {"conversation_header": "X-Session-ID"},
        {"conversations": False, "think_time": {"distribution": "fixed", "value": 1}},
    ],
)
def test_multi_turn_options_without_conversations_are_usage_errors(params: dict[str, Any]) -> None:
    with pytest.raises(LlmPerfUsageError) as info:
        build_workload("conversation", **params)
    message = str(info.value)
    assert any(k in message for k in params), message


# -- traces ----------------------------------------------------------------------------


def test_a_trace_s_session_id_rows_become_conversations() -> None:
    w = build_workload("trace", path=DATA / "sessions_sample.jsonl", format="jsonl")
    source = conversations_of(w)
    assert isinstance(source, TraceConversations) and source.timed
    # rows (by time): harbour, 42, harbour, (none), 42, harbour, 42
    assert source.units == ((0, 2, 5), (1, 4, 6), (3,))
    assert [source.place(i) for i in range(7)] == [
        (0, 0), (1, 0), (0, 1), (2, 0), (1, 1), (0, 2), (1, 2),
    ]  # fmt: skip
    harbour, alone = source.conversation(0), source.conversation(2)
    assert harbour.conversation_id == "harbour" and harbour.turns == 3 and harbour.tracks_turns
    assert not alone.tracks_turns and alone.turns == 1
    assert harbour.turn(1, []) == w.sample(2)  # the row as the trace workload sends it
    assert harbour.think_ns(1) == 0 and harbour.turn(0, []).headers == {}
    assert source.conversation(3).conversation_id == "harbour~1"  # past the last unit: repeats
    assert source.describe()["sessions"] == 2


def test_trace_conversations_take_think_time_and_header_from_the_workload() -> None:
    w = build_workload("trace", path=DATA / "sessions_sample.jsonl", format="jsonl")

    class WithOptions:
        trace = w.trace
        seed = 5
        think_time: ClassVar = {"distribution": "uniform", "min": 1, "max": 2}
        conversation_header = "X-Session-ID"

        def sample(self, index: int) -> Any:
            return w.sample(index)

    source = conversations_of(WithOptions())
    assert source is not None
    s = source.conversation(1)
    assert s.turn(2, []).headers == {"X-Session-ID": "42"}
    assert all(1e9 <= s.think_ns(k) <= 2e9 for k in (1, 2))


def test_a_trace_without_session_ids_runs_no_conversations(tmp_path: Path) -> None:
    path = write(tmp_path / "t.jsonl", [{"timestamp": 0, "input_length": 5, "output_length": 2}])
    assert conversations_of(build_workload("trace", path=path, format="jsonl")) is None


def test_the_names_before_issue_23_still_import() -> None:
    """Issue 23 renamed the multi-turn names to conversations; the old ones remain."""
    from pytest_llmperf.workloads import conversation, conversations, sessions

    assert conversation.ConversationSessions is conversation.FileConversations
    assert sessions.SessionSource is conversations.ConversationSource
    assert sessions.SessionScript is conversations.ConversationScript
    assert sessions.TraceSessions is conversations.TraceConversations
    assert sessions.sessions_of is conversations.conversations_of
