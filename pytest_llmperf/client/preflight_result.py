"""What one server answered at preflight, each question asked once.

Before the first run a session wants to know several things of each server:
whether it answers and which model it serves (``GET /v1/models``), what
software it is (``GET /version``), whether it exports counters
(``GET /metrics``). The identity, the fingerprint, the metrics source and the
tokenizer discovery each once asked these for themselves, so a server was
asked ``/v1/models`` three times and ``/version`` and ``/metrics`` twice before
the first request of a test. :class:`PreflightResult` holds the answers of one
preflight (:func:`~pytest_llmperf.client.preflight.preflight_server`), and
each of them reads what it needs from it instead of asking again.

An answer is kept as the metadata client settled it: an
:class:`~pytest_llmperf.client.metadata.Answer` (any status), or the
:class:`~pytest_llmperf.client.metadata.MetadataCallError` that ended the call
(a best-effort question: the reader words it as it always did). ``None``: not
asked (the reader asks for itself, as before).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TypeAlias

from pytest_llmperf.client.endpoint import Endpoint
from pytest_llmperf.client.metadata import Answer, MetadataCallError

__all__ = [
    "IDENTITY_LIMIT_S",
    "METRICS",
    "METRICS_LIMIT_S",
    "MODELS",
    "VERSION",
    "Outcome",
    "PreflightResult",
]

Outcome: TypeAlias = Answer | MetadataCallError

IDENTITY_LIMIT_S = 3.0  # GET /version: what the server is, best effort, no retry
METRICS_LIMIT_S = 5.0  # GET /metrics: retries of a 503 while a server warms up included

# How the readers name the calls (the fingerprint's notes): one name per question.
MODELS = "GET /v1/models"
VERSION = "GET /version"
METRICS = "GET /metrics"


@dataclass(frozen=True, slots=True)
class PreflightResult:
    """One endpoint's preflight: the endpoint it prepared and what the server answered.

    ``endpoint``: the model resolved, the request fields negotiated. ``models``:
    the ``GET /v1/models`` answer that proved a server is there (where the model
    was named, its body as far as it came: ``Read.HEAD_THEN_BODY``).
    ``version``: ``GET /version`` at the server's root (3 s, no retry).
    ``metrics``: ``GET /metrics`` at the server's root (5 s, retried), asked when
    the session scrapes the endpoint's own page.
    """

    endpoint: Endpoint
    models: Answer
    version: Outcome | None = None
    metrics: Outcome | None = None

    def answered(self) -> dict[str, Outcome]:
        """The questions asked, by call name (``"GET /version"``): what a reader replays."""
        asked: dict[str, Outcome | None] = {
            MODELS: self.models,
            VERSION: self.version,
            METRICS: self.metrics,
        }
        return {name: got for name, got in asked.items() if got is not None}
