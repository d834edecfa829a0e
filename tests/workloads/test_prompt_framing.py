"""A requested input length is what the server counts: chat template and BOS included."""

from __future__ import annotations

import pickle
from pathlib import Path

import pytest
from tokenize_server import ReferenceCounter

from pytest_llmperf.workloads import build_workload
from pytest_llmperf.workloads.hf_tokenizer import load_hf_tokenizer

WORKLOADS = [
    ("synthetic", {"input_tokens": (40, 300)}),
    ("synthetic-uniform", {}),
    ("synthetic-skewed", {"input_tokens": {"cap": 1500}}),
    ("synthetic-skewed", {"class_mix": {"short": 1, "long": 1}}),
    ("shared-prefix", {"prefix_tokens": (64, 200)}),
    ("long-context", {"context_tokens": [300, 1000, 2500], "question_tokens": 40}),
    ("conversation", {}),
]


@pytest.fixture(params=["llama", "chatml"])
def folder(request: pytest.FixtureRequest) -> Path:
    return request.getfixturevalue(f"{request.param}_dir")


@pytest.mark.parametrize("api", ["chat", "completions"])
@pytest.mark.parametrize(
    ("name", "params"), WORKLOADS, ids=[f"{n}-{i}" for i, (n, _) in enumerate(WORKLOADS)]
)
def test_the_server_counts_exactly_the_requested_input(
    folder: Path, api: str, name: str, params: dict
) -> None:
    tok = load_hf_tokenizer(folder).for_api(api)
    server = ReferenceCounter(folder)
    workload = build_workload(name, seed=11, tokenizer=tok, **params)
    for i in range(120):
        s = workload.sample(i)
        assert server.prompt_tokens(s, api) == s.input_tokens, (name, i, s.category)


def test_synthetic_input_tokens_stay_the_requested_total(llama_dir: Path) -> None:
    chat = load_hf_tokenizer(llama_dir).for_api("chat")
    plain = build_workload("synthetic", input_tokens=200, tokenizer=load_hf_tokenizer(llama_dir))
    framed = build_workload("synthetic", input_tokens=200, tokenizer=chat)
    overhead = chat.framing(("user",))
    assert overhead > 5  # BOS, role headers, end of turn, the assistant's header
    s = framed.sample(3)
    assert s.input_tokens == 200 == plain.sample(3).input_tokens
    assert chat.count(s.prompt) == 200 - overhead
    assert framed.describe()["prompt_overhead_tokens"] == overhead
    assert "short_prompts" not in framed.describe()


def test_completions_add_bos_only_when_the_tokenizer_does(
    llama_dir: Path, chatml_dir: Path
) -> None:
    assert load_hf_tokenizer(llama_dir).for_api("completions").framing() == 1
    assert load_hf_tokenizer(chatml_dir).for_api("completions").framing() == 0
    assert load_hf_tokenizer(llama_dir).framing() == 0  # bound to no API: nothing added


def test_requests_below_the_overhead_get_a_minimal_prompt_and_say_so(llama_dir: Path) -> None:
    chat = load_hf_tokenizer(llama_dir).for_api("chat")
    overhead = chat.framing(("user",))
    w = build_workload("synthetic", input_tokens=(1, overhead + 4), tokenizer=chat)
    small = [w.sample(i) for i in range(200)]
    tiny = [s for s in small if s.input_tokens <= overhead]
    assert tiny, "the draw never fell under the overhead"
    for s in tiny:
        assert chat.count(s.prompt) == 1
    described = w.describe()
    assert f"fewer than {overhead + 1} input tokens" in described["short_prompts"]
    assert chat.label.endswith(f"chat template: +{overhead} tokens per user message")


def test_a_template_with_a_system_turn_costs_more(llama_dir: Path) -> None:
    chat = load_hf_tokenizer(llama_dir).for_api("chat")
    assert chat.framing(("system", "user")) > chat.framing(("user",)) > 0


def test_the_approximation_adds_nothing_and_keeps_its_windows() -> None:
    from pytest_llmperf.tokens import count_tokens

    w = build_workload("synthetic", input_tokens=50)
    assert count_tokens(w.sample(0).prompt) == 50 and "prompt_overhead_tokens" not in w.describe()


def test_a_framed_workload_pickles_and_samples_the_same(llama_dir: Path) -> None:
    chat = load_hf_tokenizer(llama_dir).for_api("chat")
    w = build_workload("shared-prefix", seed=4, tokenizer=chat, prefix_tokens=(64, 128))
    again = pickle.loads(pickle.dumps(w))
    assert [again.sample(i) for i in range(30)] == [w.sample(i) for i in range(30)]
    assert again.describe() == w.describe()
