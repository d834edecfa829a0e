"""``--llm-tokenizer=server``: the server counts, through its own ``POST /tokenize``.

Two shapes of the route are in use, both at the server's root beside ``/v1``:

- **vLLM's** (and SGLang's compatible route): ``{"model", "prompt",
  "add_special_tokens"}`` or ``{"model", "messages", "add_generation_prompt"}``
  (chat template applied) answered with ``{"count", "tokens",
  "max_model_len"}`` (plus ``"token_strs"`` with ``"return_token_strs": true``);
  ``POST /detokenize`` ``{"model", "tokens"}`` answers ``{"prompt"}``.
- **llama.cpp's** ``llama-server``: ``{"content", "add_special",
  "parse_special", "with_pieces"}`` answered with ``{"tokens": [...]}`` (ids, or
  ``{"id", "piece"}`` objects with ``with_pieces``); no chat form, but ``POST
  /apply-template`` ``{"messages"}`` answers ``{"prompt"}``, the text its chat
  route tokenizes with ``add_special`` (its leading BOS text stripped when the
  model adds one); ``POST /detokenize`` answers ``{"content"}``. Asked in vLLM's
  shape it answers ``{"tokens": []}``.

The shape is found once (:meth:`ServerTokenizer.discover`): vLLM's first, then
llama.cpp's. An empty token list for a non-empty text means "this shape is
not usable here", never "zero tokens": a server that answers ``{"tokens": []}``
to both is not a tokenizer, and discovery falls back.

Samples are built lazily on the load generator's hot path, where an HTTP call
per prompt is out of the question, so everything is measured once, at the
session's preflight: each corpus's segment table (one ``/tokenize`` of the
corpus with token strings, which gives every word's token count; else one call
per distinct word) and the framing of each message shape. Windows are then cut
locally (:mod:`.segments`). Plain ``count()`` calls (a conversation file's
turns, when its workload is built) are cached, and the cache travels with the
pickle to worker processes.

The HTTP calls themselves are not made here (this package sits below the
client): a :class:`TokenizeRoutes` is handed in, the metadata client's, which
bounds each call by ``--llm-timeout``, retries transient answers and raises
its usage error when a call runs out of time or retries.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import Enum
from typing import Any, Protocol

from pytest_llmperf.errors import LlmPerfUsageError
from pytest_llmperf.workloads.corpus import Corpus, default_corpus
from pytest_llmperf.workloads.exact import ExactTokenizer
from pytest_llmperf.workloads.segments import SegmentTable, corpus_words, start_candidates

__all__ = [
    "RouteAnswer",
    "ServerTokenizer",
    "TokenizeRouteError",
    "TokenizeRoutes",
    "TokenizeShape",
    "probe_tokenize",
    "require_tokenize",
]

_WORD_MARKS = ("Ġ", "▁", " ")  # how token strings show a leading space (byte-level, metaspace, raw)
START_WORDS = 96  # distinct start words measured one by one (each an HTTP call)
_PROBE_TEXT = "Hello"


class TokenizeShape(Enum):
    """Which server's ``/tokenize`` this is (the request and answer shapes differ)."""

    VLLM = "vLLM"
    LLAMA_CPP = "llama.cpp"


@dataclass(frozen=True, slots=True)
class RouteAnswer:
    """A definitive answer of one route: its status, its JSON (None if not JSON), its words."""

    status: int
    data: Any = None
    message: str = ""


class TokenizeRoutes(Protocol):
    """The calls a :class:`ServerTokenizer` makes, to routes at the server's root.

    ``post`` returns a definitive answer or raises a usage error (a call that
    ran out of time or retries); ``where`` names the server for messages,
    without credentials. Implementations must pickle (worker processes).
    """

    @property
    def where(self) -> str: ...

    def post(self, route: str, body: Mapping[str, Any]) -> RouteAnswer: ...

    def close(self) -> None: ...


