"""``inputs_per_request=K``: an embeddings sample's ``inputs`` are K texts of the
workload's lengths, distinct, counted by the workload's own tokenizer."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from pytest_llmperf.errors import LlmPerfUsageError
from pytest_llmperf.tokens import count_tokens
from pytest_llmperf.workloads import build_workload
from pytest_llmperf.workloads.hf_tokenizer import load_hf_tokenizer
from pytest_llmperf.workloads.skewed import SKEWED_INPUT
from pytest_llmperf.workloads.tokenizer import bind_api


def test_k_inputs_of_the_fixed_length_and_their_total() -> None:
    w = build_workload("synthetic", seed=4, input_tokens=32, inputs_per_request=8)
    for index in range(20):
        s = w.sample(index)
        assert len(s.inputs) == 8 and len(set(s.inputs)) == 8
        assert [count_tokens(t) for t in s.inputs] == [32] * 8
        assert s.input_tokens == 256 and s.prompt == s.inputs[0]
        assert s.images == ()


def test_a_range_draws_each_input_its_own_length() -> None:
    w = build_workload("synthetic", seed=1, input_tokens=(16, 64), inputs_per_request=5)
    lengths = []
    for index in range(30):
        s = w.sample(index)
        counts = [count_tokens(t) for t in s.inputs]
        assert all(16 <= c <= 64 for c in counts)
        assert s.input_tokens == sum(counts)
        lengths.extend(counts)
    assert len(set(lengths)) > 20  # drawn per input, not one length per request


def test_unset_leaves_the_sample_as_it_was_and_one_input_is_the_prompt() -> None:
    plain = build_workload("synthetic-uniform", seed=6)
    one = build_workload("synthetic-uniform", seed=6, inputs_per_request=1)
    many = build_workload("synthetic-uniform", seed=6, inputs_per_request=4)
    for index in range(10):
        p, o, m = plain.sample(index), one.sample(index), many.sample(index)
        assert p.inputs == ()
        assert o.inputs == (p.prompt,) and o.input_tokens == p.input_tokens
        # the first input, the output length: the same draws as without the parameter
        assert m.inputs[0] == p.prompt and m.max_tokens == p.max_tokens
        assert m.input_tokens == sum(count_tokens(t) for t in m.inputs)


def test_deterministic_per_seed_and_index_distinct_across_requests() -> None:
    a = build_workload("synthetic", seed=9, input_tokens=24, inputs_per_request=6)
    b = build_workload("synthetic", seed=9, input_tokens=24, inputs_per_request=6)
    c = build_workload("synthetic", seed=10, input_tokens=24, inputs_per_request=6)
    assert [a.sample(i).inputs for i in range(5)] == [
        b.sample(i).inputs for i in reversed(range(5))
    ][::-1]
    assert a.sample(0).inputs != a.sample(1).inputs
    assert a.sample(0).inputs != c.sample(0).inputs


def test_many_inputs_stay_distinct() -> None:
    s = build_workload("synthetic", input_tokens=8, inputs_per_request=200).sample(0)
    assert len(set(s.inputs)) == 200


def test_describe_says_how_many_inputs() -> None:
    w = build_workload("synthetic", input_tokens=16, inputs_per_request=8)
    d = w.describe()
    assert d["inputs_per_request"] == 8 and d["input_tokens"] == [16, 16]
    assert "inputs_per_request" not in build_workload("synthetic").describe()


def test_synthetic_skewed_takes_inputs_per_request() -> None:
    w = build_workload("synthetic-skewed", seed=2, inputs_per_request=4)
    for index in range(20):
        s = w.sample(index)
        counts = [count_tokens(t) for t in s.inputs]
        assert len(counts) == 4 and len(set(s.inputs)) == 4
        assert all(SKEWED_INPUT.floor <= c <= SKEWED_INPUT.cap for c in counts)
        assert s.input_tokens == sum(counts)
    mixed = build_workload(
        "synthetic-skewed", seed=2, inputs_per_request=3, class_mix={"short": 1.0}
    )
    for index in range(10):
        s = mixed.sample(index)
        assert s.category == "short"
        assert all(64 <= count_tokens(t) <= 256 for t in s.inputs)
    assert w.describe()["inputs_per_request"] == 4


@pytest.mark.parametrize("bad", [0, -3, "8", True, 2.5, [8]])
@pytest.mark.parametrize("name", ["synthetic", "synthetic-uniform", "synthetic-skewed"])
def test_bad_values_are_usage_errors_naming_the_value(name: str, bad: Any) -> None:
    with pytest.raises(LlmPerfUsageError) as caught:
        build_workload(name, inputs_per_request=bad)
    assert str(caught.value) == f"inputs_per_request must be an integer >= 1, got {bad!r}"


def test_inputs_and_images_do_not_go_together() -> None:
    with pytest.raises(LlmPerfUsageError) as caught:
        build_workload("synthetic", inputs_per_request=4, images=1)
    assert "inputs_per_request=4" in str(caught.value) and "images=1" in str(caught.value)


def test_lengths_by_the_workloads_own_tokenizer(llama_dir: Path) -> None:
    """Each input is what the model's tokenizer counts: an exact tokenizer, bound to
    the embeddings API as the session binds it."""
    tok = bind_api(load_hf_tokenizer(llama_dir), "embeddings")
    w = build_workload(
        "synthetic", seed=3, input_tokens=(20, 90), inputs_per_request=6, tokenizer=tok
    )
    for index in range(8):
        s = w.sample(index)
        counts = tok.count_many(s.inputs)  # type: ignore[attr-defined]
        # what the server counts per input: its text and the special tokens (BOS) around it
        special = tok.framing()  # type: ignore[attr-defined]
        assert special == 1  # the tier's Llama tokenizer adds BOS
        assert len(counts) == 6 and len(set(s.inputs)) == 6
        assert all(20 <= c + special <= 90 for c in counts)
        assert s.input_tokens == sum(counts) + 6 * special
        assert [count_tokens(t) for t in s.inputs] != counts  # not the approximation's cut
    assert w.describe()["tokenizer"] == tok.label
