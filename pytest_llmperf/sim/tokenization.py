"""vLLM's ``POST /tokenize`` and ``POST /detokenize``, with the simulator's tokenizer.

The client can size prompts with the server's own tokenizer
(``--llm-tokenizer=server``), which asks ``/tokenize``. Against the simulator
that tokenizer is the approximate one (pytest_llmperf.tokens), counted exactly
as the chat and completions endpoints count prompts, so ``count`` here equals
the ``usage.prompt_tokens`` the same prompt gets. Shapes are vLLM's
(``vllm/entrypoints/serve/tokenize/protocol.py``): a completion request
``{"model", "prompt", "add_special_tokens", "return_token_strs"}`` or a chat
request ``{"model", "messages", "add_generation_prompt",
"continue_final_message", …}``, answered with ``{"count", "max_model_len",
"tokens", "token_strs"}``; ``/detokenize`` takes ``{"model", "tokens"}`` and
answers ``{"prompt"}``. The simulator has no chat template and no special
tokens, so ``add_generation_prompt`` and ``add_special_tokens`` change nothing.

Token strings are shown as a byte-level BPE tokenizer shows them (Llama 3's,
GPT's): a token that follows whitespace starts with ``Ġ``, so a client that
finds word boundaries in ``token_strs`` (the ``server`` tokenizer does) reads
the simulator's as it reads vLLM's. Ids are handed out in first-seen order by
one vocabulary per server (``"Ġdog"`` and ``"dog"`` are two tokens, as in
BPE), so ``/detokenize`` maps them back to the text, whitespace runs as one
space. Unlike vLLM, ``/tokenize`` of a chat adds no template tokens and a
prompt no BOS: the count is what the simulator's own usage reports for the
same prompt.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from aiohttp import web

from ..apis.chat import chat_prompt_texts
from ..apis.server_wire import WireError, error_body
from ..tokens import SPACE_MARK, token_pieces, token_string

__all__ = ["FIRST_ID", "SPACE_MARK", "Tokenization", "Vocabulary", "token_pieces", "token_string"]

FIRST_ID = 1000  # leave the low ids to the specials a real vocabulary starts with


class Vocabulary:
    """Token piece (its text, leading space included) <-> id, ids in first-seen order."""

    def __init__(self) -> None:
        self._ids: dict[str, int] = {}
        self._strs: list[str] = []

    def encode(self, tokens: list[str]) -> list[int]:
        ids = self._ids
        out = []
        for tok in tokens:
            i = ids.get(tok)
            if i is None:
                i = ids[tok] = FIRST_ID + len(self._strs)
                self._strs.append(tok)
            out.append(i)
        return out

    def decode(self, ids: list[int]) -> list[str]:
        """The tokens of ``ids``; an id never handed out decodes to nothing, as an
        unknown id does on vLLM (200, empty text)."""
        strs = self._strs
        n = len(strs)
        return [strs[i - FIRST_ID] for i in ids if 0 <= i - FIRST_ID < n]


class Tokenization:
    """The two endpoints, for one simulator serving ``model`` (and its LoRA ``adapters``,
    which share its tokenizer, as on vLLM)."""

    def __init__(self, model: str, max_model_len: int, adapters: tuple[str, ...] = ()) -> None:
        self.model = model
        self.max_model_len = max_model_len
        self.adapters = adapters
        self.vocab = Vocabulary()

    def tokenize_body(self, body: Any) -> dict[str, Any]:
        """The response to a ``/tokenize`` request body (WireError if invalid)."""
        body = self._checked(body)
        if "messages" in body:
            messages = body["messages"]
            if not isinstance(messages, list):
                raise WireError(400, "messages must be a list", "messages")
            if body.get("continue_final_message") and body.get("add_generation_prompt", True):
                raise WireError(
                    400,
                    "Cannot set both `continue_final_message` and `add_generation_prompt` to True.",
                )
            tokens = [tok for text in chat_prompt_texts(messages) for tok in token_pieces(text)]
        else:
            prompt = body.get("prompt")
            if not isinstance(prompt, str):
                raise WireError(400, "prompt must be a string (or send messages)", "prompt")
            tokens = token_pieces(prompt)
        strs = [token_string(t) for t in tokens] if body.get("return_token_strs") else None
        return {
            "count": len(tokens),
            "max_model_len": self.max_model_len,
            "tokens": self.vocab.encode(tokens),
            "token_strs": strs,
        }

    def detokenize_body(self, body: Any) -> dict[str, Any]:
        """The response to a ``/detokenize`` request body (WireError if invalid)."""
        body = self._checked(body)
        ids = body.get("tokens")
        if not isinstance(ids, list) or not all(
            isinstance(i, int) and not isinstance(i, bool) for i in ids
        ):
            raise WireError(400, "tokens must be a list of token ids", "tokens")
        return {"prompt": "".join(self.vocab.decode(ids))}

    def _checked(self, body: Any) -> dict[str, Any]:
        if not isinstance(body, dict):
            raise WireError(400, "request body must be a JSON object")
        model = body.get("model")
        if model is not None and model != self.model and model not in self.adapters:
            raise WireError(404, f"The model `{model}` does not exist.", "model")
        return body

    async def tokenize(self, request: web.Request) -> web.Response:
        return await self._answer(request, self.tokenize_body)

    async def detokenize(self, request: web.Request) -> web.Response:
        return await self._answer(request, self.detokenize_body)

    @staticmethod
    async def _answer(request: web.Request, make: Callable[[Any], dict[str, Any]]) -> web.Response:
        try:
            body = await request.json()
        except (json.JSONDecodeError, UnicodeDecodeError):
            return web.json_response(error_body(400, "request body is not valid JSON"), status=400)
        try:
            return web.json_response(make(body))
        except WireError as exc:
            return web.json_response(
                error_body(exc.status, exc.message, exc.param), status=exc.status
            )
