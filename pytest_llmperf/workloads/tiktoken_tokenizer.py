"""A tiktoken encoding (``cl100k_base``, ``o200k_base``, ...), only if it is cached locally.

``tiktoken.get_encoding`` downloads an encoding's ranks file on first use;
nothing may download at run time, so loading goes through
:func:`load_offline`, which lets tiktoken read its cache and refuses the
download. A name tiktoken does not know is a usage error; a known one that
is not cached is reported as unavailable (the caller decides what follows).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from pytest_llmperf.errors import LlmPerfUsageError
from pytest_llmperf.workloads.exact import ExactTokenizer

if TYPE_CHECKING:
    from tiktoken import Encoding

__all__ = ["TiktokenTokenizer", "TiktokenUnavailable", "load_offline", "tiktoken_names"]

_guard = threading.Lock()


class TiktokenUnavailable(RuntimeError):
    """tiktoken is missing, or the encoding is not cached on this machine."""


class TiktokenTokenizer(ExactTokenizer):
    """A tiktoken encoding; windows are exact by it. It carries no chat template."""

    name = "tiktoken"

    def __init__(self, encoding: Encoding, name: str) -> None:
        super().__init__()
        self._encoding = encoding
        self.encoding_name = name

    def _describe(self) -> str:
        return f"tiktoken {self.encoding_name} (vocabulary {self._encoding.n_vocab})"

    def _count_many(self, texts: Sequence[str]) -> list[int]:
        return [len(ids) for ids in self._encoding.encode_ordinary_batch(list(texts))]

    def _token_strings(self, text: str) -> list[str]:
        pieces = self._encoding.decode_tokens_bytes(self._encoding.encode_ordinary(text))
        return [p.decode("utf-8", "backslashreplace") for p in pieces]

    def __getstate__(self) -> dict[str, Any]:
        state = super().__getstate__()
        state.pop("_encoding", None)  # reloaded from the local cache by name
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        super().__setstate__(state)
        self._encoding = load_offline(self.encoding_name)


def tiktoken_names() -> list[str] | None:
    """The encoding names tiktoken knows (None: tiktoken is not installed)."""
    try:
        import tiktoken
    except ImportError:
        return None
    return list(tiktoken.list_encoding_names())


@contextmanager
def _no_download() -> Iterator[None]:
    """tiktoken may read its cache but not fetch: its one network call is replaced."""
    import tiktoken.load as tl

    def refuse(blobpath: str) -> bytes:
        raise TiktokenUnavailable(f"not in the local tiktoken cache ({blobpath})")

    with _guard:
        original = tl.read_file
        tl.read_file = refuse
        try:
            yield
        finally:
            tl.read_file = original


def load_offline(name: str) -> Encoding:
    """The tiktoken ``Encoding`` named ``name`` from the local cache, never downloaded."""
    names = tiktoken_names()
    if names is None:
        raise TiktokenUnavailable("tiktoken is not installed")
    if name not in names:
        raise LlmPerfUsageError(f"tokenizer {name!r} is not a tiktoken encoding name")
    import tiktoken

    with _no_download():
        try:
            return tiktoken.get_encoding(name)
        except TiktokenUnavailable:
            raise
        except Exception as exc:  # a broken cache file and the like
            raise TiktokenUnavailable(f"{type(exc).__name__}: {exc}") from None
