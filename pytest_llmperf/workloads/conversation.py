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

With ``conversations=True`` the load generator runs each conversation as a
multi-turn conversation instead (:class:`FileConversations`,
docs/conversations.md): its answered user turns in order, turn ``k+1`` sending
the earlier user turns with the server's *actual* replies to them, after a
``think_time``, with an optional ``conversation_header`` carrying the
conversation's id. ``sample()`` is unchanged (independent requests with the
recorded history). ``sessions=`` and ``session_header=``, the names before
issue 38, are still taken for one release (mapped by ``build_workload``).
"""

from __future__ import annotations

import itertools
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
from pytest_llmperf.workloads.conversations import (
    ChatScript,
    ThinkTime,
    UserTurn,
    conversation_header,
    think_draws,
    think_time,
)
from pytest_llmperf.workloads.corpus import default_corpus
from pytest_llmperf.workloads.params import fraction, output_controls, positive_int
from pytest_llmperf.workloads.tokenizer import (
    Tokenizer,
    describe_tokenizer,
    framing_tokens,
    resolve_tokenizer,
)

__all__ = [
    "SAMPLE_FILE",
    "ConversationSessions",
    "ConversationWorkload",
    "FileConversations",
    "Turn",
    "load_conversations",
]

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
    conversation_source: FileConversations | None = None  # conversations=True: multi-turn

    @property
    def size(self) -> int:
        return len(self.requests)

    @property
    def session_source(self) -> FileConversations | None:
        """:attr:`conversation_source` by its name before issue 38 (kept for one release)."""
        return self.conversation_source

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
            **describe_tokenizer(self.tokenizer),
            **self._describe_overheads(),
            # "sessions": the JSON report's key, unchanged by issue 38 (a contract outside reads)
            **(
                {"sessions": self.conversation_source.describe()}
                if self.conversation_source
                else {}
            ),
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


# -- multi-turn conversations -----------------------------------------------------------


@dataclass(frozen=True)
class _Dialogue:
    """One file conversation as sent: its leading system turns, then its answered user turns."""

    prefix: tuple[Turn, ...]
    prefix_tokens: int
    turns: tuple[UserTurn, ...]


@lru_cache(maxsize=4)
def _conversation_order(seed: int, size: int, rounds: int) -> tuple[int, ...]:
    """The conversations' order in pass ``rounds`` over them (a seeded shuffle per pass)."""
    order = list(range(size))
    # The seed's text is as it was before issue 38: the same seed, the same order.
    random.Random(f"{seed}:sessions:{rounds}").shuffle(order)
    return tuple(order)


@dataclass(frozen=True)
class FileConversations:
    """The file's conversations, run as multi-turn conversations
    (a :class:`~.conversations.ConversationSource`).

    Conversation ``i`` is file conversation ``order[i % count]`` of a seeded shuffle
    per pass over the file; it begins with the workload's system prompt with
    probability ``system_prompt_share`` (drawn per conversation), its id is
    ``s<seed>-<i>`` and its think times are drawn from ``seed`` and ``i``.
    """

    seed: int
    conversations: tuple[_Dialogue, ...]
    system_prompt: str
    system_prompt_count: int
    system_prompt_share: float
    framing: Mapping[tuple[str, ...], int]  # roles -> template tokens, every turn's shape
    think: ThinkTime
    header: str | None
    controls: Mapping[str, Any] = field(default_factory=dict)
    cut_turns: int = 0  # turns dropped by max_input_tokens (and every turn after them)

    @property
    def count(self) -> int:
        return len(self.conversations)

    @property
    def timed(self) -> bool:
        return False

    def place(self, sample_index: int) -> tuple[int, int]:
        raise TypeError("file conversations have no planned times")

    def conversation(self, index: int) -> ChatScript:
        rounds, position = divmod(index, self.count)
        conv = self.conversations[_conversation_order(self.seed, self.count, rounds)[position]]
        rng = random.Random(f"{self.seed}:session:{index}")  # as before issue 38: same draws
        with_system = bool(self.system_prompt) and rng.random() < self.system_prompt_share
        prefix = [{"role": r, "content": c} for r, c in conv.prefix]
        if with_system:
            prefix.insert(0, {"role": "system", "content": self.system_prompt})
        head = tuple(m["role"] for m in prefix)
        framing = [self.framing.get((*head, *("user", "assistant") * k, "user"), 0)
                   for k in range(len(conv.turns))]  # fmt: skip
        first = conv.prefix_tokens + conv.turns[0].tokens + framing[0]
        first += self.system_prompt_count if with_system else 0
        sid = f"s{self.seed}-{index}"
        return ChatScript(
            index=index,
            conversation_id=sid,
            prefix=tuple(prefix),
            user_turns=conv.turns,
            first_input_tokens=first,
            added_framing=(0, *(b - a for a, b in itertools.pairwise(framing))),
            think=think_draws(self.think, self.seed, index, len(conv.turns) - 1),
            category="system-prompt" if with_system else "plain",
            extra_body=self.controls,
            headers={self.header: sid} if self.header else {},
        )

    session = conversation  # the old spelling, kept for one release

    def describe(self) -> dict[str, Any]:
        lengths = [len(c.turns) for c in self.conversations]
        # The keys are the JSON report's (workload description): unchanged by issue 38.
        return {
            "distinct_sessions": self.count,
            "turns_per_session": f"{min(lengths)}-{max(lengths)}, mean "
            f"{sum(lengths) / len(lengths):.2f}",
            "history": "earlier user turns and the server's actual replies",
            "think_time": self.think.describe(),
            "session_header": self.header,
            "input_tokens": "turn 1: exact; later turns: estimate (previous prompt as the server "
            "counted it + its reply + the new user turn + template)",
            **({"cut_turns": self.cut_turns} if self.cut_turns else {}),
        }


