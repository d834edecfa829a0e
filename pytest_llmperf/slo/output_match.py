"""``output_match`` and ``output_consistency``: are a greedy run's outputs the other side's?

With ``greedy=True`` (temperature 0, fixed seed) a prompt's output is a function of
the server's numerics: a kernel, quantisation or batching change that alters what the
model says shows as outputs that differ from the last good run's for the same prompt.
Each side keeps, per sample index, a digest of its output and a 2-byte checksum per
token event (:mod:`pytest_llmperf.results.outputs`); two outputs match when their
digests are equal, and where they do not, the first token event whose checksums
differ is where they part (a checksum collision can only move that position later,
never hide a difference: the digests decide).

The other side, first found wins (:func:`match_outputs`):

- ``baseline``: the ``--llm-baseline-compare`` file's run of the same test and label;
- ``history``: with ``--llm-baseline-compare=history[:N]``, the newest comparable run of
  the same test in the store whose test passed (the last good run);
- ``reference``: with ``--llm-reference-endpoint``, the reference's side of the A/B run
  (the same samples, block by block).

``output_consistency`` compares a run with the same samples sent again one at a
time after it (:mod:`pytest_llmperf.loadgen.outputs_alone`): outputs under load equal
to outputs alone is batch invariance.

Only the samples both sides kept are compared; a run with none in common has no
value (its SLO is inconclusive, with the reason in ``RunResult.output_notes``).
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from pytest_llmperf.results.outputs import (
    MAX_MISMATCHES,
    MatchedAgainst,
    OutputMatch,
    SampleOutputs,
    sample_words,
)

__all__ = [
    "NO_OTHER_SIDE",
    "MatchOutcome",
    "MatchedAgainst",
    "OtherOutputs",
    "OutputMatch",
    "compare_outputs",
    "judge_output_match",
    "mismatch_text",
    "outputs_of_state",
    "parting_position",
]

NO_OTHER_SIDE = "no baseline, history or reference outputs to compare with"
# a comparison, or None and why there is none
MatchOutcome = tuple[OutputMatch | None, str]


@dataclass(frozen=True)
class OtherOutputs:
    """The other side's outputs for one run: what they are (``against``, a
    :class:`MatchedAgainst` value) and exactly which (``compared_with``); empty
    ``outputs`` with the ``reason`` when that side has none to give."""

    outputs: SampleOutputs
    against: str
    compared_with: str = ""
    reason: str = ""


def parting_position(marks: str, other: str) -> int | None:
    """The first token event (0-based) where two outputs' marks differ; where one is a
    prefix of the other, the length of the shorter (the shorter ended there); None when
    the marks are equal or cannot be read (the outputs differ outside them)."""
    try:
        a = base64.b64decode(marks, validate=True) if marks else b""
        b = base64.b64decode(other, validate=True) if other else b""
    except (binascii.Error, ValueError):
        return None
    if not a or not b or a == b:
        return None
    for k in range(0, min(len(a), len(b)) - 1, 2):
        if a[k : k + 2] != b[k : k + 2]:
            return k // 2
    return min(len(a), len(b)) // 2


def compare_outputs(
    outputs: SampleOutputs, other: SampleOutputs, against: str, compared_with: str = ""
) -> OutputMatch | None:
    """``outputs`` against ``other`` sample by sample (the indices both kept); None when
    they have no sample in common."""
    common = [key for key in outputs.sorted_keys() if key in other]
    if not common:
        return None
    mismatches: list[dict[str, Any]] = []
    mismatched = 0
    for key in common:  # every turn of a conversation: its own key (sample, turn)
        mine, theirs = outputs[key], other[key]
        if mine.digest == theirs.digest:
            continue
        mismatched += 1
        if len(mismatches) < MAX_MISMATCHES:
            position = parting_position(mine.marks, theirs.marks)
            mismatch: dict[str, Any] = {"index": key.sample, "position": position}
            if key.turn:
                mismatch["turn"] = key.turn
            if key.agent:
                mismatch["agent"] = key.agent
            mismatches.append(mismatch)
    return OutputMatch(
        share=(len(common) - mismatched) / len(common),
        compared=len(common),
        mismatches=mismatches,
        against=str(against),
        mismatched=mismatched,
        compared_with=compared_with,
    )


def outputs_of_state(state: Mapping[str, Any] | None) -> SampleOutputs:
    """The outputs kept in an accumulator's stored state (a baseline's, the history's);
    empty when it kept none (not greedy, or stored before outputs were kept)."""
    if not isinstance(state, Mapping):
        return SampleOutputs()
    return SampleOutputs.from_state(state.get("outputs"))


def mismatch_text(match: OutputMatch, limit: int = 8) -> str:
    """The mismatching samples in words, for a verdict's reason: ``3 of 40 samples
    differ from baseline b.json (DATE): sample 7 from token 12, sample 19 from token 3``."""
    if not match.mismatched:
        return ""
    parts = []
    for m in match.mismatches[:limit]:
        position = m.get("position")
        where = f" from token {position}" if position is not None else ""
        parts.append(f"sample {sample_words(m)}{where}")
    more = match.mismatched - len(parts)
    if more > 0:
        parts.append(f"+{more} more")
    if match.against == MatchedAgainst.ALONE:
        side = "the same samples sent alone"
    else:
        side = match.compared_with or f"the {match.against}'s outputs"
    head = f"{match.mismatched} of {match.compared} samples differ from {side}"
    return f"{head}: {', '.join(parts)}"


def judge_output_match(outputs: SampleOutputs, sides: Iterable[OtherOutputs]) -> MatchOutcome:
    """``outputs`` against the first of ``sides`` (in precedence order: baseline or
    history, then reference) that has outputs in common with them: the match, or None
    and why nothing was compared (every side's reason)."""
    if not outputs:
        return None, "the run kept no greedy outputs (llm_workload(greedy=True))"
    notes: list[str] = []
    for other in sides:
        if other.outputs:
            match = compare_outputs(outputs, other.outputs, other.against, other.compared_with)
            if match is not None:
                return match, ""
            notes.append(f"no sample in common with the {other.against}'s outputs")
        elif other.reason:
            notes.append(other.reason)
    return None, NO_OTHER_SIDE + (f" ({'; '.join(notes)})" if notes else "")
