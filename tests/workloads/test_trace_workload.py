"""The ``trace`` workload: rows as samples, equal hash ids as equal prompt blocks, exact lengths."""

from __future__ import annotations

import json
import pickle
import random
import time
from pathlib import Path

import pytest
from tokenize_server import ReferenceCounter, TokenizeServer

from pytest_llmperf.errors import LlmPerfUsageError
from pytest_llmperf.session_tokenizer import choose_tokenizer
from pytest_llmperf.tokens import count_tokens, split_tokens
from pytest_llmperf.workloads import build_workload
from pytest_llmperf.workloads.hf_tokenizer import load_hf_tokenizer
from pytest_llmperf.workloads.traces import TraceWorkload, read_trace

DATA = Path(__file__).parent / "data" / "traces"
MOONCAKE = str(DATA / "mooncake_sample.jsonl")


def jsonl(tmp_path: Path, records: list[dict], name: str = "t.jsonl") -> str:
    path = tmp_path / name
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return str(path)


def row(n_in: int, hash_ids: list[int] | None = None, ts: float = 0, n_out: int = 7) -> dict:
    out: dict = {"timestamp": ts, "input_length": n_in, "output_length": n_out}
    if hash_ids is not None:
        out["hash_ids"] = hash_ids
    return out


def mixed_rows(seed: int, n: int, block_size: int) -> list[dict]:
    """Rows of every shape: shared and private blocks, partial last blocks, filler, tiny."""
    rng = random.Random(seed)
    out = []
    for i in range(n):
        shared = [rng.randint(0, 3)] + [10 + rng.randint(0, 5)] * rng.randint(0, 1)
        own = [1000 + 10 * i + k for k in range(rng.randint(0, 4))]
        hash_ids = (shared + own)[: rng.randint(0, len(shared) + len(own))]
        tiny = rng.choice([1, 2, 3, 7, 20, 30])
        n_in = tiny if rng.random() < 0.15 else rng.randint(1, max(3 * block_size, 3000))
        out.append(row(n_in, hash_ids, ts=i * 10))
    return out


# -- the sample trace --------------------------------------------------------------------


def test_the_mooncake_sample_replays_row_by_row() -> None:
    w = build_workload("trace", path=MOONCAKE)
    assert isinstance(w, TraceWorkload) and w.name == "trace"
    assert w.size == 200 and w.trace is read_trace(MOONCAKE, "mooncake")
    assert w.timestamps_s == tuple(r.timestamp_s for r in w.trace.rows)
    assert w.trace.offsets_ns(0.5)[-1] == round(w.timestamps_s[-1] * 0.5e9)
    for i, r in enumerate(w.trace.rows):
        s = w.sample(i)
        assert (s.index, s.input_tokens, s.max_tokens) == (i, r.input_length, r.output_length)
        assert count_tokens(s.prompt) == r.input_length, i  # the simulator counts the same
        assert s.history == () and s.category == "" and s.extra_body == {}


def test_describe_names_the_trace_and_how_prompts_are_made() -> None:
    d = build_workload("trace", path=MOONCAKE, seed=3, limit=50, start=1.0).describe()
    assert d["name"] == "trace" and d["seed"] == 3
    assert (d["path"], d["format"], d["rows"], d["skipped_rows"]) == (MOONCAKE, "mooncake", 50, 0)
    assert 0 < d["span_s"] < 10 and d["sessions"] == 0 and d["block_size"] == 512
    assert (d["start_s"], d["limit"]) == (1.0, 50)
    assert d["tokenizer"].startswith("approximate") and d["output_control"].endswith("ignore_eos")
    json.dumps(d)  # the report stores it
    sessions = build_workload("trace", path=str(DATA / "sessions_sample.jsonl"), format="jsonl")
    assert sessions.describe()["sessions"] == 2