def _dialogues(
    conversations: Sequence[Sequence[Turn]],
    tokenizer: Tokenizer,
    max_input_tokens: int | None,
    output: Callable[[int], int],
) -> tuple[list[_Dialogue], int]:
    """Each conversation's answered user turns, cut before the first past ``max_input_tokens``
    (measured on the recorded conversation, as for independent requests)."""
    count = _counter(tokenizer)
    out: list[_Dialogue] = []
    cut = 0
    for turns in conversations:
        lead = 0
        while lead < len(turns) and turns[lead][0] == "system":
            lead += 1
        prefix = tuple(turns[:lead])
        prefix_tokens = size = sum(count(c) for _, c in prefix)
        kept: list[UserTurn] = []
        answered = [
            (text, turns[i + 1][1])
            for i, (role, text) in enumerate(turns[:-1])
            if i >= lead and role == "user" and turns[i + 1][0] == "assistant"
        ]
        for n, (text, answer) in enumerate(answered):
            size += count(text)
            if max_input_tokens is not None and size > max_input_tokens:
                cut += len(answered) - n
                break
            answer_tokens = max(1, count(answer))
            kept.append(UserTurn(text, count(text), output(answer_tokens)))
            size += count(answer)
        if kept:
            out.append(_Dialogue(prefix, prefix_tokens, tuple(kept)))
    return out, cut


def _dialogue_framing(
    dialogues: Sequence[_Dialogue], tokenizer: Tokenizer, with_system: bool
) -> dict[tuple[str, ...], int]:
    """What the chat template adds, for every shape a conversation's turns take."""
    shapes: set[tuple[str, ...]] = set()
    for s in dialogues:
        heads = [tuple(r for r, _ in s.prefix)]
        if with_system:
            heads.append(("system", *heads[0]))
        for head in heads:
            shapes |= {(*head, *("user", "assistant") * k, "user") for k in range(len(s.turns))}
    return {roles: framing_tokens(tokenizer, roles) for roles in sorted(shapes)}


@register_workload(
    "conversation", renamed={"sessions": "conversations", "session_header": "conversation_header"}
)
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
    conversations: Any = False,
    think_time: Any = None,
    conversation_header: Any = None,
) -> ConversationWorkload:
    """``path`` = a ShareGPT JSON/JSONL file; turns longer than ``max_input_tokens`` are skipped.

    ``conversations=True``: run each conversation as a multi-turn conversation whose
    later turns quote the server's replies; ``think_time`` (seconds, or a
    distribution dict) between a reply and the next turn; ``conversation_header``:
    a header carrying the conversation id on every turn. (``sessions=`` and
    ``session_header=``: their names before issue 38, mapped by ``build_workload``.)
    """
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
    min_out = positive_int("min_output_tokens", min_output_tokens)
    system_count = tok.count(system_prompt) if sys_tokens else 0
    controls = output_controls(ignore_eos)
    multi_turn = _conversation_source(
        conversations,
        think_time,
        conversation_header,
        seed=seed,
        path=str(path or ""),
        tokenizer=tok,
        max_in=max_in,
        output=lambda n: min(max(min_out, n), max_out) if max_out else max(min_out, n),
        system_prompt=system_prompt if sys_tokens else "",
        system_prompt_count=system_count,
        system_prompt_share=share,
        controls=controls,
    )
    return ConversationWorkload(
        seed=seed,
        source=source,
        requests=tuple(requests),
        system_prompt=system_prompt,
        system_prompt_tokens=sys_tokens,
        system_prompt_share=share,
        system_prompt_count=system_count,
        overheads=_overheads(requests, tok, sys_tokens > 0 and share > 0),
        max_output_tokens=max_out,
        min_output_tokens=min_out,
        tokenizer=tok,
        skipped=skipped,
        controls=controls,
        conversation_source=multi_turn,
    )


def _conversation_source(
    conversations: Any,
    think: Any,
    header: Any,
    *,
    seed: int,
    path: str,
    tokenizer: Tokenizer,
    max_in: int | None,
    output: Callable[[int], int],
    system_prompt: str,
    system_prompt_count: int,
    system_prompt_share: float,
    controls: Mapping[str, Any],
) -> FileConversations | None:
    """What ``conversations=True`` asks for (None: independent requests, as before)."""
    if not isinstance(conversations, bool):
        raise LlmPerfUsageError(f"conversations must be True or False, got {conversations!r}")
    pause = think_time(think)
    name = conversation_header(header)
    if not conversations:
        given = [f"{k}={v!r}" for k, v in (("think_time", think), ("conversation_header", header))
                 if v is not None]  # fmt: skip
        if given:
            raise LlmPerfUsageError(
                f"conversation workload: {', '.join(given)} applies to multi-turn "
                "conversations only; add conversations=True"
            )
        return None
    convs, cut = _dialogues(load_conversations(path), tokenizer, max_in, output)
    if not convs:  # pragma: no cover - the requests check above fails first
        raise LlmPerfUsageError("conversation workload: no conversation has an answered turn")
    share = system_prompt_share if system_prompt else 0.0
    return FileConversations(
        seed=seed,
        conversations=tuple(convs),
        system_prompt=system_prompt,
        system_prompt_count=system_prompt_count,
        system_prompt_share=share,
        framing=_dialogue_framing(convs, tokenizer, share > 0),
        think=pause,
        header=name,
        controls=controls,
        cut_turns=cut,
    )


# The name before issue 23 (docs/conversations.md, "Old spellings"), kept for code
# written against it.
ConversationSessions = FileConversations
