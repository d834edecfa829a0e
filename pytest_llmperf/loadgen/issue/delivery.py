"""Where a finished request's record goes: the run's metrics, its event log, the observers.

Every issued request ends in exactly one record, delivered exactly once,
whether it completed, failed or was cut at the drain's cap; the issuing
side (the strategies of :mod:`~pytest_llmperf.loadgen.issue.strategies`) decides
*when*, this decides *where*. A closed loop counts latency from the actual send, so its
``t_sched`` becomes ``t_send`` here, before anything sees the record.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from pytest_llmperf.client.records import RequestRecord
from pytest_llmperf.results.accumulator import MetricsAccumulator
from pytest_llmperf.results.recorder import EventRecorder

__all__ = ["Delivery", "RecordObserver"]

RecordObserver = Callable[[RequestRecord], None]


class Delivery:
    """Feeds finished records to the accumulator, the event log (if any) and the observers.

    ``recorder`` is set once the run's event log is open; the log stores each
    record under its run position, remembered from :meth:`issued` until the
    record is delivered or discarded.
    """

    def __init__(
        self,
        accumulator: MetricsAccumulator,
        observers: Iterable[RecordObserver] = (),
        *,
        closed_loop: bool = False,
    ) -> None:
        self.accumulator = accumulator
        self.observers = list(observers)
        self.closed_loop = closed_loop
        self.recorder: EventRecorder | None = None
        self._positions: dict[int, int] = {}  # id(record) -> run position, for the event log

    def issued(self, record: RequestRecord, position: int) -> None:
        """Remember ``record``'s run position for the event log."""
        if self.recorder is not None:
            self._positions[id(record)] = position

    def conversation_ended(self, conversation: int) -> None:
        """Conversation ``conversation`` sends no more calls (each of its records delivered):
        its figures are folded and its calls dropped, so a long run's open conversations
        stay few."""
        self.accumulator.end_conversation(conversation)

    def deliver(self, record: RequestRecord) -> None:
        """The one delivery of a finished (or failed, or cut) request's record."""
        if self.closed_loop and record.t_send:
            record.t_sched = record.t_send  # closed loop: latency counts from the actual send
        self.accumulator.add(record)
        if self.recorder is not None:
            self.recorder.record(record, self._positions.pop(id(record), -1))
        for observer in self.observers:
            observer(record)

    def discard(self, record: RequestRecord) -> None:
        """Forget an untracked (warm-up) request cut at the end of the run."""
        self._positions.pop(id(record), None)
