"""The load generator as a test sees it: configured once from the session, run on demand.

``await gen.run()`` runs the test's declared workload and load; keyword
overrides change one run (a sweep calls ``run(rate=r)`` per rate). Every
result is kept in :attr:`LoadGenerator.results` so the test's SLOs can be
judged on all of them after the test body returns.

This is the *one* way to make runs: the plugin configures a generator with
the session's settings (``--llm-workers``, ``--llm-events``, ``--llm-scale``,
``--llm-tokenizer``, ``--llm-progress``, the endpoint's timeouts, the observers), and every
procedure that needs another run asks this one for it: :meth:`LoadGenerator.run`
for the test's workload, :meth:`LoadGenerator.run_spec` for a spec of its
own (warm-up probes), :meth:`LoadGenerator.for_endpoint` for another server
(A/B comparisons). So no procedure can forget a setting.

The methodology's procedures (sweeps, searches, warm-up, multi-configuration
runs) live a layer above, in :mod:`pytest_llmperf.methodology`, and the
``llm_loadgen`` fixture's object (:class:`pytest_llmperf.methodology.LlmLoadgen`)
adds them as methods; this module never imports them, so ``loadgen`` stays
below ``methodology`` with no import going up.
"""

from __future__ import annotations

import asyncio
import copy
import tempfile
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Self

from pytest_llmperf.client.endpoint import Endpoint
from pytest_llmperf.errors import LlmPerfUsageError
from pytest_llmperf.loadgen.event_files import events_file_for
from pytest_llmperf.loadgen.issue.delivery import RecordObserver
from pytest_llmperf.loadgen.plan.planner import effective_spec, sized_spec
from pytest_llmperf.loadgen.progress import watch_progress
from pytest_llmperf.loadgen.run import Decider, LoadRun
from pytest_llmperf.loadgen.scale_out.ray_workers import RayCluster
from pytest_llmperf.results.event_log import read_records
from pytest_llmperf.results.progress import ProgressSink
from pytest_llmperf.results.run_result import RunResult, StopReason
from pytest_llmperf.server_metrics.cache_reset import with_run_evidence
from pytest_llmperf.server_metrics.fleet_source import MetricsSource
from pytest_llmperf.specs.load import UNTIL_DECIDED, LoadPattern, SampleOrderMode
from pytest_llmperf.specs.perf import PerfSpec
from pytest_llmperf.specs.slo import request_limits
from pytest_llmperf.workloads.tokenizer import Tokenizer

if TYPE_CHECKING:  # passed through to the planner, never read here
    from pytest_llmperf.gpu.local import LocalGpus
    from pytest_llmperf.loadgen.server_watch import WatchedServer
    from pytest_llmperf.specs.run import RunSpec

__all__ = ["LoadGenerator"]


