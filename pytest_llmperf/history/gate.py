"""Gate against history: ``--llm-baseline-compare=history[:N]``.

Each gated run of a test is judged against the merged accumulators of the
last ``N`` (default 5) comparable runs in the ``--llm-history`` store: the
same test and comparison key (endpoint model and API, load, workload less
its size keys, its tokenizer by identity:
:func:`~pytest_llmperf.history.records.comparison_key`).
Merging is exact (HDR histograms add bucket by bucket, as a session group's
do), and the judgement is the baseline file's: beyond the threshold
(``--llm-baseline-threshold``) and significant
(:func:`~pytest_llmperf.slo.regression.compare_accumulators`).

Only sessions stored before this one count: the gate notes the store's last
session id when it opens (at configure time) and reads nothing newer, so a
rerun of a test, or a parallel job that finishes meanwhile, never becomes
its own baseline. Fewer than ``N`` comparable runs: compared with what there
is; none: ``no history yet``, an inconclusive check like a test missing from a
baseline file, which follows ``--llm-inconclusive`` (fails by default: nothing was
judged; a first session seeds the store with ``--llm-inconclusive=warn``). Runs
stored before tokenizers were compared by identity are found by their old key.

Server fingerprints (:mod:`pytest_llmperf.server_metrics.fingerprint`): once the
plugin hands the gate this session's (:meth:`HistoryGate.check_comparability`),
every comparison says whether the stored runs it merged were measured on the
same server configuration and machine: ``comparable`` false and ``differs``
when any of their sessions' fingerprints differs (each difference once), null
when one of them has none stored (sessions stored before fingerprints) and none
differs. ``--llm-baseline-strict`` never compares across fingerprints: runs of
sessions with another fingerprint are left out of the merge (the last ``N``
that remain, looked for among the last ``4N`` comparable runs); none left is
the inconclusive note, naming what differs. The session-level answer compares
with the newest stored session's fingerprint and never raises: which runs
count is decided per test.

``output_match`` (greedy outputs): :meth:`HistoryGate.other_outputs` gives the
newest comparable run of the test (among the last :data:`OUTPUT_RUNS`) whose test
passed and which kept outputs: the last good run.

The server process's values (schema 5: ``startup.ready_s``, ``server.rss_max_mb``, …)
of the same runs are compared as one value per side: each metric's median over the
runs that stored it (:mod:`pytest_llmperf.slo.startup_regression`); the GPUs' figures
(kept in the runs' metrics by name) likewise, each its median over the runs that have it
(:mod:`pytest_llmperf.slo.gpu_regression`, where ``--llm-baseline-threshold`` names them).
"""

from __future__ import annotations

import re
import statistics
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager
from typing import Any, Protocol

from pytest_llmperf.errors import LlmPerfUsageError
from pytest_llmperf.history.records import (
    StoredRun,
    comparison_key,
    gpu_block_values,
    process_block,
)
from pytest_llmperf.results.accumulator import MetricsAccumulator
from pytest_llmperf.results.run_result import RunResult
from pytest_llmperf.server_metrics.fingerprint import (
    comparability,
    comparability_text,
    fingerprint_diff,
)
from pytest_llmperf.slo.comparison import BaselineSource, Reference
from pytest_llmperf.slo.output_match import MatchedAgainst, OtherOutputs, outputs_of_state
from pytest_llmperf.specs.process_names import PROCESS_METRICS

__all__ = [
    "DEFAULT_HISTORY_RUNS",
    "HistoryGate",
    "describe_runs",
    "open_history_gate",
    "parse_history_compare",
]

