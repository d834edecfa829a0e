"""Memory-pressure behaviour: completion and preemption as load oversubscribes the server.

The draft's procedure runs at concurrency above the server's capacity
(110%, 125%, 150%, ...) and reports completion, preemption and failure
rates. Completion and failures come from the runs; preemptions come from
the server's ``vllm:num_preemptions_total`` counter (scraped before and
after each level) — the client cannot see them. The counter gives
*preemption events per request*, an upper bound on the draft's "fraction
of requests preempted at least once" (a request can be preempted twice).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, Unpack

from pytest_llmperf.analysis.server_metrics import (
    KV_USAGE,
    PREEMPTIONS,
    counter_deltas,
    scrape_metrics,
)
from pytest_llmperf.client.endpoint import Endpoint
from pytest_llmperf.results.run_result import RunResult
from pytest_llmperf.specs.load import LoadPattern
from pytest_llmperf.specs.run import LevelOverrides

__all__ = ["PressureLevel", "RunsLoad", "memory_pressure", "memory_pressure_table"]


class RunsLoad(Protocol):
    """What :func:`memory_pressure` needs of a load generator (``llm_loadgen`` is one):
    analyses sit below the load generator and so name only its shape."""

    @property
    def endpoint(self) -> Endpoint: ...

    @property
    def run(self) -> Callable[..., Awaitable[RunResult]]: ...

    def attach(self, analysis: Mapping[str, Any]) -> None: ...


@dataclass
class PressureLevel:
    """One oversubscription level: its run and the server counters it moved."""

    label: str
    concurrency: int
    result: RunResult
    counters: dict[str, float] | None
    kv_usage_after: float | None = None

    @property
    def preemptions(self) -> float | None:
        if self.counters is None:
            return None
        return self.counters.get(PREEMPTIONS)


async def memory_pressure(
    gen: RunsLoad,
    *,
    capacity: int,
    levels: Sequence[float] = (1.0, 1.1, 1.25, 1.5),
    attach: bool = True,
    **overrides: Unpack[LevelOverrides],
) -> list[PressureLevel]:
    """Run closed-loop at ``capacity x level`` for each level; ungated runs, one table attached."""
    out: list[PressureLevel] = []
    for level in levels:
        concurrency = max(1, round(capacity * level))
        before = await scrape_metrics(gen.endpoint)
        result = await gen.run(
            gate=False,
            label=f"oversubscription {level:.0%} (concurrency {concurrency})",
            pattern=LoadPattern.CONCURRENCY,
            concurrency=concurrency,
            **overrides,
        )
        after = await scrape_metrics(gen.endpoint)
        out.append(
            PressureLevel(
                label=f"{level:.0%}",
                concurrency=concurrency,
                result=result,
                counters=counter_deltas(before, after),
                kv_usage_after=None if after is None else after.get(KV_USAGE),
            )
        )
    if attach:
        gen.attach(memory_pressure_table(out))
    return out


def memory_pressure_table(levels: Sequence[PressureLevel]) -> dict[str, Any]:
    rows = []
    for level in levels:
        counts = level.result.counts
        issued = max(1, counts["issued"])
        preempt = level.preemptions
        p99 = level.result.histogram("ttft").p(99)
        rows.append(
            [
                level.label,
                level.concurrency,
                counts["issued"],
                round(counts["completed"] / issued, 4),
                round(counts["failed"] / issued, 4),
                None if preempt is None else int(preempt),
                None if preempt is None else round(preempt / issued, 4),
                None if p99 != p99 else round(p99, 3),
            ]
        )
    exposed = any(level.counters is not None for level in levels)
    return {
        "title": "Memory pressure: completion and preemption under oversubscription"
        + ("" if exposed else " (server exposes no /metrics: preemptions unknown)"),
        "kind": "table",
        "columns": [
            "oversubscription",
            "concurrency",
            "issued",
            "completion",
            "fail rate",
            "preemptions",
            "preemptions per request",
            "ttft p99",
        ],
        "rows": rows,
    }
