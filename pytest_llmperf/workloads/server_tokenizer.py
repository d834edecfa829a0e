"""``--llm-tokenizer=server``: the server counts, through vLLM's ``/tokenize``.

vLLM (and SGLang's compatible route) serves, at the root beside ``/v1``:

- ``POST /tokenize`` with ``{"model", "prompt", "add_special_tokens"}`` or
  ``{"model", "messages", "add_generation_prompt"}`` (chat template applied,
  ``add_special_tokens`` false by default) answering ``{"count", "tokens",
  "max_model_len"}`` (plus ``"token_strs"`` when asked with
  ``"return_token_strs": true``);
- ``POST /detokenize`` with ``{"model", "tokens"}`` answering ``{"prompt"}``.

Samples are built lazily on the load generator's hot path, where an HTTP call
per prompt is out of the question, so everything is measured once, at the
session's preflight: each corpus's segment table (one ``/tokenize`` of the
corpus with token strings, which gives every word's token count; else one call
per distinct word) and the framing of each message shape (one chat
``/tokenize``). Windows are then cut locally (:mod:`.segments`). Plain
``count()`` calls (a conversation file's turns, when its workload is built)
are cached, and the cache travels with the pickle to worker processes.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import httpx

from pytest_llmperf.errors import LlmPerfUsageError
from pytest_llmperf.workloads.corpus import Corpus, default_corpus
from pytest_llmperf.workloads.exact import ExactTokenizer
from pytest_llmperf.workloads.segments import SegmentTable, corpus_words, start_candidates

__all__ = [
    "ServerTokenizer",
    "TokenizeRouteError",
    "probe_tokenize",
    "require_tokenize",
    "server_root",
]

_WORD_MARKS = ("Ġ", "▁", " ")  # how token strings show a leading space (byte-level, metaspace, raw)
START_WORDS = 96  # distinct start words measured one by one (each an HTTP call)


class TokenizeRouteError(RuntimeError):
    """``/tokenize`` did not answer as vLLM's does (missing route, refusal, odd body)."""


def server_root(base_url: str) -> str:
    """The server root that ``/tokenize`` hangs from: ``base_url`` without its ``/v1``."""
    url = base_url.rstrip("/")
    return url[: -len("/v1")] if url.endswith("/v1") else url


