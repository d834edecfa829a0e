"""``conversation``: chat requests replayed from a ShareGPT-format or JSONL file.

Each human turn that an assistant answered becomes one request: the earlier
turns are its history, the human turn its prompt, and the answer's length
(by the workload's tokenizer) its ``max_tokens`` — the draft's empirical
input and output distributions. Accepted files: JSON Lines or a JSON list,
each record either ShareGPT (``{"conversations": [{"from": "human"|"gpt",
"value": ...}]}``) or OpenAI messages (``{"messages": [{"role", "content"}]}``).
A shuffled order fixed by the seed, and, as in the draft, a share of
requests (default 50%) that begin with the same 200-token system prompt.
With no ``path`` the small sample file shipped with the package is used
(written for this project; not ShareGPT data). A request's ``input_tokens``
is what the server will count: its messages' tokens plus what the chat
template adds for that sequence of roles (measured once per shape, when the
workload is built, so no sample needs a tokenizer call).
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any

from pytest_llmperf.errors import LlmPerfUsageError
from pytest_llmperf.workloads.base import Sample, register_workload
from pytest_llmperf.workloads.corpus import default_corpus
from pytest_llmperf.workloads.params import fraction, output_controls, positive_int
from pytest_llmperf.workloads.tokenizer import Tokenizer, framing_tokens, resolve_tokenizer

__all__ = ["SAMPLE_FILE", "ConversationWorkload", "Turn", "load_conversations"]

SAMPLE_FILE = "conversations-sample.jsonl"
_ROLES = {"human": "user", "user": "user", "gpt": "assistant", "assistant": "assistant",
          "chatgpt": "assistant", "bard": "assistant", "bing": "assistant",
          "system": "system"}  # fmt: skip

Turn = tuple[str, str]  # (role, content)


def _turns(record: Any, where: str) -> list[Turn]:
    if not isinstance(record, dict):
        raise LlmPerfUsageError(f"{where}: expected a JSON object, got {type(record).__name__}")
    if "conversations" in record:
        items, role_key, text_key = record["conversations"], "from", "value"
    elif "messages" in record:
        items, role_key, text_key = record["messages"], "role", "content"
    else:
        raise LlmPerfUsageError(f"{where}: needs a 'conversations' or a 'messages' list")
    if not isinstance(items, list):
        raise LlmPerfUsageError(f"{where}: the turns must be a list")
    turns: list[Turn] = []
    for item in items:
        if not isinstance(item, dict):
            raise LlmPerfUsageError(f"{where}: a turn is not an object: {item!r:.80}")
        role = _ROLES.get(str(item.get(role_key, "")).lower())
        text = item.get(text_key)
        if role is None or not isinstance(text, str):
            continue  # unknown speakers and non-text turns are skipped, as ShareGPT cleaners do
        turns.append((role, text))
    return turns


@lru_cache(maxsize=8)
def load_conversations(path: str) -> tuple[tuple[Turn, ...], ...]:
    """The conversations in ``path`` (``""`` = the bundled sample), as tuples of turns."""
    if path:
        file = Path(path)
        try:
            text = file.read_text("utf-8")
        except OSError as exc:
            raise LlmPerfUsageError(
                f"conversation workload: cannot read path={path!r}: {exc}"
            ) from None
        name = str(file)
    else:
        text = resources.files(__package__).joinpath("data", SAMPLE_FILE).read_text("utf-8")
        name = SAMPLE_FILE
    stripped = text.lstrip()
    try:
        if stripped.startswith("["):
            records = [(f"{name}[{i}]", r) for i, r in enumerate(json.loads(text))]
        else:
            records = [
                (f"{name}:{n}", json.loads(line))
                for n, line in enumerate(text.splitlines(), 1)
                if line.strip()
            ]
    except json.JSONDecodeError as exc:
        raise LlmPerfUsageError(f"conversation workload: {name} is not JSON/JSONL: {exc}") from None
    return tuple(tuple(_turns(record, where)) for where, record in records)


@dataclass(frozen=True)
class _Request:
    history: tuple[Turn, ...]
    prompt: str
    answer_tokens: int
    content_tokens: int  # history and prompt, by the workload's tokenizer

    def roles(self, system: bool) -> tuple[str, ...]:
        return (*(("system",) if system else ()), *(r for r, _ in self.history), "user")


@dataclass(frozen=True)
class ConversationWorkload:
    """Requests replayed from conversations; ``size`` is the number of distinct requests."""

    seed: int
    source: str
    requests: tuple[_Request, ...]
    system_prompt: str
    system_prompt_tokens: int
    system_prompt_share: float
    max_output_tokens: int | None
    min_output_tokens: int
    tokenizer: Tokenizer
    skipped: int
    controls: Mapping[str, Any] = field(default_factory=dict)
    name: str = "conversation"
    system_prompt_count: int = 0  # the system prompt's tokens as the tokenizer counts them
    overheads: Mapping[tuple[str, ...], int] = field(default_factory=dict)  # roles -> template

    @property
    def size(self) -> int:
        return len(self.requests)

    def sample(self, index: int) -> Sample:
        # A seeded permutation per pass over the file, so repeats are shuffled too.
        rounds, position = divmod(index, self.size)
        order = list(range(self.size))
        random.Random(f"{self.seed}:order:{rounds}").shuffle(order)
        request = self.requests[order[position]]
        rng = random.Random(f"{self.seed}:{index}")
        history = [{"role": r, "content": c} for r, c in request.history]
        with_system = self.system_prompt_tokens > 0 and rng.random() < self.system_prompt_share
        if with_system:
            history.insert(0, {"role": "system", "content": self.system_prompt})
        input_tokens = request.content_tokens + (self.system_prompt_count if with_system else 0)
        input_tokens += self.overheads.get(request.roles(with_system), 0)
        n_out = max(self.min_output_tokens, request.answer_tokens)
        if self.max_output_tokens:
            n_out = min(n_out, self.max_output_tokens)
        return Sample(
            index=index,
            prompt=request.prompt,
            input_tokens=input_tokens,
            max_tokens=n_out,
            history=tuple(history),
            category="system-prompt" if with_system else "plain",
            extra_body=self.controls,
        )

    def describe(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "seed": self.seed,
            "source": self.source,
            "distinct_requests": self.size,
            "skipped_turns": self.skipped,
            "system_prompt_tokens": self.system_prompt_tokens,
            "system_prompt_share": self.system_prompt_share,
            "output_tokens": "empirical (answer length)"
            + (f", capped at {self.max_output_tokens}" if self.max_output_tokens else "")
            + f", at least {self.min_output_tokens}",
            "output_control": "max_tokens" + ("" if self.controls else " + ignore_eos"),
            "tokenizer": self.tokenizer.label,
            **self._describe_overheads(),
        }

    def _describe_overheads(self) -> dict[str, Any]:
        sizes = sorted(set(self.overheads.values()))
        if not sizes or sizes[-1] <= 0:
            return {}
        span = f"{sizes[0]}" if len(sizes) == 1 else f"{sizes[0]}-{sizes[-1]}"
        return {"prompt_overhead_tokens": f"{span} (by message count)"}


def _requests(
    conversations: Sequence[Sequence[Turn]], tokenizer: Tokenizer, max_input_tokens: int | None
) -> tuple[list[_Request], int]:
    count = _counter(tokenizer)
    out: list[_Request] = []
    skipped = 0
    for turns in conversations:
        for i, (role, text) in enumerate(turns[:-1]):
            next_role, answer = turns[i + 1]
            if role != "user" or next_role != "assistant":
                continue
            history = tuple(turns[:i])
            size = sum(count(c) for _, c in history) + count(text)
            if max_input_tokens is not None and size > max_input_tokens:
                skipped += 1
                continue
            out.append(_Request(history, text, max(1, count(answer)), size))
    return out, skipped


def _counter(tokenizer: Tokenizer) -> Callable[[str], int]:
    """``tokenizer.count`` remembering each text (turns repeat as later requests' history)."""
    seen: dict[str, int] = {}

    def count(text: str) -> int:
        if text not in seen:
            seen[text] = tokenizer.count(text)
        return seen[text]

    return count


def _overheads(
    requests: Sequence[_Request], tokenizer: Tokenizer, with_system: bool
) -> dict[tuple[str, ...], int]:
    """What the chat template adds, per sequence of roles the requests use."""
    shapes = {r.roles(False) for r in requests}
    if with_system:
        shapes |= {r.roles(True) for r in requests}
    return {roles: framing_tokens(tokenizer, roles) for roles in sorted(shapes)}


@register_workload("conversation")
def conversation(
    *,
    seed: int = 0,
    path: Any = None,
    system_prompt_tokens: Any = 200,
    system_prompt_share: Any = 0.5,
    max_input_tokens: Any = None,
    max_output_tokens: Any = None,
    min_output_tokens: Any = 1,
    ignore_eos: Any = True,
    tokenizer: Any = None,
) -> ConversationWorkload:
    """``path`` = a ShareGPT JSON/JSONL file; turns longer than ``max_input_tokens`` are skipped."""
    if path is not None and not isinstance(path, (str, Path)):
        raise LlmPerfUsageError(f"conversation workload: path must be a file path, got {path!r}")
    tok = resolve_tokenizer(tokenizer)
    max_in = (
        None if max_input_tokens is None else positive_int("max_input_tokens", max_input_tokens)
    )
    max_out = (
        None if max_output_tokens is None else positive_int("max_output_tokens", max_output_tokens)
    )
    sys_tokens = positive_int("system_prompt_tokens", system_prompt_tokens, minimum=0)
    requests, skipped = _requests(load_conversations(str(path or "")), tok, max_in)
    source = str(path) if path else f"bundled sample ({SAMPLE_FILE}, written for pytest-llmperf)"
    if not requests:
        raise LlmPerfUsageError(
            f"conversation workload: {source} has no human turn answered by an assistant"
            + (f" within max_input_tokens={max_in}" if max_in else "")
        )
    corpus = default_corpus()
    system_prompt = tok.window(
        corpus, random.Random(f"{seed}:system").randrange(len(corpus)), sys_tokens
    )
    share = fraction("system_prompt_share", system_prompt_share)
    return ConversationWorkload(
        seed=seed,
        source=source,
        requests=tuple(requests),
        system_prompt=system_prompt,
        system_prompt_tokens=sys_tokens,
        system_prompt_share=share,
        system_prompt_count=tok.count(system_prompt) if sys_tokens else 0,
        overheads=_overheads(requests, tok, sys_tokens > 0 and share > 0),
        max_output_tokens=max_out,
        min_output_tokens=positive_int("min_output_tokens", min_output_tokens),
        tokenizer=tok,
        skipped=skipped,
        controls=output_controls(ignore_eos),
    )
