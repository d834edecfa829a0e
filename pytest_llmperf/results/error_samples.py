"""A few distinct failures of a run, in the server's own words.

A count per error kind says *that* requests failed (``http_error 12``); the
user needs to know *why* (``HTTP 422: body.ignore_eos: Extra inputs are not
permitted``) without digging through logs. So each run keeps the first
:data:`MAX_SAMPLES` distinct ``(kind, status, message)`` triples with how
often each came; later distinct messages are only counted in ``errors``, so
memory stays bounded whatever the run's length. Messages arrive already
scrubbed of secrets (:func:`pytest_llmperf.client.request.send_request`)
and are cut to :data:`MAX_MESSAGE` characters.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

__all__ = ["MAX_MESSAGE", "MAX_SAMPLES", "ErrorSamples"]

MAX_SAMPLES = 5
MAX_MESSAGE = 300

_Key = tuple[str, int | None, str]


class ErrorSamples:
    """Distinct failure messages with their counts, in first-seen order."""

    def __init__(self) -> None:
        self._counts: dict[_Key, int] = {}

    def add(self, kind: str, status: int | None, message: str, count: int = 1) -> None:
        prefix = f"HTTP {status}: "  # the failure detail's own prefix; status is a column here
        if status is not None and message.startswith(prefix):
            message = message[len(prefix) :]
        key = (kind, status, message[:MAX_MESSAGE])
        if key in self._counts:
            self._counts[key] += count
        elif len(self._counts) < MAX_SAMPLES:
            self._counts[key] = count

    def merge(self, other: ErrorSamples) -> None:
        for (kind, status, message), count in other._counts.items():
            self.add(kind, status, message, count)

    def __bool__(self) -> bool:
        return bool(self._counts)

    def to_list(self) -> list[dict[str, Any]]:
        """The report's ``error_samples``: most frequent first."""
        ordered = sorted(self._counts.items(), key=lambda kv: -kv[1])
        return [
            {"kind": kind, "status": status, "message": message, "count": count}
            for (kind, status, message), count in ordered
        ]

    def to_state(self) -> list[dict[str, Any]]:
        return self.to_list()

    @classmethod
    def from_state(cls, state: Iterable[Mapping[str, Any]]) -> ErrorSamples:
        samples = cls()
        for item in state:
            samples.add(
                str(item["kind"]), item.get("status"), str(item["message"]), int(item["count"])
            )
        return samples