def test_samples_do_not_depend_on_the_order_they_are_asked_in() -> None:
    a = build_workload("trace", path=MOONCAKE, seed=5)
    b = build_workload("trace", path=MOONCAKE, seed=5)
    forward = [a.sample(i) for i in range(40)]
    backward = [b.sample(i) for i in reversed(range(40))][::-1]
    assert forward == backward
    other = build_workload("trace", path=MOONCAKE, seed=6)
    assert other.sample(0).prompt != forward[0].prompt


def test_indices_past_the_last_row_wrap_around(tmp_path: Path) -> None:
    w = build_workload("trace", path=jsonl(tmp_path, [row(30), row(40, ts=5)]))
    again = w.sample(5)
    assert again.index == 5 and again.prompt == w.sample(1).prompt
    assert again.input_tokens == 40


def test_output_controls_reach_the_request_body() -> None:
    assert build_workload("trace", path=MOONCAKE).sample(0).extra_body == {}
    quiet = build_workload("trace", path=MOONCAKE, ignore_eos=False)
    assert quiet.sample(0).extra_body == {"ignore_eos": False}
    assert quiet.describe()["output_control"] == "max_tokens"


def test_burstgpt_model_is_the_category() -> None:
    w = build_workload("trace", path=str(DATA / "burstgpt_sample.csv"), format="burstgpt")
    assert {w.sample(i).category for i in range(w.size)} == {"ChatGPT", "GPT-4"}
    assert w.describe()["skipped_rows"] == 5


# -- hash ids ------------------------------------------------------------------------------


def test_equal_hash_ids_give_identical_blocks(tmp_path: Path) -> None:
    bs = 64
    path = jsonl(
        tmp_path,
        [
            row(3 * bs, [1, 2, 3]),
            row(3 * bs, [1, 2, 4]),
            row(2 * bs, [1, 5]),
            row(3 * bs, [9, 2, 3]),
        ],
    )
    w = build_workload("trace", path=path, block_size=bs)
    a, b, c, d = (w.sample(i).prompt for i in range(4))
    one, two = w.prompts.block(1).text, w.prompts.block(2).text
    assert a.startswith(f"{one} {two} ") and b.startswith(f"{one} {two} ")
    assert c.startswith(f"{one} ") and not c.startswith(f"{one} {two}")
    assert a.split(f"{one} {two} ")[1] == w.prompts.block(3).text  # three whole blocks
    assert b.split(f"{one} {two} ")[1] == w.prompts.block(4).text
    assert f" {two} " in d and d.endswith(w.prompts.block(3).text)  # same id, same text anywhere
    assert len({one, two, w.prompts.block(3).text, w.prompts.block(4).text}) == 4
    # each block is block_size tokens after a space; alone, its first word may count apart
    assert count_tokens(" " + two) == bs
    assert all(count_tokens(p) == n for p, n in ((a, 3 * bs), (b, 3 * bs), (c, 2 * bs)))


def test_a_partial_last_block_is_a_prefix_of_the_whole_block(tmp_path: Path) -> None:
    bs = 200
    path = jsonl(tmp_path, [row(bs, [1]), row(120, [1]), row(bs + 50, [1, 2]), row(60, [2])])
    w = build_workload("trace", path=path, block_size=bs)
    whole = w.sample(0).prompt
    assert whole == w.prompts.block(1).text
    short = w.sample(1).prompt
    shared = _common_words(short, whole)
    assert count_tokens(" ".join(whole.split()[:shared])) >= 120 - 8  # at most a word or two apart
    longer = w.sample(2).prompt
    assert longer.startswith(whole + " ") and count_tokens(longer) == bs + 50
    two = w.prompts.block(2).text
    assert _common_words(longer[len(whole) + 1 :], two) >= len(two.split()) // 5


def _common_words(a: str, b: str) -> int:
    n = 0
    for x, y in zip(a.split(), b.split(), strict=False):
        if x != y:
            break
        n += 1
    return n


