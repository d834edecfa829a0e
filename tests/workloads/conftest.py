"""Tokenizers trained here (no download) and a /tokenize server for the tokenizer tests."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("tokenizers", reason="the tokenizers extra is not installed")

from tiny_tokenizer import build_tokenizer
from tokenize_server import TokenizeServer


@pytest.fixture(scope="session")
def llama_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Llama-3 style: BOS added to completions prompts, a template that writes its own BOS.

    A small vocabulary, so most words are several tokens and a word alone
    ("harbour") tokenizes differently from the word after a space.
    """
    return build_tokenizer(tmp_path_factory.mktemp("llama-tok"), vocab=400)


@pytest.fixture(scope="session")
def chatml_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Qwen style: no BOS anywhere, a ChatML template."""
    return build_tokenizer(
        tmp_path_factory.mktemp("chatml-tok"), vocab=1200, chatml=True, bos=False
    )


@pytest.fixture
def tokenize_server(llama_dir: Path) -> Iterator[TokenizeServer]:
    """The Llama-style tokenizer behind /tokenize, /detokenize and /v1/models (no root)."""
    with TokenizeServer(llama_dir) as server:
        yield server
