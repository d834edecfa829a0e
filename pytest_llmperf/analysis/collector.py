"""Per-request rows for the analyses that aggregate histograms cannot answer.

The metrics accumulator keeps histograms only (bounded memory whatever the
run length); the draft's per-request analyses — TTFT by input length, jitter
per request, per-class fairness, cached-token share — need one small row per
request. :class:`RequestCollector` is a load-generator observer that keeps
such a row (a few numbers, never the text) for up to ``max_rows`` requests
and counts the rest as dropped, so memory stays bounded too.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Protocol

from pytest_llmperf.client.records import ErrorKind, RequestRecord

__all__ = ["DEFAULT_MAX_ROWS", "RequestCollector", "RequestRow", "collect"]

DEFAULT_MAX_ROWS = 200_000


@dataclass(frozen=True, slots=True)
class RequestRow:
    """One finished request, in milliseconds and tokens.

    ``ttft_ms``/``e2e_ms`` count from the planned send time (as the run's
    metrics do); they and the ITL fields are ``None`` for failed requests.
    ``input_tokens`` is the server's ``usage.prompt_tokens`` when reported,
    else the workload's stated size; ``cached_tokens`` is the server's
    ``prompt_tokens_details.cached_tokens`` when reported.
    """

    index: int
    category: str
    ok: bool
    error: ErrorKind | None
    ttft_ms: float | None
    e2e_ms: float | None
    output_tokens: int
    input_tokens: int | None
    cached_tokens: int | None
    itl_count: int
    itl_mean_ms: float | None
    itl_std_ms: float | None
    itl_max_ms: float | None

    @property
    def tpot_ms(self) -> float | None:
        if self.ttft_ms is None or self.e2e_ms is None or self.output_tokens < 2:
            return None
        return (self.e2e_ms - self.ttft_ms) / (self.output_tokens - 1)


class _HasObservers(Protocol):
    observers: list[Callable[[RequestRecord], None]]


def _row(record: RequestRecord, input_tokens: int | None) -> RequestRow:
    gaps = record.gaps_ns
    ok = record.ok and record.t_first > 0
    itl_mean = itl_std = itl_max = None
    if ok and gaps:
        mean = sum(gaps) / len(gaps)
        var = sum((g - mean) ** 2 for g in gaps) / len(gaps)
        itl_mean, itl_std, itl_max = mean / 1e6, math.sqrt(var) / 1e6, max(gaps) / 1e6
    return RequestRow(
        index=record.index,
        category=record.category,
        ok=ok,
        error=record.error,
        ttft_ms=(record.t_first - record.t_sched) / 1e6 if ok else None,
        e2e_ms=(record.t_last - record.t_sched) / 1e6 if ok else None,
        output_tokens=record.output_tokens,
        input_tokens=record.usage_prompt_tokens
        if record.usage_prompt_tokens is not None
        else input_tokens,
        cached_tokens=record.usage_cached_tokens,
        itl_count=len(gaps) if ok else 0,
        itl_mean_ms=itl_mean,
        itl_std_ms=itl_std,
        itl_max_ms=itl_max,
    )


class RequestCollector:
    """An observer (``callable(record)``) that keeps a :class:`RequestRow` per tracked request.

    ``input_tokens(index)`` gives a request's planned input size when the
    server reports no ``usage`` (e.g. ``workload.sample(i).input_tokens``).
    Warm-up requests (untracked) are skipped unless ``include_untracked``.
    """

    def __init__(
        self,
        *,
        max_rows: int = DEFAULT_MAX_ROWS,
        include_untracked: bool = False,
        input_tokens: Callable[[int], int] | None = None,
    ) -> None:
        self.rows: list[RequestRow] = []
        self.dropped = 0
        self.max_rows = max_rows
        self.include_untracked = include_untracked
        self._input_tokens = input_tokens

    def __call__(self, record: RequestRecord) -> None:
        if not (record.tracked or self.include_untracked):
            return
        if len(self.rows) >= self.max_rows:
            self.dropped += 1
            return
        planned = None
        if record.usage_prompt_tokens is None and self._input_tokens is not None:
            planned = self._input_tokens(record.index)
        self.rows.append(_row(record, planned))

    def __len__(self) -> int:
        return len(self.rows)

    @property
    def ok_rows(self) -> list[RequestRow]:
        return [r for r in self.rows if r.ok]

    def by_category(self) -> dict[str, list[RequestRow]]:
        out: dict[str, list[RequestRow]] = {}
        for row in self.rows:
            out.setdefault(row.category or "(none)", []).append(row)
        return out

    def clear(self) -> None:
        self.rows.clear()
        self.dropped = 0

    @contextmanager
    def observing(self, generator: _HasObservers) -> Iterator[RequestCollector]:
        """Receive the records of the runs made inside the ``with`` block."""
        generator.observers.append(self)
        try:
            yield self
        finally:
            generator.observers.remove(self)


@contextmanager
def collect(
    generator: _HasObservers,
    *,
    max_rows: int = DEFAULT_MAX_ROWS,
    include_untracked: bool = False,
    input_tokens: Callable[[int], int] | None = None,
) -> Iterator[RequestCollector]:
    """``with collect(llm_loadgen) as requests: await llm_loadgen.run()`` -> per-request rows.

    When the server reports no ``usage``, input sizes come from ``input_tokens``,
    else from the test's declared workload (``generator.spec.run.workload``). The
    other options are :class:`RequestCollector`'s.
    """
    workload = getattr(getattr(getattr(generator, "spec", None), "run", None), "workload", None)
    if input_tokens is None and workload is not None:

        def planned(index: int) -> int:
            return int(workload.sample(index).input_tokens)

        input_tokens = planned
    collector = RequestCollector(
        max_rows=max_rows, include_untracked=include_untracked, input_tokens=input_tokens
    )
    with collector.observing(generator):
        yield collector