def test_rows_longer_than_their_blocks_get_fresh_filler(tmp_path: Path) -> None:
    bs = 50
    path = jsonl(tmp_path, [row(400, [1]), row(400, [1]), row(400), row(400)])
    w = build_workload("trace", path=path, block_size=bs)
    a, b, c, d = (w.sample(i).prompt for i in range(4))
    one = w.prompts.block(1).text
    assert a.startswith(one + " ") and b.startswith(one + " ")
    assert _common_words(a[len(one) :], b[len(one) :]) < 20  # the rest is each row's own
    assert _common_words(c, d) < 20
    assert all(count_tokens(p) == 400 for p in (a, b, c, d))


def test_distinct_hash_ids_do_not_share_openings() -> None:
    """The bundled corpus is short: blocks are runs from random places, not one window,
    so distinct ids do not share a 16-token opening (a prefix cache would count it)."""
    w = build_workload("trace", path=MOONCAKE, block_size=128)
    openings = {tuple(split_tokens(w.prompts.block(h).text)[:16]) for h in range(2000)}
    assert len(openings) == 2000


def test_blocks_are_cached_and_cheap_once_warm(tmp_path: Path) -> None:
    records = [
        row(4096, [i % 4, 10 + i % 8, 20 + i % 16, *(100 + k for k in range(5))], ts=i)
        for i in range(200)
    ]
    w = build_workload("trace", path=jsonl(tmp_path, records))
    assert count_tokens(w.sample(0).prompt) == 4096
    for i in range(200):
        w.sample(i)
    start = time.perf_counter()
    for i in range(200):
        w.sample(i)
    per_sample = (time.perf_counter() - start) / 200
    assert per_sample < 1e-3, f"{per_sample * 1e6:.0f} us per 4096-token sample"


# -- messages rows ----------------------------------------------------------------------------


def test_messages_rows_are_sent_as_given() -> None:
    w = build_workload("trace", path=str(DATA / "plain_sample.jsonl"), format="jsonl")
    chat = w.sample(1)
    assert chat.prompt == "Why do fishing boats leave before sunrise?"
    assert [m["role"] for m in chat.history] == ["system"]
    contents = [m["content"] for m in chat.messages()]
    assert chat.input_tokens == sum(count_tokens(c) for c in contents)  # counted: no template
    assert w.sample(3).input_tokens == 40  # given: taken as is
    turns = w.sample(5)
    assert [m["role"] for m in turns.messages()] == ["user", "assistant", "user"]
    assert turns.prompt == "And at dusk?" and turns.max_tokens == 50
    assert count_tokens(w.sample(0).prompt) == 120


# -- exact lengths with a model's tokenizer ---------------------------------------------------


@pytest.fixture(params=["llama", "chatml"])
def folder(request: pytest.FixtureRequest) -> Path:
    return request.getfixturevalue(f"{request.param}_dir")


@pytest.mark.parametrize("api", ["chat", "completions"])
@pytest.mark.parametrize("block_size", [16, 100, 512])
def test_the_server_counts_exactly_the_row_s_input(
    tmp_path: Path, folder: Path, api: str, block_size: int
) -> None:
    tok = load_hf_tokenizer(folder).for_api(api)
    server = ReferenceCounter(folder)
    path = jsonl(tmp_path, mixed_rows(block_size, 120, block_size))
    w = build_workload("trace", path=path, tokenizer=tok, block_size=block_size, seed=2)
    floor = tok.framing(("user",)) + 1  # below this the server counts more than asked
    checked = 0
    for i in range(w.size):
        s = w.sample(i)
        if s.input_tokens >= floor:
            assert server.prompt_tokens(s, api) == s.input_tokens, (i, w.trace.rows[i])
            checked += 1
        else:
            assert server.prompt_tokens(s, api) == floor
    assert checked > 90
    chats = build_workload(
        "trace", path=str(DATA / "plain_sample.jsonl"), format="jsonl", tokenizer=tok
    )
    for i in (1, 5):  # messages without a length: counted with the tokenizer and template
        s = chats.sample(i)
        assert server.prompt_tokens(s, api) == s.input_tokens


