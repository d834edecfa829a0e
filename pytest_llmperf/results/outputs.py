"""Each sample's greedy output, as a fingerprint: what ``output_match`` and
``output_consistency`` compare.

With ``greedy=True`` the output of a prompt is a function of the server's numerics,
so a changed output is a changed server. Keeping whole outputs would cost memory and
report size for nothing a comparison needs: the client keeps, per completed request,
a digest of the output (equal digests: equal outputs), its token count, and its
*marks* (a 2-byte checksum per token event, base64: where two outputs part).

Keyed by the workload's sample index (the same index is the same prompt in every
run of the same workload). A sample sent more than once keeps its first output
(merges too: first wins), so merging worker processes' or A/B blocks' outputs is
cheap and the result does not depend on which copy came last. At most
:data:`MAX_OUTPUT_SAMPLES` samples are kept, the lowest indices, so two runs of the
same workload keep the same samples whatever order their requests finished in.
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
    "OutputMatch",
    "SampleOutput",
    "SampleOutputs",
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


class SampleOutput(NamedTuple):
    """One sample's output: ``digest`` (16 hex chars), ``tokens`` (output tokens) and
    ``marks`` (base64 of a 2-byte checksum per token event, in order)."""

    digest: str
    tokens: int
    marks: str


class SampleOutputs:
    """Sample index -> :class:`SampleOutput`, first wins, the lowest indices kept."""

    def __init__(self, limit: int = MAX_OUTPUT_SAMPLES) -> None:
        self.limit = limit
        self._by_index: dict[int, SampleOutput] = {}
        self._heap: list[int] = []  # -index of every kept sample: the largest on top

    def add(self, index: int, digest: str, tokens: int, marks: str) -> None:
        found = self._by_index
        if index in found:
            return
        if len(found) >= self.limit:
            largest = -self._heap[0]
            if index > largest:
                return
            heapq.heappop(self._heap)
            del found[largest]
        found[index] = SampleOutput(digest, tokens, marks)
        heapq.heappush(self._heap, -index)

    def merge(self, other: SampleOutputs) -> None:
        for index, output in other._by_index.items():
            self.add(index, *output)

    def get(self, index: int) -> SampleOutput | None:
        return self._by_index.get(index)

    def __contains__(self, index: object) -> bool:
        return index in self._by_index

    def __getitem__(self, index: int) -> SampleOutput:
        return self._by_index[index]

    def __iter__(self) -> Iterator[int]:
        return iter(self._by_index)

    def __len__(self) -> int:
        return len(self._by_index)

    def __bool__(self) -> bool:
        return bool(self._by_index)

    def indices(self) -> list[int]:
        """The kept sample indices, ascending."""
        return sorted(self._by_index)

    def to_dict(self) -> dict[str, dict[str, Any]]:
        """The report's ``runs[].outputs``: ``{"<index>": {"digest", "tokens", "marks"}}``,
        by ascending index."""
        return {
            str(i): {"digest": o.digest, "tokens": o.tokens, "marks": o.marks}
            for i, o in sorted(self._by_index.items())
        }

    def to_state(self) -> dict[str, list[Any]]:
        """A compact JSON-able form: ``{"<index>": [digest, tokens, marks]}``."""
        return {str(i): [o.digest, o.tokens, o.marks] for i, o in self._by_index.items()}

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
            outputs.add(int(key), str(digest), int(tokens), str(marks))
        return outputs
