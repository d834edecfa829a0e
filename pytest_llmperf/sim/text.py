"""The output's filler words: moved to :mod:`pytest_llmperf.apis.filler_text` (each
format frames them in its own chunks); the names stay importable from here."""

from __future__ import annotations

from ..apis.filler_text import WORDS, WORDS_JSON, token_index, token_text

__all__ = ["WORDS", "WORDS_JSON", "token_index", "token_text"]