def test_shared_blocks_are_shared_tokens(tmp_path: Path, folder: Path) -> None:
    """A prefix cache keys on tokens: equal leading blocks must tokenize the same."""
    tok = load_hf_tokenizer(folder)
    bs = 128
    path = jsonl(tmp_path, [row(3 * bs, [1, 2, 3]), row(3 * bs, [1, 2, 4]), row(bs + 9, [1, 2])])
    w = build_workload("trace", path=path, tokenizer=tok, block_size=bs)
    a, b, c = (tok.encode(w.sample(i).prompt) for i in range(3))
    assert len(a) == len(b) == 3 * bs and len(c) == bs + 9
    one, two = w.prompts.block(1), w.prompts.block(2)
    assert len(tok.encode(" " + two.text)) == bs == two.cost
    assert len(tok.encode(one.text)) == bs + one.delta  # first in a prompt: its first word alone
    shared = len(tok.encode(f"{one.text} {two.text}"))
    assert a[:shared] == b[:shared] and a[shared] != b[shared]
    assert c[:bs] == a[:bs]


def test_the_server_tokenizer_builds_samples_without_calls(
    tmp_path: Path, tokenize_server: TokenizeServer, llama_dir: Path
) -> None:
    tok = choose_tokenizer("server", tokenize_server.endpoint()).tokenizer
    bound = tok.for_api("chat")  # type: ignore[attr-defined]
    path = jsonl(tmp_path, mixed_rows(7, 60, 64))
    w = build_workload("trace", path=path, tokenizer=bound, block_size=64)
    w.sample(0)  # the load generator's warm-up: tables measured here
    calls = len(tokenize_server.calls)
    samples = [w.sample(i) for i in range(w.size)]
    assert len(tokenize_server.calls) == calls
    server = ReferenceCounter(llama_dir)
    floor = bound.framing(("user",)) + 1
    for s in samples:
        if s.input_tokens >= floor:
            assert server.prompt_tokens(s, "chat") == s.input_tokens


def test_a_workload_pickles_and_samples_the_same(llama_dir: Path) -> None:
    tok = load_hf_tokenizer(llama_dir).for_api("chat")
    w = build_workload("trace", path=MOONCAKE, tokenizer=tok, seed=4)
    first = [w.sample(i) for i in range(30)]
    again = pickle.loads(pickle.dumps(w))
    assert [again.sample(i) for i in range(30)] == first
    assert again.describe() == w.describe()


# -- parameters ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({}, "trace workload needs path=<trace file>"),
        ({"path": 5}, "path must be a trace file path, got 5"),
        ({"path": MOONCAKE, "format": "csv"},
         "format must be one of mooncake, burstgpt, azure, jsonl, got 'csv'"),
        ({"path": MOONCAKE, "block_size": 0}, "block_size must be an integer >= 1, got 0"),
        ({"path": MOONCAKE, "block_size": "512"}, "block_size must be an integer >= 1, got '512'"),
        ({"path": MOONCAKE, "start": -1}, "start must be a number of seconds >= 0, got -1"),
        ({"path": MOONCAKE, "limit": 0}, "limit must be an integer >= 1, got 0"),
        ({"path": MOONCAKE, "ignore_eos": "no"}, "ignore_eos must be True or False, got 'no'"),
        ({"path": MOONCAKE, "tokenizer": 5}, "tokenizer must be"),
        ({"path": MOONCAKE, "time_scale": 2}, "workload 'trace': "),
    ],
)  # fmt: skip
def test_bad_parameters_are_usage_errors_that_name_them(params: dict, message: str) -> None:
    with pytest.raises(LlmPerfUsageError) as info:
        build_workload("trace", **params)
    assert str(info.value).startswith(message)


def test_a_bad_row_stops_the_workload_with_its_line(tmp_path: Path) -> None:
    path = jsonl(tmp_path, [row(10), {"timestamp": 1, "input_length": "abc", "output_length": 2}])
    with pytest.raises(LlmPerfUsageError) as info:
        build_workload("trace", path=path)
    assert str(info.value) == (
        f"trace {path} line 2: input_length must be an integer >= 1, got 'abc'"
    )
