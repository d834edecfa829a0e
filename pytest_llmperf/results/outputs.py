"""Each sample's greedy output, as a fingerprint: what ``output_match`` and
``output_consistency`` compare.

With ``greedy=True`` the output of a prompt is a function of the server's numerics,
so a changed output is a changed server. Keeping whole outputs would cost memory and
report size for nothing a comparison needs: the client keeps, per completed request,
a digest of the output (equal digests: equal outputs), its token count, and its
*marks* (a 2-byte checksum per token event, base64: where two outputs part).

Keyed by :class:`OutputKey`: the workload's sample index (the same index is the same
prompt in every run of the same workload) and, in a multi-turn conversation, the turn
(and the agent thread, in an agentic one): every turn of a conversation is its own
output, compared with the same turn of the same conversation on the other side (a
later turn's prompt quotes the earlier replies, so once one turn differs, the later
ones are expected to). A key is written ``"<index>"`` for a single request or a
conversation's first turn (as before turns were kept, so older baselines still compare
on it), ``"<index>.<turn>"`` for a later turn and ``"<index>.<turn>@<agent>"`` in a
subagent's thread. A key sent more than once keeps its first output (merges too: first
wins), so merging worker processes' or A/B blocks' outputs is cheap and the result does
not depend on which copy came last. At most :data:`MAX_OUTPUT_SAMPLES` outputs are
kept, the lowest keys, so two runs of the same workload keep the same ones whatever
order their requests finished in.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, NamedTuple

__all__ = [
    "MAX_MISMATCHES",
    "MAX_OUTPUT_SAMPLES",
    "MatchedAgainst",
    "OutputKey",
    "OutputMatch",
    "SampleOutput",
    "SampleOutputs",
    "sample_words",
]

MAX_OUTPUT_SAMPLES = 4096
MAX_MISMATCHES = 20  # mismatching samples an OutputMatch lists (all are counted)


class MatchedAgainst(StrEnum):
    """What a run's outputs were compared with (a ``StrEnum``: written as the plain name)."""

    BASELINE = "baseline"  # the baseline file's run with the same label
    HISTORY = "history"  # the newest passed comparable run in the history store
    REFERENCE = "reference"  # the A/B reference endpoint's side of the run
    ALONE = "alone"  # the same samples sent again one at a time (output_consistency)


