"""The methodology's standard workloads: draft parameters, exact sizes, reproducibility."""

from __future__ import annotations

import json
import math
import statistics
from collections import Counter
from pathlib import Path

import pytest

from pytest_llmperf.errors import LlmPerfUsageError
from pytest_llmperf.tokens import count_tokens
from pytest_llmperf.workloads import build_workload
from pytest_llmperf.workloads.shared_prefix import zipf_weights
from pytest_llmperf.workloads.tokenizer import resolve_tokenizer

ALL = ["synthetic-skewed", "conversation", "shared-prefix", "code-completion", "long-context"]
SMALL = {"long-context": {"context_tokens": [300, 600]}}


@pytest.mark.parametrize("name", ALL)
def test_same_seed_same_samples_and_describe_states_seed_and_tokenizer(name: str) -> None:
    params = SMALL.get(name, {})
    a, b = build_workload(name, seed=11, **params), build_workload(name, seed=11, **params)
    assert [a.sample(i) for i in range(30)] == [b.sample(i) for i in reversed(range(30))][::-1]
    other = build_workload(name, seed=12, **params)
    assert [a.sample(i) for i in range(30)] != [other.sample(i) for i in range(30)]
    described = a.describe()
    assert described["seed"] == 11 and described["name"] == name
    assert described["tokenizer"].startswith("approximate")


def test_skewed_matches_the_draft_lognormal_floors_and_caps() -> None:
    w = build_workload("synthetic-skewed", seed=42)
    samples = [w.sample(i) for i in range(4000)]
    ins = [s.input_tokens for s in samples]
    outs = [s.max_tokens for s in samples]
    assert min(ins) >= 32 and max(ins) <= 4096 and min(outs) >= 16 and max(outs) <= 2048
    assert Counter(ins)[32] > 0 and Counter(ins)[4096] > 0  # floor and cap both bind
    # Draft: input median ~245 (exp 5.5), mean ~405; output median exp(4.5) ~ 90.
    assert statistics.median(ins) == pytest.approx(math.exp(5.5), rel=0.08)
    assert statistics.mean(ins) == pytest.approx(405, rel=0.1)
    assert statistics.median(outs) == pytest.approx(math.exp(4.5), rel=0.1)
    assert all(count_tokens(s.prompt) == s.input_tokens for s in samples[:200])
    labels = {s.category for s in samples}
    assert labels == {"short", "medium", "long"}
    assert all((s.input_tokens < 256) == (s.category == "short") for s in samples)


def test_skewed_overrides_and_class_mix() -> None:
    w = build_workload("synthetic-skewed", input_tokens={"cap": 1000}, output_tokens={"floor": 40})
    samples = [w.sample(i) for i in range(500)]
    assert max(s.input_tokens for s in samples) == 1000
    assert min(s.max_tokens for s in samples) == 40
    mixed = build_workload("synthetic-skewed", seed=3, class_mix={"short": 0.8, "long": 0.2})
    samples = [mixed.sample(i) for i in range(2000)]
    share = sum(s.category == "short" for s in samples) / len(samples)
    assert share == pytest.approx(0.8, abs=0.03)
    for s in samples:
        low, high = ((64, 256), (32, 128)) if s.category == "short" else ((1024, 4096), (256, 1024))
        assert low[0] <= s.input_tokens <= low[1] and high[0] <= s.max_tokens <= high[1]
    assert mixed.describe()["class_mix"] == {"short": 0.8, "long": 0.2}


@pytest.mark.parametrize(
    ("params", "word"),
    [
        ({"class_mix": {"huge": 1}}, "huge"),
        ({"class_mix": {"short": -1}}, "short"),
        ({"input_tokens": {"median": 3}}, "median"),
        ({"input_tokens": {"floor": 500, "cap": 100}}, "floor"),
        ({"classes": {"x": {"input_tokens": 5}}}, "x"),
        ({"ignore_eos": "no"}, "ignore_eos"),
        ({"tokenizer": 5}, "tokenizer"),
    ],
)
def test_skewed_bad_parameters_are_usage_errors(params: dict, word: str) -> None:
    with pytest.raises(LlmPerfUsageError, match=word):
        build_workload("synthetic-skewed", **params)


def test_ignore_eos_false_reaches_the_request_body() -> None:
    for name in ["synthetic-uniform", *ALL]:
        sample = build_workload(name, ignore_eos=False, **SMALL.get(name, {})).sample(0)
        assert sample.extra_body == {"ignore_eos": False}
        assert build_workload(name, **SMALL.get(name, {})).sample(0).extra_body == {}


