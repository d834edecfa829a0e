"""The load generator as a test sees it: configured from markers, run on demand.

``await gen.run()`` runs the test's declared workload and load; keyword
overrides change one run (a sweep calls ``run(rate=r)`` per rate). Every
result is kept in :attr:`LoadGenerator.results` so the test's SLOs can be
judged on all of them after the test body returns.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from pytest_llmperf.client.endpoint import Endpoint
from pytest_llmperf.config import PerfSpec, RunSpec
from pytest_llmperf.loadgen.result import RunResult
from pytest_llmperf.loadgen.session import LoadRun, RecordObserver, events_file_for
from pytest_llmperf.slo.verdicts import request_limits
from pytest_llmperf.workloads.tokenizer import Tokenizer, bind_api, resolve_tokenizer

__all__ = ["LoadGenerator"]


class LoadGenerator:
    """Runs a :class:`PerfSpec` against an endpoint and keeps the results."""

    def __init__(
        self,
        endpoint: Endpoint,
        spec: PerfSpec,
        *,
        scale: float = 1.0,
        observers: Iterable[RecordObserver] = (),
        on_result: Callable[[RunResult], None] | None = None,
        events_dir: str | Path | None = None,
        events_name: str = "",
        workers: int = 1,
        tokenizer: Tokenizer | None = None,
    ) -> None:
        self.endpoint = endpoint
        self.spec = spec
        self.scale = scale
        self.events_dir = events_dir  # --llm-events: one SQLite event log per run
        self.events_name = events_name
        self.workers = workers  # --llm-workers
        self.tokenizer = tokenizer  # --llm-tokenizer: sizes every run's workload but named ones
        self.observers = list(observers)
        self.on_result = on_result
        self.results: list[RunResult] = []
        self.analyses: list[dict[str, Any]] = []
        self._current: LoadRun | None = None

    async def run(
        self, *, gate: bool = True, label: str | None = None, **overrides: Any
    ) -> RunResult:
        """Run the declared workload and load once, with ``overrides`` applied.

        ``gate=False`` keeps the run in reports but out of the test's SLO
        verdicts (probe runs of a search, warm-up runs).
        """
        run_spec = self.spec.run.with_overrides(overrides).scaled(self.scale)
        run_spec = _sized_by(run_spec, self.tokenizer, self.endpoint.api)
        label = label or _label(len(self.results), overrides)
        run = LoadRun(
            self.endpoint,
            run_spec,
            request_limits_ms=request_limits(self.spec.slos),
            observers=self.observers,
            label=label,
            events_path=(
                events_file_for(self.events_dir, f"{self.events_name}-{label}")
                if self.events_dir
                else None
            ),
            workers=self.workers,
        )
        self._current = run
        try:
            result = await run.execute()
        finally:
            self._current = None
        self.endpoint = run.endpoint  # keeps the resolved model for later runs
        result.gated = gate
        self.results.append(result)
        if self.on_result:
            self.on_result(result)
        if result.stop_reason == "SIGINT":
            # The run drained gracefully and its result is kept; now stop the session.
            raise KeyboardInterrupt
        return result

    def attach(self, analysis: Mapping[str, Any]) -> None:
        """Add a table or curve to this test's reports (JSON ``analyses``, HTML).

        ``analysis`` is plain JSON: ``{"title": str, "kind": "table" | "curve",
        "columns": [str, ...], "rows": [[value, ...], ...]}``; a curve also names
        ``"x"`` (a column) and ``"y"`` (a list of columns) to plot.
        """
        self.analyses.append(dict(analysis))

    def stop(self) -> None:
        """Stop issuing in the current run (it still drains and returns its result)."""
        if self._current is not None:
            self._current.stop()

    # -- the methodology's sweeps and searches (logic in loadgen/sweeps.py) ------

    async def sweep(self, rates: Iterable[float], **options: Any) -> Any:
        """Latency-vs-load curve over offered ``rates`` with knee and saturation points."""
        from pytest_llmperf.loadgen.sweeps import latency_sweep

        return await latency_sweep(self, rates, **options)

    async def max_rate(self, **options: Any) -> Any:
        """Highest offered rate meeting the SLOs (binary search, probes ungated)."""
        from pytest_llmperf.loadgen.sweeps import max_rate

        return await max_rate(self, **options)

    async def max_concurrency(self, **options: Any) -> Any:
        """Highest closed-loop concurrency meeting the SLOs (doubling, then bisection)."""
        from pytest_llmperf.loadgen.sweeps import max_concurrency

        return await max_concurrency(self, **options)

    async def warm_up(self, **options: Any) -> Any:
        """Warm-up with verification: probes until latency is stable within 10%."""
        from pytest_llmperf.loadgen.sweeps import warm_up

        return await warm_up(self, **options)


def _sized_by(spec: RunSpec, tokenizer: Tokenizer | None, api: str) -> RunSpec:
    """``spec`` with its workload sized by the session's ``tokenizer``, unless it names one.

    A tokenizer the test names is kept but made to account for the API's
    framing (chat template, BOS) as the session's does.
    """
    named = spec.workload_params.get("tokenizer")
    if named is None and tokenizer is None:
        return spec
    chosen = bind_api(resolve_tokenizer(named), api) if named is not None else tokenizer
    return replace(spec, workload_params={**spec.workload_params, "tokenizer": chosen})


def _label(index: int, overrides: dict[str, Any]) -> str:
    if not overrides:
        return f"run{index}"
    return f"run{index}(" + ", ".join(f"{k}={v}" for k, v in sorted(overrides.items())) + ")"