class TokenizeRouteError(RuntimeError):
    """``/tokenize`` did not answer as a usable tokenizer does (missing, refused, odd body)."""

    def __init__(self, message: str, *, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


class ServerTokenizer(ExactTokenizer):
    """Counts with the server's ``/tokenize``; cuts windows locally from calibrated tables."""

    name = "server"
    verifies = False  # counting is an HTTP call: windows rest on the calibrated tables
    start_limit = START_WORDS

    def __init__(self, routes: TokenizeRoutes, model: str | None) -> None:
        super().__init__()
        self.routes = routes
        self.model = model
        self.shape: TokenizeShape | None = None
        self._counts: dict[str, int] = {}
        self.window_error = 0  # largest |count - n| seen when the calibration was checked

    # -- HTTP ----------------------------------------------------------------------

    def _post(self, route: str, body: dict[str, Any]) -> dict[str, Any]:
        if self.model:
            body = {"model": self.model, **body}
        answer = self.routes.post(route, body)
        if answer.status != 200:
            said = f": {answer.message}" if answer.message else ""
            raise TokenizeRouteError(
                f"POST {route} answered HTTP {answer.status}{said}", status=answer.status
            )
        if not isinstance(answer.data, dict):
            what = "non-JSON" if answer.data is None else f"{type(answer.data).__name__}"
            raise TokenizeRouteError(f"POST {route} answered {what}, not a JSON object")
        return answer.data

    def discover(self) -> TokenizeShape:
        """The route's shape: vLLM's, else llama.cpp's (:class:`TokenizeRouteError` if neither)."""
        if self.shape is not None:
            return self.shape
        why: list[str] = []
        for shape in TokenizeShape:
            try:
                self._encode(_PROBE_TEXT, shape=shape)
            except TokenizeRouteError as exc:
                why.append(f"{exc} (asked in {shape.value}'s shape)")
                if exc.status == 404:
                    break  # no such route (or model): the other shape is the same route
                continue
            self.shape = shape
            return shape
        raise TokenizeRouteError("; ".join(why))

    def token_ids(self, text: str, *, special: bool = False) -> list[int]:
        """The ids of ``text`` (``special``: with the tokens the model adds, BOS and the like)."""
        return self._encode(text, special=special)

    def _encode(
        self, text: str, *, special: bool = False, shape: TokenizeShape | None = None
    ) -> list[int]:
        shape = shape or self.discover()
        if shape is TokenizeShape.VLLM:
            body: dict[str, Any] = {"prompt": text, "add_special_tokens": special}
        else:
            body = {"content": text, "add_special": special, "parse_special": True}
        tokens = self._post("/tokenize", body).get("tokens")
        if not isinstance(tokens, list):
            raise TokenizeRouteError("POST /tokenize answered without a list of tokens")
        if text and not tokens:
            raise TokenizeRouteError(
                f"POST /tokenize answered no tokens for a non-empty text ({_answer(tokens)})"
            )
        ids = [t["id"] if isinstance(t, dict) else t for t in tokens]
        if not all(isinstance(i, int) for i in ids):
            raise TokenizeRouteError("POST /tokenize answered tokens that are not ids")
        return ids

    def _pieces(self, text: str) -> list[str] | None:
        """Each token's text (vLLM's ``token_strs``, llama.cpp's pieces), None if not given."""
        if self.discover() is TokenizeShape.VLLM:
            body = {"prompt": text, "add_special_tokens": False, "return_token_strs": True}
            data = self._post("/tokenize", body)
            strs, count = data.get("token_strs"), data.get("count")
            if not isinstance(strs, list) or len(strs) != count:
                return None
            return strs if all(isinstance(s, str) for s in strs) else None
        body = {"content": text, "add_special": False, "parse_special": True, "with_pieces": True}
        tokens = self._post("/tokenize", body).get("tokens")
        if not isinstance(tokens, list):
            return None
        pieces = [t.get("piece") if isinstance(t, dict) else None for t in tokens]
        out = []
        for piece in pieces:
            if isinstance(piece, list) and all(isinstance(b, int) for b in piece):
                piece = bytes(b & 0xFF for b in piece).decode("utf-8", "replace")  # partial UTF-8
            if not isinstance(piece, str):
                return None
            out.append(piece)
        return out

    def detokenize(self, tokens: Sequence[int]) -> str:
        """The text of token ids, by ``POST /detokenize``."""
        key = "prompt" if self.discover() is TokenizeShape.VLLM else "content"
        text = self._post("/detokenize", {"tokens": list(tokens)}).get(key)
        if not isinstance(text, str):
            raise TokenizeRouteError(f"POST /detokenize answered without {key!r}")
        return text

    def close(self) -> None:
        self.routes.close()

    # -- ExactTokenizer ----------------------------------------------------------------

    def _describe(self) -> str:
        # no URL: the label goes into the workload's description, which baselines compare
        by = " (llama.cpp)" if self.shape is TokenizeShape.LLAMA_CPP else ""
        text = (
            f"the server's /tokenize{by} (model {self.model})"
            if self.model
            else (f"server /tokenize{by}")
        )
        if self.window_error:
            text += f" (windows checked within ±{self.window_error} tokens)"
        return text

    def _token_strings(self, text: str) -> list[str] | None:
        """The server's token strings (vLLM's ``token_strs``, llama.cpp's pieces); None
        when it gives none (the identity is then unknown, never guessed)."""
        try:
            return self._pieces(text)
        except TokenizeRouteError:
            return None

    def _count_many(self, texts: Sequence[str]) -> list[int]:
        out = []
        for text in texts:
            if text not in self._counts:
                self._counts[text] = len(self._encode(text)) if text else 0
            out.append(self._counts[text])
        return out

    def _special_count(self) -> int:
        key = "\x00special"
        if key not in self._counts:
            with_special = len(self._encode(_PROBE_TEXT, special=True))
            self._counts[key] = with_special - self.count(_PROBE_TEXT)
        return self._counts[key]

    def _chat_count(self, messages: Sequence[Mapping[str, str]]) -> int | None:
        listed = [dict(m) for m in messages]
        try:
            if self.discover() is TokenizeShape.VLLM:
                body = {"messages": listed, "add_generation_prompt": True}
                count = self._post("/tokenize", body).get("count")
                return count if isinstance(count, int) else None
            # llama-server's chat route: the template's text, tokenized with add_special
            prompt = self._post("/apply-template", {"messages": listed}).get("prompt")
            if not isinstance(prompt, str):
                return None
            return len(self._encode(prompt, special=True))
        except TokenizeRouteError:
            return None  # no chat template on the server: no framing known

    def _measure(self, text: str) -> SegmentTable:
        words = corpus_words(" ".join(text.split()))
        spaced = self._spaced_from_pieces(words)
        firsts = start_candidates(words, self.start_limit)
        bare = dict(zip(firsts, self._count_many(firsts), strict=True))
        if spaced is None:
            distinct = list(dict.fromkeys(words))
            counts = self._count_many([" " + w for w in distinct])
            return SegmentTable.build(text, dict(zip(distinct, counts, strict=True)), bare)
        return SegmentTable.build(text, spaced, bare)

    def _spaced_from_pieces(self, words: list[str]) -> list[int] | None:
        """Every word's in-context token count from one ``/tokenize`` with token strings.

        The corpus is sent twice, each copy after a space, so every word is
        seen in the context a window gives it. A token whose string shows a
        leading space starts a word; tokens up to the next such one belong to
        it. When the strings do not line up with the words (a tokenizer with
        multi-word tokens, or a server that gives no strings), None.
        """
        cycle = " " + " ".join(words)
        try:
            strs = self._pieces(cycle + cycle)
        except TokenizeRouteError:
            return None
        if not strs:
            return None
        counts: list[int] = []
        for s in strs:
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
        _ = self.identity  # its /tokenize call made here, at preflight, not mid-run
        return self


def _answer(tokens: Any) -> str:
    return '{"tokens": []}' if tokens == [] else f"tokens {tokens!r}"[:60]


def probe_tokenize(tokenizer: ServerTokenizer) -> TokenizeShape:
    """The shape of the server's ``/tokenize`` (:class:`TokenizeRouteError` if unusable)."""
    return tokenizer.discover()


def require_tokenize(tokenizer: ServerTokenizer, where: str) -> TokenizeShape:
    """:func:`probe_tokenize` for an explicit ``server`` choice: a usage error if it fails."""
    try:
        return probe_tokenize(tokenizer)
    except TokenizeRouteError as exc:
        raise LlmPerfUsageError(
            f"'server' needs the server's POST /tokenize (vLLM's or llama.cpp's) at "
            f"{tokenizer.routes.where}, but {exc}",
            where=where,
        ) from None