DEFAULT_HISTORY_RUNS = 5
OUTPUT_RUNS = 20  # output_match: the last good run is looked for among this many
STRICT_WINDOW = 4  # --llm-baseline-strict: same-fingerprint runs among the last 4N
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
        self.current_fingerprint: dict[str, Any] | None = None  # this session's
        self.strict = False  # --llm-baseline-strict: never merge across fingerprints
        self._differs: dict[str, str] = {}  # nodeid -> "NOT COMPARABLE, …" for describe()

    @classmethod
    def open(cls, target: str, n: int) -> HistoryGate:
        """The gate over the store at ``target`` (opened now to check it and note its last
        session; each comparison opens it again, briefly)."""
        from pytest_llmperf.history.store import HistoryStore

        with HistoryStore.open(target) as store:
            sessions = store.sessions()
            where = store.where
        last = sessions[-1] if sessions else None
        latest = (
            {
                "started_at": last.started_at,
                "endpoint": last.endpoint,
                "fingerprint": last.fingerprint,
            }
            if last
            else None
        )
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

    @property
    def fingerprint(self) -> dict[str, Any] | None:
        """The newest stored session's fingerprint (None: none, or stored without one)."""
        found = self._latest.get("fingerprint")
        return dict(found) if isinstance(found, dict) and found else None

    def check_comparability(
        self, current: Mapping[str, Any] | None, *, strict: bool = False
    ) -> dict[str, Any]:
        """Note this session's fingerprint for every comparison to come, and compare it
        with the newest stored session's (``{"comparable", "differs", "note"}``); never
        raises: with ``strict``, runs of other fingerprints are left out per test."""
        self.current_fingerprint = dict(current) if current else None
        self.strict = strict
        result = comparability(
            self.fingerprint, current, source=f"the newest session in {self.where}"
        )
        if strict and result["comparable"] is False:
            result["note"] += (
                "; --llm-baseline-strict: only runs of sessions with this session's "
                "fingerprint are compared"
            )
        return result

    def describe(self, nodeid: str) -> str:
        """What ``nodeid``'s runs were compared with, for the failure message."""
        by_run = self._described.get(nodeid, {})
        texts = sorted(set(by_run.values()))
        differs = self._differs.get(nodeid, "")
        tail = f", {differs}" if differs else ""
        if not texts:
            return self.path + tail
        if len(texts) == 1:
            return f"{texts[0]} in {self.where}{tail}"
        runs = "; ".join(f"[{run}] {text}" for run, text in by_run.items())
        return f"{runs} in {self.where}{tail}"

    def references(
        self, nodeid: str, results: Sequence[RunResult], endpoint: Mapping[str, Any]
    ) -> Iterator[Reference]:
        """Each run against its last ``n`` comparable stored runs, merged (the store open
        while it yields)."""
        described = self._described.setdefault(nodeid, {})
        current = self.current_fingerprint
        strict = self.strict and current is not None
        window = self.n * STRICT_WINDOW if strict else self.n
        with self._open() as store:
            for result in results:
                runs = _comparable(store, nodeid, endpoint, result, window, self.before_session)
                left_out: list[str] = []
                if strict and current is not None:
                    found = [(r, _differs(r, current)) for r in runs]
                    left_out = _union(d for _, d in found)
                    runs = [r for r, d in found if not d][-self.n :]
                if not runs:
                    reason = (
                        f"no history yet: no earlier comparable run of {nodeid} "
                        f"[{result.label}] in {self.where} (same model, API, load and "
                        "workload)"
                    )
                    if left_out:
                        reason = (
                            f"no earlier run of {nodeid} [{result.label}] in {self.where} "
                            "was measured with this session's server fingerprint "
                            f"(--llm-baseline-strict; the others differ: {'; '.join(left_out)})"
                        )
                    yield Reference(f"history (0 of {self.n} runs)", reason=reason)
                    continue
                merged = MetricsAccumulator()
                for run in runs:
                    merged.merge(run.accumulator())
                described[result.label] = what = describe_runs(runs, self.n)
                marks = _runs_comparability(runs, current)
                if marks is not None and marks["comparable"] is False:
                    self._differs[nodeid] = comparability_text(marks)
                yield Reference(
                    what,
                    merged,
                    comparability=marks,
                    server_process=_median_process(runs),
                    gpu=_median_gpu(runs),
                )

    def other_outputs(
        self, nodeid: str, result: RunResult, endpoint: Mapping[str, Any]
    ) -> OtherOutputs:
        """The greedy outputs of the last good comparable run of ``nodeid`` (its test
        passed and it kept outputs); empty, with the reason, when there is none."""
        with self._open() as store:
            runs = _comparable(store, nodeid, endpoint, result, OUTPUT_RUNS, self.before_session)
        for run in reversed(runs):
            if run.outcome != "passed":
                continue
            outputs = outputs_of_state(run.state())
            if outputs:
                what = f"history ({run.tag or f'session {run.session_id}'}, {run.when})"
                return OtherOutputs(outputs, MatchedAgainst.HISTORY, what)
        reason = (
            f"no earlier passed run of {nodeid} [{result.label}] in {self.where} kept greedy "
            "outputs (same model, API, load and workload)"
        )
        return OtherOutputs(outputs_of_state(None), MatchedAgainst.HISTORY, reason=reason)


