"""A model's own tokenizer from local files: ``tokenizer.json`` (+ ``tokenizer_config.json``).

The fast-tokenizer file is what vLLM, SGLang and TGI load, so counting with it
(through the ``tokenizers`` library, an optional extra) counts what the server
counts. ``tokenizer_config.json`` brings the chat template and the special
tokens it uses (BOS included), which :mod:`.chat_template` renders so the
template's tokens can be taken out of a chat prompt's budget. Nothing here
touches the network: a path is a path.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from functools import lru_cache
from pathlib import Path
from typing import Any

from pytest_llmperf.errors import LlmPerfUsageError
from pytest_llmperf.workloads.chat_template import (
    TemplateError,
    find_chat_template,
    render_chat,
    special_tokens,
)
from pytest_llmperf.workloads.exact import ExactTokenizer

__all__ = [
    "TOKENIZERS_MISSING",
    "HuggingFaceTokenizer",
    "load_hf_tokenizer",
    "looks_like_path",
    "tokenizer_file",
]

TOKENIZERS_MISSING = "needs the 'tokenizers' package (pip install 'pytest-llmperf[tokenizers]')"


def looks_like_path(text: str) -> bool:
    """Whether a tokenizer name is meant as a path (or Hub repo id) rather than an encoding name."""
    return (
        "/" in text
        or "\\" in text
        or text.endswith(".json")
        or text.startswith(("~", "."))
        or Path(text).expanduser().exists()
    )


def tokenizer_file(path: str | Path) -> Path | None:
    """``path``'s ``tokenizer.json``: the file itself, or the one in a folder (None: neither)."""
    p = Path(path).expanduser()
    if p.is_dir():
        p = p / "tokenizer.json"
    return p if p.is_file() and p.suffix == ".json" else None


class HuggingFaceTokenizer(ExactTokenizer):
    """Counts with a ``tokenizers.Tokenizer``; renders the chat template from its config."""

    name = "huggingface"

    def __init__(
        self,
        backend: Any,
        source: str,
        *,
        chat_template: str | None = None,
        tokens: Mapping[str, str] | None = None,
    ) -> None:
        super().__init__()
        self._backend = backend  # tokenizers.Tokenizer: pickles (as its JSON)
        self.source = source
        self.chat_template = chat_template
        self.tokens = dict(tokens or {})

    def _describe(self) -> str:
        return f"Hugging Face tokenizer {self.source} (vocabulary {self._backend.get_vocab_size()})"

    def _token_strings(self, text: str) -> list[str]:
        return list(self._backend.encode(text, add_special_tokens=False).tokens)

    def _count_many(self, texts: Sequence[str]) -> list[int]:
        encoded = self._backend.encode_batch(list(texts), add_special_tokens=False)
        return [len(e.ids) for e in encoded]

    def _special_count(self) -> int:
        with_special = self._backend.encode("Hello", add_special_tokens=True)
        return len(with_special.ids) - len(self.encode("Hello"))

    def _chat_count(self, messages: Sequence[Mapping[str, str]]) -> int | None:
        if not self.chat_template:
            return None
        try:
            text = render_chat(self.chat_template, messages, tokens=self.tokens)
        except TemplateError:
            return None
        # As vLLM: the rendered template carries its own BOS; no special tokens added on top.
        return len(self._backend.encode(text, add_special_tokens=False).ids)

    def encode(self, text: str) -> list[int]:
        """Token ids of ``text`` without special tokens (for checks and tests)."""
        return list(self._backend.encode(text, add_special_tokens=False).ids)


def load_hf_tokenizer(path: str | Path) -> HuggingFaceTokenizer:
    """The tokenizer at ``path`` (a model folder or a ``tokenizer.json``); usage errors say why."""
    file = tokenizer_file(path)
    if file is None:
        raise LlmPerfUsageError(
            f"{str(path)!r} is neither a tokenizer.json file nor a folder holding one"
        )
    # absolute, not resolved: a hub-cache snapshot's files are symlinks into blobs/, and
    # tokenizer_config.json is looked up beside the link
    return _load(str(file.absolute()))


@lru_cache(maxsize=8)
def _load(file: str) -> HuggingFaceTokenizer:
    try:
        from tokenizers import Tokenizer
    except ImportError:
        raise LlmPerfUsageError(f"tokenizer {file}: {TOKENIZERS_MISSING}") from None
    try:
        backend = Tokenizer.from_file(file)
    except Exception as exc:  # a corrupt or foreign JSON file: say which and why
        raise LlmPerfUsageError(f"cannot load tokenizer {file}: {exc}") from None
    folder = Path(file).parent
    config: dict[str, Any] = {}
    config_file = folder / "tokenizer_config.json"
    if config_file.is_file():
        try:
            loaded = json.loads(config_file.read_text("utf-8"))
        except ValueError as exc:
            raise LlmPerfUsageError(f"{config_file} is not JSON: {exc}") from None
        config = loaded if isinstance(loaded, dict) else {}
    return HuggingFaceTokenizer(
        backend,
        str(folder if config_file.is_file() else file),
        chat_template=find_chat_template(folder, config),
        tokens=special_tokens(config),
    )
