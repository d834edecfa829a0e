"""Each agentic call's prompt, sized so the server counts exactly the recorded ``in``.

Two ways a call's prompt is made (docs/agentic.md, "Prompts"):

- *block text* (:meth:`AgentPrompts.blocks`): one user message of the call's
  ``hash_ids`` written as text (:class:`~..traces.prompts.BlockPrompts`: equal
  ids, equal text, each block ``block_size`` tokens), cut so the server counts
  ``in`` tokens with the chat template. Blocks shared with any earlier call
  (a system prompt every subagent starts with; across conversations when the
  trace's ``hash_id_scope`` is global) are the same text, so a prefix cache
  hits them as it did when recorded. Local scope: :meth:`AgentPrompts.block_ids`
  namespaces the ids by conversation.
- a *continuation* (:meth:`AgentPrompts.continuation`): the previous call's
  messages, the server's real reply to it as an assistant message, and a new
  user message (the tool result) of text from the call's hash ids past the
  shared ones, cut so the total is ``in``: the server's count of the previous
  prompt, plus the reply's tokens, plus what the template adds for the two new
  messages, plus the new text.

Counting is the project's exact-window arithmetic (:mod:`..traces.prompts`)
plus one tokenizer call per continuation (the reply's tokens): agent calls are
a few per second, and nothing here runs per token event.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass

from pytest_llmperf.workloads.budget import MIN_CONTENT_TOKENS
from pytest_llmperf.workloads.corpus import Corpus
from pytest_llmperf.workloads.tokenizer import Tokenizer, framing_tokens
from pytest_llmperf.workloads.traces.prompts import BlockPrompts

__all__ = ["MEASURED_PAIRS", "AgentPrompts", "Continued"]

MEASURED_PAIRS = 4  # exchanges of a conversation whose template tokens are measured one by one


@dataclass(frozen=True, slots=True)
class Continued:
    """A continuation's new user text and whether the server will count exactly the target."""

    text: str
    exact: bool


class AgentPrompts:
    """Block texts and continuations for one workload (tokenizer, seed, block size).

    Picklable and thread-safe as :class:`BlockPrompts` is; the framing of each
    message shape is measured once.
    """

    def __init__(self, tokenizer: Tokenizer, corpus: Corpus, seed: int, block_size: int) -> None:
        self.tokenizer = tokenizer
        self.block_size = block_size
        self.texts = BlockPrompts(tokenizer, corpus, seed, block_size)
        self._framing: dict[tuple[str, ...], int] = {}
        self._added: dict[int, int] = {}  # by the length of the messages before

    def framing(self, roles: Sequence[str]) -> int:
        """Tokens the server adds around messages with ``roles`` (cached per shape)."""
        key = tuple(roles)
        got = self._framing.get(key)
        if got is None:
            got = self._framing[key] = framing_tokens(self.tokenizer, key)
        return got

    def added_framing(self, roles: Sequence[str]) -> int:
        """What the template adds when an assistant reply and a user message follow
        messages with ``roles`` (alternating, from a user message, as every prompt here).

        Measured per length up to :data:`MEASURED_PAIRS` exchanges; past that, a template
        that added the same for the last two measured lengths is taken to add it for every
        longer one (templates render each message alike), which spares measuring a
        template over hundreds of placeholder messages per call."""
        n = len(roles)
        got = self._added.get(n)
        if got is not None:
            return got
        cap = 2 * MEASURED_PAIRS + 1
        if n > cap:
            last = self.added_framing(roles[:cap])
            if last == self.added_framing(roles[: cap - 2]):
                self._added[n] = last
                return last
        got = self._added[n] = self.framing((*roles, "assistant", "user")) - self.framing(roles)
        return got

    @staticmethod
    def block_ids(namespace: str | None, hash_ids: Sequence[int]) -> tuple[int, ...]:
        """The ids whose texts a call's blocks get: the trace's own (``namespace`` None:
        global scope) or ids of their own per ``namespace`` (local scope)."""
        if namespace is None:
            return tuple(hash_ids)
        return tuple(_namespaced(namespace, h) for h in hash_ids)

    def blocks(self, ids: Sequence[int], total: int, key: str) -> tuple[str, bool]:
        """One user message's text over ``ids`` that the server counts as ``total`` tokens
        (template included); ``exact`` False when ``total`` is below the template's own
        tokens plus one (sent as a one-token prompt) or the words cannot close the gap."""
        n = total - self.framing(("user",))
        want = max(MIN_CONTENT_TOKENS, n)
        text, got = self.texts.prompt(ids, want, key)
        return text, n >= MIN_CONTENT_TOKENS and got == want

    def continuation(
        self,
        roles: Sequence[str],
        prompt_tokens: int,
        reply: str,
        ids: Sequence[int],
        total: int,
        key: str,
    ) -> Continued | None:
        """The new user text after ``roles`` (the previous call's messages), the previous
        prompt (``prompt_tokens`` as the server counted it) and ``reply``, so the server
        counts ``total``; None when the reply leaves no room for one token of it."""
        n = total - prompt_tokens - self.tokenizer.count(reply) - self.added_framing(roles)
        if n < MIN_CONTENT_TOKENS:
            return None
        text, got = self.texts.prompt(ids, n, key)
        return Continued(text, got == n)


def _namespaced(namespace: str, h: int) -> int:
    """A stable id for block ``h`` of ``namespace`` (63 bits: apart from a trace's own ids
    in practice)."""
    digest = hashlib.blake2b(f"{namespace}\x00{h}".encode(), digest_size=8).digest()
    return (int.from_bytes(digest, "big") >> 1) | (1 << 62)
