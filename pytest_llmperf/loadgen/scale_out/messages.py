"""The messages between a run's parent and its workers (a closed set, so an enum).

A ``StrEnum``: each is equal to its word (``"stop"`` etc.), pickles across the
worker pipes, and names the Ray actor method that carries it (``stop``, ``abort``).
"""

from __future__ import annotations

from enum import StrEnum

__all__ = ["WorkerMessage"]


class WorkerMessage(StrEnum):
    """The first element of every tuple on a worker's pipes; the controls a Ray actor takes."""

    PAYLOAD = "payload"  # parent -> worker: the run's share to build
    READY = "ready"  # worker -> parent: built, its workload loaded
    GO = "go"  # parent -> worker: start at the common t0
    STOP = "stop"  # parent -> worker: stop issuing, drain, answer
    ABORT = "abort"  # parent -> worker: stop issuing and end the drain
    RESULT = "result"  # worker -> parent: its accumulator state and issue statistics
    ERROR = "error"  # worker -> parent: what stopped it
    TIMEOUT = "timeout"  # (the parent's own reading) no answer in time
    DIED = "died"  # (the parent's own reading) the worker's pipe closed
