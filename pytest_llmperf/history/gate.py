"""Gate against history: ``--llm-baseline-compare=history[:N]``.

Each gated run of a test is judged against the merged accumulators of the
last ``N`` (default 5) comparable runs in the ``--llm-history`` store: the
same test and comparison key (endpoint model and API, load, workload less
its size keys: :func:`~pytest_llmperf.history.records.comparison_key`).
Merging is exact (HDR histograms add bucket by bucket, as a session group's
do), and the judgement is the baseline file's: beyond the threshold
(``--llm-baseline-threshold``) and significant
(:func:`~pytest_llmperf.slo.regression.compare_accumulators`).

Only sessions stored before this one count: the gate notes the store's last
session id when it opens (at configure time) and reads nothing newer, so a
rerun of a test, or a parallel job that finishes meanwhile, never becomes
its own baseline. Fewer than ``N`` comparable runs: compared with what there
is; none: ``no history yet``, an inconclusive note (never a failure), like a
test missing from a baseline file.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager
from typing import Any, Protocol

from pytest_llmperf.errors import LlmPerfUsageError
from pytest_llmperf.history.records import StoredRun, comparison_key
from pytest_llmperf.loadgen.result import RunResult
from pytest_llmperf.metrics.accumulator import MetricsAccumulator
from pytest_llmperf.slo.comparison import BaselineSource, Reference

__all__ = [
    "DEFAULT_HISTORY_RUNS",
    "HistoryGate",
    "describe_runs",
    "open_history_gate",
    "parse_history_compare",
]

DEFAULT_HISTORY_RUNS = 5
_OPTION = "--llm-baseline-compare"
_SPEC = re.compile(r"^history(?::(?P<n>.*))?$")


class _Store(Protocol):
    """What the gate reads from :class:`~pytest_llmperf.history.store.HistoryStore`."""

    where: str

    def comparable(
        self, test: str, key: str, n: int, before_session: int | None = None
    ) -> list[StoredRun]: ...


StoreOpener = Callable[[], AbstractContextManager[_Store]]


def parse_history_compare(value: str | None) -> int | None:
    """``N`` for ``history`` (5) or ``history:N`` (N >= 1); None for anything else (a
    baseline file's path). A bad ``N`` is a usage error naming the option and value."""
    if value is None:
        return None
    m = _SPEC.match(value.strip())
    if not m:
        return None
    text = m["n"]
    if text is None:
        return DEFAULT_HISTORY_RUNS
    try:
        n = int(text.strip())
    except ValueError:
        n = 0
    if n < 1:
        raise LlmPerfUsageError(
            f"bad value {value!r}: the number of runs must be an integer >= 1 "
            f"(e.g. history:{DEFAULT_HISTORY_RUNS})",
            where=_OPTION,
        )
    return n


def open_history_gate(compare: str, *, history: str | None) -> HistoryGate:
    """The gate ``--llm-baseline-compare=history[:N]`` asks for (it needs
    ``--llm-history``); usage errors name the option and the bad value."""
    n = parse_history_compare(compare)
    if n is None:
        raise LlmPerfUsageError(f"{compare!r} is not history or history:N", where=_OPTION)
    if not history:
        raise LlmPerfUsageError(
            f"{compare!r} compares with the history store: give --llm-history=PATH|URL too",
            where=_OPTION,
        )
    return HistoryGate.open(history, n)


def describe_runs(runs: Sequence[StoredRun], n: int) -> str:
    """``history (last 3 runs, tags main@1a2b3c4, main@5d6e7f8)``: what a run was judged
    against (tags once each, oldest first; a session without a tag by its id)."""
    tags: list[str] = []
    for run in runs:
        tag = run.tag or f"session {run.session_id}"
        if tag not in tags:
            tags.append(tag)
    count = f"last {len(runs)} run{'s' if len(runs) != 1 else ''}"
    if len(runs) < n:
        count += f" of {n} wanted"
    return f"history ({count}, tag{'s' if len(tags) != 1 else ''} {', '.join(tags)})"


class HistoryGate(BaselineSource):
    """The history as a baseline: the same ``compare`` as a baseline file's
    (:class:`~pytest_llmperf.slo.comparison.BaselineSource`), run by run against the
    history.

    ``path``, ``created_at`` and ``endpoint`` describe the comparison for the session's
    report (the store, the newest session before this one and its endpoint);
    :meth:`describe` says, per test, which stored runs were compared with.
    """

    def __init__(
        self,
        opener: StoreOpener,
        where: str,
        n: int,
        *,
        before_session: int | None,
        latest: Mapping[str, Any] | None = None,
    ) -> None:
        self._open = opener
        self.where = where
        self.n = n
        self.before_session = before_session  # only sessions with a smaller id count
        self._latest = dict(latest or {})
        self.path = f"history (last {n} comparable runs in {where})"
        self._described: dict[str, dict[str, str]] = {}

    @classmethod
    def open(cls, target: str, n: int) -> HistoryGate:
        """The gate over the store at ``target`` (opened now to check it and note its last
        session; each comparison opens it again, briefly)."""
        from pytest_llmperf.history.store import HistoryStore

        with HistoryStore.open(target) as store:
            sessions = store.sessions()
            where = store.where
        last = sessions[-1] if sessions else None
        latest = {"started_at": last.started_at, "endpoint": last.endpoint} if last else None
        return cls(
            lambda: HistoryStore.open(target),
            where,
            n,
            before_session=(last.id + 1) if last else 0,
            latest=latest,
        )

    @property
    def created_at(self) -> str:
        return str(self._latest.get("started_at") or "")

    @property
    def endpoint(self) -> dict[str, Any]:
        return dict(self._latest.get("endpoint") or {})

    def describe(self, nodeid: str) -> str:
        """What ``nodeid``'s runs were compared with, for the failure message."""
        by_run = self._described.get(nodeid, {})
        texts = sorted(set(by_run.values()))
        if not texts:
            return self.path
        if len(texts) == 1:
            return f"{texts[0]} in {self.where}"
        return "; ".join(f"[{run}] {text}" for run, text in by_run.items()) + f" in {self.where}"

    def references(
        self, nodeid: str, results: Sequence[RunResult], endpoint: Mapping[str, Any]
    ) -> Iterator[Reference]:
        """Each run against its last ``n`` comparable stored runs, merged (the store open
        while it yields)."""
        described = self._described.setdefault(nodeid, {})
        with self._open() as store:
            for result in results:
                key = comparison_key(
                    endpoint.get("model"), endpoint.get("api"), result.load, result.workload
                )
                runs = store.comparable(nodeid, key, self.n, before_session=self.before_session)
                if not runs:
                    yield Reference(
                        f"history (0 of {self.n} runs)",
                        reason=f"no history yet: no earlier comparable run of {nodeid} "
                        f"[{result.label}] in {self.where} (same model, API, load and "
                        "workload)",
                    )
                    continue
                merged = MetricsAccumulator()
                for run in runs:
                    merged.merge(run.accumulator())
                described[result.label] = what = describe_runs(runs, self.n)
                yield Reference(what, merged)