@dataclass(frozen=True)
class OutputMatch:
    """A run's greedy outputs against another side's, sample by sample.

    ``share``: of the ``compared`` samples both sides have, the share whose outputs
    are equal (equal digests); ``mismatched``: how many are not; ``mismatches``: the
    first :data:`MAX_MISMATCHES` of them, ``{"index": sample, "position": token
    event where the outputs part}`` (position None when the marks cannot say: the
    outputs differ only in what the marks do not cover, e.g. a tool call's name, or
    one side kept no marks); ``against``: a :class:`MatchedAgainst` value;
    ``compared_with``: what exactly (``baseline PATH (created)``, the history runs, the
    reference URL, ``alone (concurrency 1)``).
    """

    share: float
    compared: int
    mismatches: list[dict[str, Any]] = field(default_factory=list)
    against: str = MatchedAgainst.BASELINE.value
    mismatched: int = 0
    compared_with: str = ""

    def to_dict(self) -> dict[str, Any]:
        """The report's ``runs[].output_match`` / ``runs[].output_consistency``."""
        return {
            "share": round(self.share, 6),
            "compared": self.compared,
            "mismatched": self.mismatched,
            "mismatches": [dict(m) for m in self.mismatches],
            "against": str(self.against),
            "compared_with": self.compared_with,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> OutputMatch:
        return cls(
            share=float(data["share"]),
            compared=int(data["compared"]),
            mismatches=[dict(m) for m in data.get("mismatches", [])],
            against=str(data.get("against", "")),
            mismatched=int(data.get("mismatched", 0)),
            compared_with=str(data.get("compared_with", "")),
        )


class OutputKey(NamedTuple):
    """Which output: the ``sample`` index, the ``turn`` of its conversation (0: the first,
    or a single request) and the ``agent`` thread ("" the root). Ordered as tuples."""

    sample: int
    turn: int = 0
    agent: str = ""

    @classmethod
    def of(cls, key: int | OutputKey) -> OutputKey:
        return key if isinstance(key, OutputKey) else cls(key)

    @classmethod
    def parse(cls, text: str) -> OutputKey:
        """Read :meth:`name` back: ``"3"``, ``"3.2"``, ``"3.2@a/b"``."""
        head, _, agent = text.partition("@")
        index, _, turn = head.partition(".")
        return cls(int(index), int(turn or 0), agent)

    def name(self) -> str:
        """The JSON key: ``"3"`` (a first turn or single request), ``"3.2"``, ``"3.2@a/b"``."""
        if not self.turn and not self.agent:
            return str(self.sample)
        return f"{self.sample}.{self.turn}" + (f"@{self.agent}" if self.agent else "")


def sample_words(mismatch: Mapping[str, Any]) -> str:
    """A mismatch's sample in words (``runs[].output_match.mismatches[]``): ``3``,
    ``3 turn 2``, ``3 turn 2 of a/b``."""
    out = str(mismatch.get("index"))
    if mismatch.get("turn") or mismatch.get("agent"):
        out += f" turn {mismatch.get('turn') or 0}"
    if mismatch.get("agent"):
        out += f" of {mismatch['agent']}"
    return out


class _Largest:
    """A heap entry whose heap's top is the largest key (heapq keeps the smallest)."""

    __slots__ = ("key",)

    def __init__(self, key: OutputKey) -> None:
        self.key = key

    def __lt__(self, other: _Largest) -> bool:
        return self.key > other.key


class SampleOutput(NamedTuple):
    """One sample's output: ``digest`` (16 hex chars), ``tokens`` (output tokens) and
    ``marks`` (base64 of a 2-byte checksum per token event, in order)."""

    digest: str
    tokens: int
    marks: str


class SampleOutputs:
    """:class:`OutputKey` -> :class:`SampleOutput`, first wins, the lowest keys kept. A
    plain sample index reads as that sample's first turn."""

    def __init__(self, limit: int = MAX_OUTPUT_SAMPLES) -> None:
        self.limit = limit
        self._by_index: dict[OutputKey, SampleOutput] = {}
        self._heap: list[_Largest] = []  # every kept key: the largest on top

    def add(
        self, index: int, digest: str, tokens: int, marks: str, *, turn: int = 0, agent: str = ""
    ) -> None:
        """Keep ``index``'s output (of ``turn``, -1 read as 0, in thread ``agent``)."""
        key = OutputKey(index, turn if turn > 0 else 0, agent)
        found = self._by_index
        if key in found:
            return
        if len(found) >= self.limit:
            largest = self._heap[0].key
            if key > largest:
                return
            heapq.heappop(self._heap)
            del found[largest]
        found[key] = SampleOutput(digest, tokens, marks)
        heapq.heappush(self._heap, _Largest(key))

    def merge(self, other: SampleOutputs) -> None:
        for key, output in other._by_index.items():
            self.add(key.sample, *output, turn=key.turn, agent=key.agent)

    def get(self, key: int | OutputKey) -> SampleOutput | None:
        return self._by_index.get(OutputKey.of(key))

    def __contains__(self, key: object) -> bool:
        if isinstance(key, int):
            key = OutputKey(key)
        return key in self._by_index

    def __getitem__(self, key: int | OutputKey) -> SampleOutput:
        return self._by_index[OutputKey.of(key)]

    def __iter__(self) -> Iterator[OutputKey]:
        return iter(self._by_index)

    def __len__(self) -> int:
        return len(self._by_index)

    def __bool__(self) -> bool:
        return bool(self._by_index)

    def sorted_keys(self) -> list[OutputKey]:
        """The kept keys, ascending (by sample, then turn)."""
        return sorted(self._by_index)

    def indices(self) -> list[int]:
        """The kept sample indices, ascending, each once (what is sent alone)."""
        return sorted({key.sample for key in self._by_index})

    def to_dict(self) -> dict[str, dict[str, Any]]:
        """The report's ``runs[].outputs``: ``{"<key>": {"digest", "tokens", "marks"}}``,
        by ascending key (:meth:`OutputKey.name`: ``"3"``, ``"3.2"``)."""
        return {
            k.name(): {"digest": o.digest, "tokens": o.tokens, "marks": o.marks}
            for k, o in sorted(self._by_index.items())
        }

    def to_state(self) -> dict[str, list[Any]]:
        """A compact JSON-able form: ``{"<key>": [digest, tokens, marks]}``."""
        return {k.name(): [o.digest, o.tokens, o.marks] for k, o in self._by_index.items()}

    @classmethod
    def from_state(cls, state: Mapping[str, Any] | None) -> SampleOutputs:
        """Read :meth:`to_state` (or :meth:`to_dict`) back."""
        outputs = cls()
        for key, value in (state or {}).items():
            if isinstance(value, Mapping):
                digest, tokens, marks = (
                    value.get("digest", ""),
                    value.get("tokens", 0),
                    value.get("marks", ""),
                )
            else:
                digest, tokens, marks = value
            at = OutputKey.parse(str(key))
            outputs.add(
                at.sample, str(digest), int(tokens), str(marks), turn=at.turn, agent=at.agent
            )
        return outputs
