import pytest

from pytest_llmperf.tokens import count_tokens
from pytest_llmperf.workloads import build_workload
from pytest_llmperf.workloads.corpus import Corpus


def test_samples_are_a_pure_function_of_seed_and_index() -> None:
    w = build_workload("synthetic-uniform", seed=5)
    assert w.sample(17) == w.sample(17) == build_workload("synthetic-uniform", seed=5).sample(17)
    assert w.sample(17) != build_workload("synthetic-uniform", seed=6).sample(17)


def test_prompt_sizes_follow_the_requested_lengths() -> None:
    w = build_workload("synthetic-uniform", seed=1)
    for i in range(200):
        s = w.sample(i)
        assert 128 <= s.input_tokens <= 512 and 64 <= s.max_tokens <= 256
        assert count_tokens(s.prompt) == s.input_tokens


def test_fixed_lengths_and_long_prompts_wrap_the_corpus() -> None:
    w = build_workload("synthetic", input_tokens=5000, output_tokens=7)
    s = w.sample(0)
    assert s.input_tokens == 5000 and count_tokens(s.prompt) == 5000 and s.max_tokens == 7


def test_corpus_window_keeps_text_and_exact_counts() -> None:
    c = Corpus("Hello, world. Boats sail.")
    assert len(c) == 7
    assert c.window(0, 3) == "Hello, world"
    assert count_tokens(c.window(5, 4)) == 4


def test_describe_states_parameters_seed_and_tokenizer() -> None:
    d = build_workload("synthetic", seed=9, input_tokens=(10, 20)).describe()
    assert d["seed"] == 9 and d["input_tokens"] == [10, 20] and "tokenizer" in d


@pytest.mark.parametrize("bad", [0, -3, (0, 4), (1, 2, 3), 2.5, True])
def test_bad_lengths(bad) -> None:
    from pytest_llmperf.errors import LlmPerfUsageError

    with pytest.raises(LlmPerfUsageError):
        build_workload("synthetic", input_tokens=bad)