def _comparable(
    store: _Store,
    nodeid: str,
    endpoint: Mapping[str, Any],
    result: RunResult,
    n: int,
    before_session: int | None,
) -> list[StoredRun]:
    """The last ``n`` stored runs of ``nodeid`` comparable with ``result``: by its
    comparison key, else (none) by the key runs were stored under before tokenizers
    were keyed by identity."""
    model, api = endpoint.get("model"), endpoint.get("api")
    for legacy in (False, True):
        key = comparison_key(model, api, result.load, result.workload, legacy=legacy)
        runs = store.comparable(nodeid, key, n, before_session=before_session)
        if runs:
            return runs
    return []


def _differs(run: StoredRun, current: Mapping[str, Any]) -> list[str]:
    """What differs from ``run``'s session's fingerprint to ``current`` (none when the
    session stored no fingerprint: unknown is not different)."""
    return fingerprint_diff(run.fingerprint, current) if run.fingerprint else []


def _union(lists: Iterable[list[str]]) -> list[str]:
    out: list[str] = []
    for found in lists:
        out += [d for d in found if d not in out]
    return out


def _runs_comparability(
    runs: Sequence[StoredRun], current: Mapping[str, Any] | None
) -> dict[str, Any] | None:
    """``comparable``/``differs`` of a merge of ``runs`` against ``current``: false when a
    session's fingerprint differs, null when one has none stored, else true; None when
    this session's fingerprint is not known."""
    if current is None:
        return None
    differs = _union(_differs(r, current) for r in runs)
    if differs:
        return {"comparable": False, "differs": differs}
    if any(not r.fingerprint for r in runs):
        return {"comparable": None, "differs": [], "note": "no fingerprint stored"}
    return {"comparable": True, "differs": []}


def _median_process(runs: Sequence[StoredRun]) -> dict[str, Any] | None:
    """The server process's values of the stored ``runs`` as one block: each metric's
    median over the runs that have it (one value per run, so the merged reference of a
    startup time is its median), None when none of them stored any."""
    values: dict[str, list[float]] = {}
    for run in runs:
        for name in PROCESS_METRICS:
            value = run.value(name)
            if value is not None:
                values.setdefault(name, []).append(value)
    if not values:
        return None
    return process_block({name: statistics.median(vs) for name, vs in values.items()})


def _median_gpu(runs: Sequence[StoredRun]) -> dict[str, float] | None:
    """The GPUs' figures of the stored ``runs``, each its median over the runs that kept
    it (one value per run, as the server process's), None when none kept any."""
    values: dict[str, list[float]] = {}
    for run in runs:
        for name, value in (gpu_block_values(run.metrics) or {}).items():
            values.setdefault(name, []).append(value)
    return {name: statistics.median(vs) for name, vs in values.items()} or None