class LoadGenerator:
    """Runs a :class:`PerfSpec` against an endpoint with the session's settings; keeps results."""

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
        progress: ProgressSink | None = None,
        ray: RayCluster | None = None,
        server_metrics: MetricsSource | None = None,
        reset_cache: Callable[[Endpoint], dict[str, Any]] | None = None,
        decider: Decider | None = None,
        until_decided: bool = False,
        server: WatchedServer | None = None,
        gpus: LocalGpus | None = None,
    ) -> None:
        self.endpoint = endpoint
        self.spec = spec
        self.scale = scale
        self.events_dir = events_dir  # --llm-events: one SQLite event log per run
        self.events_name = events_name
        self.workers = workers  # --llm-workers
        self.ray = ray  # --llm-workers=ray:N|ray:auto: the session's Ray cluster
        self.tokenizer = tokenizer  # --llm-tokenizer: sizes every run's workload but named ones
        self.progress = progress  # --llm-progress: where each run's live progress goes
        self.observers = list(observers)
        self.on_result = on_result
        self.server_metrics = server_metrics  # --llm-server-metrics: scraped around each run
        self.gpus = gpus  # --llm-gpu: this machine's GPUs, read around each run
        self.reset_cache = reset_cache  # --llm-reset-cache=auto: before each gated run
        # until="decided": the look at a live run's SLOs (slo.sequential.decider)
        self.decider = decider
        self.until_decided = until_decided  # --llm-until-decided: every gated run
        self.server = server  # the endpoint's server process, if the gate started it
        self.results: list[RunResult] = []
        self.analyses: list[dict[str, Any]] = []
        self._current: LoadRun | None = None

    # -- runs --------------------------------------------------------------------

    async def run(
        self,
        *,
        gate: bool = True,
        label: str | None = None,
        pattern: LoadPattern | str | None = None,
        rate: float | None = None,
        concurrency: int | None = None,
        stages: Sequence[Mapping[str, Any]] | None = None,
        ramp: Mapping[str, Any] | None = None,
        burstiness: float | None = None,
        max_concurrency: int | None = None,
        pacing: str | None = None,
        cancel: Mapping[str, Any] | None = None,
        steady: str | Mapping[str, Any] | None = None,
        seed: int | None = None,
        sample_order: SampleOrderMode | str | None = None,
        requests: int | None = None,
        duration: float | None = None,
        warmup: int | None = None,
        workload: str | None = None,
        workload_params: Mapping[str, Any] | None = None,
    ) -> RunResult:
        """Run the declared workload and load once, with the given overrides applied.

        Overrides (None: as declared) change this run only: the load
        (``pattern``, ``rate`` req/s, ``concurrency``, ``stages``, ``ramp``;
        another pattern drops the declared one's parameters, a new level
        replaces the declared one), its shape (``burstiness``,
        ``max_concurrency``, ``pacing``, ``cancel``), its steady-state window
        (``steady``: docs/measurement.md), the load's ``seed`` and
        ``sample_order``, when to stop (``requests`` or ``duration`` seconds,
        after ``warmup`` untracked requests) and the workload (``workload``, a
        registered name, and ``workload_params`` merged into the declared ones);
        see :class:`~pytest_llmperf.specs.run.RunOverrides`.
        ``gate=False`` keeps the run in reports but out of the test's SLO
        verdicts (probe runs of a search, warm-up runs). ``--llm-scale``
        applies to the declared (and overridden) request counts and durations.
        ``label`` names the run in reports (default ``run<N>(overrides)``).
        """
        given = {
            "pattern": pattern,
            "rate": rate,
            "concurrency": concurrency,
            "stages": stages,
            "ramp": ramp,
            "burstiness": burstiness,
            "max_concurrency": max_concurrency,
            "pacing": pacing,
            "cancel": cancel,
            "steady": steady,
            "seed": seed,
            "sample_order": sample_order,
            "requests": requests,
            "duration": duration,
            "warmup": warmup,
            "workload": workload,
            "workload_params": workload_params,
        }
        overrides = {k: v for k, v in given.items() if v is not None}
        run_spec = effective_spec(self.spec.run, overrides, self.scale)
        label = label or _label(len(self.results), overrides)
        return await self.run_spec(run_spec, gate=gate, label=label)

    async def run_spec(
        self,
        spec: RunSpec,
        *,
        label: str,
        gate: bool = True,
        observers: Iterable[RecordObserver] = (),
        workers: int | None = None,
    ) -> RunResult:
        """Run ``spec`` as given (not scaled) with this generator's settings, and keep it.

        For procedures whose runs are not the test's workload, e.g. warm-up
        probes of a fixed size: they still get the session's event log,
        tokenizer, timeouts and observers (plus ``observers`` for this run
        only) and land in the test's reports. ``workers`` overrides
        ``--llm-workers`` for this run (local processes, also under ``ray:N``).
        """
        cache_reset = None
        if gate and self.reset_cache is not None:
            # blocking, bounded calls: off the loop so nothing else on it is held up
            cache_reset = await asyncio.to_thread(self.reset_cache, self.endpoint)
        decide = None
        until = self.until_decided or spec.load.until == UNTIL_DECIDED
        if gate and until and not spec.load.stages and self.decider is not None:
            spec = replace(spec, load=replace(spec.load, until=UNTIL_DECIDED))
            decide = self.decider
        result = await self.execute_spec(
            spec, label=label, observers=observers, workers=workers, decide=decide
        )
        # the run's own prefix-cache counters tell whether there was a cache to reset
        result.cache_reset = with_run_evidence(cache_reset, result.server_metrics)
        self.keep(result, gate=gate)
        if result.stop_reason is StopReason.SIGINT:
            # The run drained gracefully and its result is kept; now stop the session.
            raise KeyboardInterrupt
        return result

    async def execute_spec(
        self,
        spec: RunSpec,
        *,
        label: str,
        observers: Iterable[RecordObserver] = (),
        workers: int | None = None,
        decide: Decider | None = None,
    ) -> RunResult:
        """:meth:`run_spec` without keeping the result (nor stopping the session on Ctrl-C).

        For procedures that combine several runs into one result (an A/B
        comparison's blocks): the caller keeps what it makes of them, and
        checks ``result.stop_reason`` for ``SIGINT``. Observers see every
        record also with ``--llm-workers`` > 1: the worker processes' records
        are replayed to them from the run's merged event log (a temporary one
        when ``--llm-events`` is not given).
        """
        if self.server is None or self.server.poll() is None:
            # (a dead server's /tokenize cannot size it: its run issues nothing anyway)
            spec = sized_spec(spec, self.tokenizer, self.endpoint.api)
        ray = self.ray if workers is None else None  # a run's own worker count is local
        workers = self.workers if workers is None else workers
        run_observers = [*self.observers, *observers]
        events_path = (
            events_file_for(self.events_dir, f"{self.events_name}-{label}")
            if self.events_dir
            else None
        )
        replay = bool(run_observers) and (workers > 1 or ray is not None)
        scratch: tempfile.TemporaryDirectory[str] | None = None
        if replay and events_path is None:
            scratch = tempfile.TemporaryDirectory(prefix="llmperf-replay-")
            events_path = Path(scratch.name) / "run.sqlite"
        run = LoadRun(
            self.endpoint,
            spec,
            request_limits_ms=request_limits(self.spec.slos),
            observers=run_observers,
            label=label,
            events_path=events_path,
            workers=workers,
            ray=ray,
            server_metrics=self.server_metrics,
            gpus=self.gpus,
            decide=decide,
            server=self.server,  # watched over the run: resources, and an exit stops it
        )
        self._current = run
        try:
            async with watch_progress(run, self.progress):
                result = await run.execute()
            if replay and events_path is not None and events_path.exists():
                for record in read_records(events_path):
                    for observer in run_observers:
                        observer(record)
        finally:
            self._current = None
            if scratch is not None:
                scratch.cleanup()
        if scratch is not None:
            result.events_path = None  # the temporary log is gone
        self.endpoint = run.endpoint  # keeps the resolved model for later runs
        return result

    def keep(self, result: RunResult, *, gate: bool = True) -> None:
        """Record a finished run in this test's reports (and, with ``gate``, its verdicts)."""
        result.gated = gate
        self.results.append(result)
        if self.on_result:
            self.on_result(result)

    def for_endpoint(self, endpoint: Endpoint | str) -> Self:
        """This generator aimed at another server: same spec and session settings.

        Workers, event logs, scale, tokenizer, observers and callbacks are
        this generator's; a URL gets this endpoint's API, timeouts and request
        fields (``--llm-request-extra``); its model is resolved on that server,
        and it gets no API key (the session's key is never sent to another host
        unasked: give an :class:`Endpoint` for a server that needs one). The new
        generator's runs are kept in *this* test's record (``results`` and
        ``analyses`` are shared), so an A/B comparison reports every
        configuration's runs.
        """
        if isinstance(endpoint, str):
            endpoint = Endpoint.from_env(
                endpoint,
                api_key_env=None,
                api=self.endpoint.api,
                timeouts=self.endpoint.timeouts,
                fields=self.endpoint.fields,  # --llm-request-extra rides on every server's requests
                affinity=self.endpoint.affinity,  # so do --llm-affinity and --llm-replica-header
            )
        elif not isinstance(endpoint, Endpoint):
            raise LlmPerfUsageError(f"a configuration's endpoint must be a URL, got {endpoint!r}")
        other = copy.copy(self)  # shares results, analyses and on_result with this one
        other.endpoint = endpoint
        other.observers = list(self.observers)
        if endpoint.base_url != self.endpoint.base_url:
            # this server's /metrics and cache reset say nothing of another server's
            other.server_metrics = None
            other.reset_cache = None
            other.server = None
        other._current = None
        return other

    # -- the test's record -------------------------------------------------------

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


def _label(index: int, overrides: dict[str, Any]) -> str:
    if not overrides:
        return f"run{index}"
    return f"run{index}(" + ", ".join(f"{k}={v}" for k, v in sorted(overrides.items())) + ")"
