"""Windows cut by a model's tokenizer hold exactly the requested tokens, by that tokenizer."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytest

from pytest_llmperf.workloads import exact
from pytest_llmperf.workloads.corpus import Corpus, default_corpus
from pytest_llmperf.workloads.hf_tokenizer import HuggingFaceTokenizer, load_hf_tokenizer
from pytest_llmperf.workloads.long_context import QUESTION
from pytest_llmperf.workloads.segments import SegmentTable

LENGTHS = [1, 2, 3, 5, 8, 13, 32, 100, 128, 257, 512, 1000, 3000, 9000]


@pytest.fixture
def tok(llama_dir: Path) -> HuggingFaceTokenizer:
    return load_hf_tokenizer(llama_dir)


def test_the_word_alone_is_not_the_word_after_a_space(tok: HuggingFaceTokenizer) -> None:
    """The premise of the hard case: this vocabulary splits a bare word differently."""
    words = set(default_corpus().text.split())
    assert sum(tok.count(w) != tok.count(" " + w) for w in words) > len(words) // 10
    assert tok.count("harbour") != tok.count(" harbour")


@pytest.mark.parametrize("n", LENGTHS)
def test_windows_encode_to_exactly_n_tokens(tok: HuggingFaceTokenizer, n: int) -> None:
    corpus = default_corpus()
    for start in range(0, len(corpus), 61):
        text = tok.window(corpus, start, n)
        assert len(tok.encode(text)) == n, (start, n, text[:80])
        assert text == text.strip() and text[0].isalpha()


def test_the_table_alone_is_exact_without_re_encoding(
    tok: HuggingFaceTokenizer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Long windows (and every window of the ``server`` tokenizer) rest on the arithmetic."""
    monkeypatch.setattr(exact, "VERIFY_MAX_TOKENS", 0)
    calls: list[int] = []
    real = tok._count_many

    def counting(texts: Sequence[str]) -> list[int]:
        calls.append(len(texts))
        return real(texts)

    monkeypatch.setattr(tok, "_count_many", counting)
    corpus = Corpus(default_corpus().text + " Fresh words appear here.")
    tok.table(corpus)
    built = len(calls)
    windows = [(n, s, tok.window(corpus, s, n)) for n in LENGTHS for s in range(0, 700, 97)]
    assert len(calls) == built, "cutting a window called the tokenizer"
    for n, start, text in windows:
        assert len(tok.encode(text)) == n, (start, n)


def test_long_windows_wrap_around_the_corpus(tok: HuggingFaceTokenizer) -> None:
    corpus = default_corpus()
    period = tok.table(corpus).period
    text = tok.window(corpus, 5, 3 * period + 17)
    assert len(tok.encode(text)) == 3 * period + 17
    assert text.count("The harbour town woke") >= 2


def test_windows_from_a_short_corpus_and_the_question(tok: HuggingFaceTokenizer) -> None:
    for n in (5, 40, 100, 250):
        assert len(tok.encode(tok.window(QUESTION, 0, n))) == n


def test_segment_table_arithmetic_on_a_toy_count() -> None:
    """One token per letter: a window of n is n letters, spaces free but first-word bare."""

    def letters(texts: Sequence[str]) -> list[int]:
        return [sum(c.isalpha() for c in t) + t.startswith(" ") for t in texts]

    table = SegmentTable.measure("ab cde f gh", letters)
    # " ab"=3 " cde"=4 " f"=2 " gh"=3 in context; bare "ab"=2 ...
    assert table.period == 12
    assert next(table.candidates(0, 2)) == "ab"
    assert next(table.candidates(0, 6)) == "ab cde"
    assert next(table.candidates(1, 5)) == "cde f"
    assert next(table.candidates(1, 6)) == "ab cde"  # no boundary 6 on from "cde": next start
    assert next(table.candidates(0, 2 + 12)) == "ab cde f gh ab"
    assert list(table.candidates(0, 0)) == []


def test_tiktoken_windows_are_exact_when_the_encoding_is_cached() -> None:
    from pytest_llmperf.workloads.tiktoken_tokenizer import TiktokenUnavailable, load_offline

    pytest.importorskip("tiktoken")
    try:
        encoding = load_offline("cl100k_base")
    except TiktokenUnavailable as exc:
        pytest.skip(f"cl100k_base not cached on this machine: {exc}")
    from pytest_llmperf.workloads.tokenizer import TiktokenTokenizer

    tok = TiktokenTokenizer(encoding, "cl100k_base")
    for n in (1, 7, 64, 500, 5000):
        assert len(encoding.encode_ordinary(tok.window(default_corpus(), 17 * n, n))) == n