def test_conversation_bundled_sample_replays_answered_turns() -> None:
    w = build_workload("conversation", seed=1)
    assert w.size == 28 and "bundled sample" in w.describe()["source"]
    samples = [w.sample(i) for i in range(w.size)]
    assert len({(s.prompt, len(s.history)) for s in samples}) == w.size  # one pass = each once
    with_system = [s for s in samples if s.category == "system-prompt"]
    assert 0.25 < len(with_system) / len(samples) < 0.75
    system_texts = {s.history[0]["content"] for s in with_system}
    assert len(system_texts) == 1 and count_tokens(system_texts.pop()) == 200
    for s in samples:
        roles = [turn["role"] for turn in s.history if turn["role"] != "system"]
        assert roles == ["user", "assistant"] * (len(roles) // 2)
        expected = sum(count_tokens(t["content"]) for t in s.history) + count_tokens(s.prompt)
        assert s.input_tokens == expected and s.max_tokens >= 1
    assert w.sample(w.size).prompt in {s.prompt for s in samples}  # wraps around


def test_conversation_reads_sharegpt_json_and_openai_jsonl(tmp_path: Path) -> None:
    sharegpt = tmp_path / "s.json"
    sharegpt.write_text(
        json.dumps(
            [
                {
                    "conversations": [
                        {"from": "human", "value": "Hi there, how are you?"},
                        {"from": "gpt", "value": "Fine, thank you very much indeed."},
                        {"from": "human", "value": "Unanswered."},
                    ]
                }
            ]
        )
    )
    w = build_workload("conversation", path=str(sharegpt), system_prompt_tokens=0)
    assert w.size == 1
    s = w.sample(0)
    assert s.prompt == "Hi there, how are you?" and s.history == ()
    assert s.max_tokens == count_tokens("Fine, thank you very much indeed.")
    jsonl = tmp_path / "m.jsonl"
    rows = [
        {
            "messages": [
                {"role": "user", "content": "a " * 50},
                {"role": "assistant", "content": "b"},
            ]
        },
        {
            "messages": [
                {"role": "user", "content": "short"},
                {"role": "assistant", "content": "ok"},
            ]
        },
    ]
    jsonl.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    w = build_workload("conversation", path=jsonl, max_input_tokens=10, max_output_tokens=5)
    assert w.size == 1 and w.describe()["skipped_turns"] == 1
    assert w.sample(0).prompt == "short"


@pytest.mark.parametrize(
    ("content", "word"),
    [
        (None, "cannot read"),
        ("{not json", "not JSON"),
        ('{"foo": 1}\n', "conversations"),
        ('{"conversations": [{"from": "human", "value": "x"}]}\n', "no human turn answered"),
    ],
)
def test_conversation_bad_files_are_usage_errors(tmp_path: Path, content: str | None, word: str):
    path = tmp_path / "bad.jsonl"
    if content is not None:
        path.write_text(content)
    with pytest.raises(LlmPerfUsageError, match=word) as info:
        build_workload("conversation", path=str(path))
    assert "bad.jsonl" in str(info.value)


def test_shared_prefix_zipf_choice_and_sharing_fraction() -> None:
    w = build_workload("shared-prefix", seed=5, n_prefixes=5, sharing_fraction=0.6, zipf_s=1.5)
    n = 6000
    chosen = Counter(w.prefix_of(i) for i in range(n))
    assert chosen[None] / n == pytest.approx(0.4, abs=0.02)
    weights = zipf_weights(5, 1.5)
    for k in range(5):
        assert chosen[k] / n == pytest.approx(0.6 * weights[k], abs=0.02)
    for i in range(50):
        s = w.sample(i)
        prefix_id = w.prefix_of(i)
        assert s.category == ("unique" if prefix_id is None else "shared")
        if prefix_id is not None:
            assert s.prompt.startswith(w.prefixes[prefix_id])
            assert 512 <= count_tokens(w.prefixes[prefix_id]) <= 1024
        assert count_tokens(s.prompt) == s.input_tokens
        assert 16 <= s.max_tokens <= 2048
    assert build_workload("code-completion", seed=5).describe()["prefix_choice"] == "Zipf s=1.5"
    with pytest.raises(LlmPerfUsageError, match="zipf_s"):
        build_workload("shared-prefix", zipf_s=-1)
    with pytest.raises(LlmPerfUsageError, match="sharing_fraction"):
        build_workload("shared-prefix", sharing_fraction=1.5)


def test_long_context_hits_each_target_length_exactly() -> None:
    w = build_workload("long-context", context_tokens=[256, 1024, 3000], question_tokens=100)
    samples = [w.sample(i) for i in range(60)]
    assert {s.category for s in samples} == {"256", "1024", "3000"}
    for s in samples:
        assert s.input_tokens == int(s.category) == count_tokens(s.prompt)
        assert s.max_tokens == 256 and s.prompt.startswith("Document:")
        assert "Question:" in s.prompt
    assert build_workload("long-context").describe()["context_tokens"][-1] == 131072
    with pytest.raises(LlmPerfUsageError, match="no room"):
        build_workload("long-context", context_tokens=50)


def test_tokenizer_falls_back_to_the_approximation_and_says_why() -> None:
    try:
        import tiktoken  # noqa: F401
    except ImportError:
        label = resolve_tokenizer("cl100k_base").label
        assert label.startswith("approximate") and "tiktoken is missing" in label
    else:  # pragma: no cover - depends on the environment
        pytest.skip("tiktoken installed: the fallback path is not reachable")
