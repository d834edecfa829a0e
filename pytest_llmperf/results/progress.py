"""A running run's progress as data: where it is and what it has done so far.

The load generator's timer (:mod:`pytest_llmperf.loadgen.progress`) writes these;
the terminal and CI lines (:mod:`pytest_llmperf.reports.live`, the plugin's sink)
read them, without importing the load generator.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Protocol

__all__ = ["Phase", "ProgressSink", "ProgressSnapshot"]


class Phase(StrEnum):
    """Where a run is (a ``StrEnum``: the rendered word)."""

    STARTING = "starting"  # resolving the model, opening connections
    WARMUP = "warm-up"  # untracked requests first (``warmup=``)
    MEASURE = "measure"  # the performance phase
    DRAIN = "drain"  # issuing is over; waiting for requests in flight
    REMOTE = "running"  # worker processes issue: no live counts in this process


@dataclass(frozen=True)
class ProgressSnapshot:
    """One look at a running run; every field is what the run knew at that moment.

    ``done``/``planned`` count tracked requests finished (completed, failed or
    cut) out of those planned, or warm-up requests sent during
    :attr:`Phase.WARMUP`; ``planned`` is None for a timed run (``planned_s``
    then says how long issuing lasts). ``rate`` is requests finished per
    second over the last :data:`RATE_WINDOW_S` seconds (None before any
    sample), ``stage`` is 1-based (0 without stages), ``eta_s`` None when
    unknown. ``errors`` counts failed requests, ``blank`` completed ones with no
    visible text (generated but blank), ``invalid`` completed ones whose output failed
    its check (``structured=``, ``tools=``: ``record.invalid``).
    """

    label: str
    phase: Phase
    elapsed_s: float
    done: int = 0
    planned: int | None = None
    planned_s: float | None = None
    measure_s: float = 0.0
    rate: float | None = None
    in_flight: int = 0
    errors: int = 0
    blank: int = 0
    invalid: int = 0
    eta_s: float | None = None
    stage: int = 0
    stages: int = 0
    workers: int = 1


class ProgressSink(Protocol):
    """Where snapshots go: ``every_s`` between them, :meth:`show` each, :meth:`end` once."""

    every_s: float

    def show(self, snapshot: ProgressSnapshot) -> None: ...

    def end(self) -> None: ...