class ServerTokenizer(ExactTokenizer):
    """Counts with the server's ``/tokenize``; cuts windows locally from calibrated tables."""

    name = "server"
    verifies = False  # counting is an HTTP call: windows rest on the calibrated tables
    start_limit = START_WORDS

    def __init__(
        self,
        root: str,
        model: str | None,
        *,
        headers: Mapping[str, str] | None = None,
        timeout: float = 30.0,
        label_url: str | None = None,
    ) -> None:
        super().__init__()
        self.root = root.rstrip("/")
        self.model = model
        self._headers = dict(headers or {})
        self._timeout = timeout
        self._label_url = label_url or self.root
        self._counts: dict[str, int] = {}
        self._client: httpx.Client | None = None
        self.window_error = 0  # largest |count - n| seen when the calibration was checked

    # -- HTTP ----------------------------------------------------------------------

    def _post(self, route: str, body: dict[str, Any]) -> dict[str, Any]:
        if self._client is None:
            from pytest_llmperf.tls import tls_verify  # SSL_CERT_FILE, as the client's

            self._client = httpx.Client(
                headers=self._headers, timeout=self._timeout, verify=tls_verify(), trust_env=False
            )
        if self.model:
            body = {"model": self.model, **body}
        try:
            response = self._client.post(f"{self.root}{route}", json=body)
        except httpx.HTTPError as exc:
            raise TokenizeRouteError(f"POST {route}: {type(exc).__name__}") from None
        if response.status_code != 200:
            raise TokenizeRouteError(f"POST {route} answered HTTP {response.status_code}")
        try:
            data = response.json()
        except ValueError:
            raise TokenizeRouteError(f"POST {route} answered non-JSON") from None
        if not isinstance(data, dict):
            raise TokenizeRouteError(f"POST {route} answered {type(data).__name__}, not an object")
        return data

    def tokenize(self, body: dict[str, Any]) -> dict[str, Any]:
        """One ``POST /tokenize``; its answer must carry ``count`` (an int) and ``tokens``."""
        data = self._post("/tokenize", body)
        if not isinstance(data.get("count"), int) or not isinstance(data.get("tokens"), list):
            raise TokenizeRouteError("POST /tokenize answered without count and tokens")
        return data

    def detokenize(self, tokens: Sequence[int]) -> str:
        """The text of token ids, by ``POST /detokenize``."""
        prompt = self._post("/detokenize", {"tokens": list(tokens)}).get("prompt")
        if not isinstance(prompt, str):
            raise TokenizeRouteError("POST /detokenize answered without a prompt")
        return prompt

    def close(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None

    # -- ExactTokenizer ----------------------------------------------------------------

    def _describe(self) -> str:
        # no URL: the label goes into the workload's description, which baselines compare
        text = f"the server's /tokenize (model {self.model})" if self.model else "server /tokenize"
        if self.window_error:
            text += f" (windows checked within ±{self.window_error} tokens)"
        return text

    def _count_many(self, texts: Sequence[str]) -> list[int]:
        out = []
        for text in texts:
            if text not in self._counts:
                body = {"prompt": text, "add_special_tokens": False}
                self._counts[text] = int(self.tokenize(body)["count"])
            out.append(self._counts[text])
        return out

    def _special_count(self) -> int:
        key = "\x00special"
        if key not in self._counts:
            probe = "Hello"
            with_special = self.tokenize({"prompt": probe, "add_special_tokens": True})["count"]
            self._counts[key] = int(with_special) - self.count(probe)
        return self._counts[key]

    def _chat_count(self, messages: Sequence[Mapping[str, str]]) -> int | None:
        body = {"messages": [dict(m) for m in messages], "add_generation_prompt": True}
        try:
            return int(self.tokenize(body)["count"])
        except TokenizeRouteError:
            return None  # no chat template on the server: no framing known

    def _measure(self, text: str) -> SegmentTable:
        words = corpus_words(" ".join(text.split()))
        spaced = self._spaced_from_token_strs(words)
        firsts = start_candidates(words, self.start_limit)
        bare = dict(zip(firsts, self._count_many(firsts), strict=True))
        if spaced is None:
            distinct = list(dict.fromkeys(words))
            counts = self._count_many([" " + w for w in distinct])
            return SegmentTable.build(text, dict(zip(distinct, counts, strict=True)), bare)
        return SegmentTable.build(text, spaced, bare)

    def _spaced_from_token_strs(self, words: list[str]) -> list[int] | None:
        """Every word's in-context token count from one ``/tokenize`` with token strings.

        The corpus is sent twice, each copy after a space, so every word is
        seen in the context a window gives it. A token whose string shows a
        leading space starts a word; tokens up to the next such one belong to
        it. When the strings do not line up with the words (a tokenizer with
        multi-word tokens, or a server without ``return_token_strs``), None.
        """
        cycle = " " + " ".join(words)
        try:
            data = self.tokenize(
                {"prompt": cycle + cycle, "add_special_tokens": False, "return_token_strs": True}
            )
        except TokenizeRouteError:
            return None
        strs = data.get("token_strs")
        if not isinstance(strs, list) or len(strs) != data["count"] or not strs:
            return None
        counts: list[int] = []
        for s in strs:
            if not isinstance(s, str):
                return None
            if s.startswith(_WORD_MARKS):
                counts.append(1)
            elif counts:
                counts[-1] += 1
            else:
                return None
        m = len(words)
        if len(counts) != 2 * m or counts[:m] != counts[m:]:
            return None
        return counts[:m]

    def calibrate(self, corpora: Sequence[Corpus] = ()) -> ServerTokenizer:
        """Measure the tables of ``corpora`` (the default corpus always) and check a few windows.

        After this, :meth:`window` on these corpora makes no HTTP call.
        """
        corpus = default_corpus()
        for c in (corpus, *corpora):
            self.table(c)
        worst = 0
        for k, n in enumerate((16, 100, 300)):
            text = self.window(corpus, 131 * k, n)
            worst = max(worst, abs(self.count(text) - n))
        self.window_error = worst
        return self

    # -- pickling ----------------------------------------------------------------------

    def __getstate__(self) -> dict[str, Any]:
        state = super().__getstate__()
        state["_client"] = None  # a live connection pool does not cross processes
        return state


def probe_tokenize(tokenizer: ServerTokenizer) -> None:
    """Raise :class:`TokenizeRouteError` unless ``/tokenize`` answers as vLLM's does."""
    tokenizer.tokenize({"prompt": "Hello", "add_special_tokens": False})


def require_tokenize(tokenizer: ServerTokenizer, where: str) -> None:
    """:func:`probe_tokenize` for an explicit ``server`` choice: a usage error if it fails."""
    try:
        probe_tokenize(tokenizer)
    except TokenizeRouteError as exc:
        raise LlmPerfUsageError(
            f"'server' needs vLLM's POST /tokenize at {tokenizer._label_url}, but {exc}",
            where=where,
        ) from None
