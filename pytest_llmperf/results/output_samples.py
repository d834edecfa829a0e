"""A few distinct reasons why outputs failed their check, with how often each came.

``counts.invalid`` says *that* outputs were invalid; the user needs to know *why*
(``schema: $.title: 'x' is too long``) without re-running anything. Like
:mod:`~pytest_llmperf.results.error_samples`, each run keeps the first
:data:`MAX_SAMPLES` distinct ``(kind, message)`` pairs with their counts (later
distinct messages are only counted), so memory stays bounded however long the run.
``kind`` is a :class:`~pytest_llmperf.client.output_check.InvalidKind` value
(``not_json``, ``schema``, ``no_tool_call``, ``unknown_tool``, ``tool_arguments``),
the message the validator's, cut to :data:`MAX_MESSAGE` characters. A message may end
in an example of the output after :data:`EXAMPLE_SEP` (``the answer is not JSON:
Unterminated string starting at; e.g. line 1 column 9: '{"city": "imb...'``): the
reasons are grouped by what comes before it, each shown with its first example, so
outputs that fail the same way count as one reason, not one each.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from pytest_llmperf.client.output_check import EXAMPLE_SEP

__all__ = ["EXAMPLE_SEP", "MAX_MESSAGE", "MAX_SAMPLES", "InvalidSamples"]

MAX_SAMPLES = 5
MAX_MESSAGE = 300


class InvalidSamples:
    """Distinct invalid-output reasons with their counts, in first-seen order."""

    def __init__(self) -> None:
        # (kind, reason without its example) -> [count, the first message, example included]
        self._counts: dict[tuple[str, str], list[Any]] = {}

    def add(self, kind: str, message: str, count: int = 1) -> None:
        message = message[:MAX_MESSAGE]
        key = (kind, message.split(EXAMPLE_SEP, 1)[0])
        seen = self._counts.get(key)
        if seen is not None:
            seen[0] += count
        elif len(self._counts) < MAX_SAMPLES:
            self._counts[key] = [count, message]

    def merge(self, other: InvalidSamples) -> None:
        for (kind, _reason), (count, message) in other._counts.items():
            self.add(kind, message, count)

    def __bool__(self) -> bool:
        return bool(self._counts)

    def to_list(self) -> list[dict[str, Any]]:
        """The report's ``invalid_samples``: ``[{"kind", "message", "count"}]``, most
        frequent first."""
        ordered = sorted(self._counts.items(), key=lambda kv: -kv[1][0])
        return [
            {"kind": kind, "message": message, "count": count}
            for (kind, _reason), (count, message) in ordered
        ]

    def to_state(self) -> list[dict[str, Any]]:
        return self.to_list()

    @classmethod
    def from_state(cls, state: Iterable[Mapping[str, Any]]) -> InvalidSamples:
        samples = cls()
        for item in state:
            samples.add(str(item["kind"]), str(item["message"]), int(item["count"]))
        return samples
