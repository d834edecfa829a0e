"""What the ``llm_loadgen`` fixture hands a test: the load generator plus the draft's procedures.

:class:`LlmLoadgen` is the configured
:class:`~pytest_llmperf.loadgen.generator.LoadGenerator` (``run()``,
``attach()``, ``stop()``, ``for_endpoint()``) with the methodology's
procedures as methods: ``sweep()``, ``max_rate()``, ``max_concurrency()``,
``warm_up()``.

Why a subclass here rather than methods on ``LoadGenerator``: the
procedures are built on the generator (they call ``run()`` again and again,
and judge SLOs on the results), so they sit a layer above it. Methods on
``LoadGenerator`` would have to import them from there, lazily, and that is
an import going up (``loadgen -> methodology -> loadgen``). Defined here,
every import points down: the fixture's object is a load generator that
knows the procedures, and ``loadgen`` knows nothing of them.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from pytest_llmperf.client.endpoint import Endpoint
from pytest_llmperf.loadgen.generator import LoadGenerator
from pytest_llmperf.loadgen.issue.delivery import RecordObserver
from pytest_llmperf.loadgen.outputs_alone import ALONE_SAMPLES, outputs_alone
from pytest_llmperf.loadgen.plan.planner import sized_spec
from pytest_llmperf.methodology.reference import AB_BLOCKS, AbComparison, run_ab
from pytest_llmperf.methodology.search import max_concurrency, max_rate
from pytest_llmperf.methodology.sweep import latency_sweep
from pytest_llmperf.methodology.warm_up import warm_up
from pytest_llmperf.results.outputs import MatchedAgainst
from pytest_llmperf.results.run_result import RunResult, StopReason
from pytest_llmperf.slo.output_match import compare_outputs
from pytest_llmperf.slo.paired import DEFAULT_AB_THRESHOLD
from pytest_llmperf.slo.regression import Thresholds
from pytest_llmperf.specs.perf import PerfSpec
from pytest_llmperf.specs.run import RunSpec

if TYPE_CHECKING:  # the plugin's started servers, handed to each side's runs
    from pytest_llmperf.loadgen.server_watch import WatchedServer

__all__ = ["LlmLoadgen"]


class LlmLoadgen(LoadGenerator):
    """A :class:`LoadGenerator` with the methodology's sweeps, searches and warm-up.

    Each procedure's runs are ungated (reported, not judged) unless it
    confirms its answer with one gated run, and each attaches its table or
    curve to the test's reports unless ``attach=False``; keyword
    ``overrides`` are ``run()`` overrides applied to every run it makes. The
    methods *are* the module functions (``gen.sweep(...)`` is
    ``latency_sweep(gen, ...)``), so signatures and docs cannot drift apart.

    With a ``reference`` endpoint (``--llm-reference-endpoint``) every gated run
    is an A/B comparison against it (:mod:`~pytest_llmperf.methodology.reference`,
    docs/ab.md): the candidate's merged blocks are the run, the comparison goes
    to :attr:`comparisons` and, as a table, to the test's analyses.

    With a managed ``server`` (a setting: the server process the gate started for the
    endpoint) every run watches it (:mod:`~pytest_llmperf.loadgen.server_watch`), and the
    reference's runs its own (``reference_server``, ``--llm-reference-cmd``).

    With ``consistency`` (the plugin sets it when the test has an ``output_consistency``
    SLO, or no baseline and no reference to compare greedy outputs with), each gated
    run that kept greedy outputs is followed by the alone pass
    (:mod:`~pytest_llmperf.loadgen.outputs_alone`): its first samples sent again one at
    a time, compared with the run's outputs into ``result.output_consistency``.
    """

    sweep = latency_sweep  # latency-vs-load curve over offered rates, knee and saturation
    max_rate = max_rate  # highest offered rate meeting the SLOs (binary search)
    max_concurrency = max_concurrency  # highest closed-loop concurrency (double, then bisect)
    warm_up = warm_up  # warm-up with verification: probes until latency settles

    def __init__(
        self,
        endpoint: Endpoint,
        spec: PerfSpec,
        *,
        reference: Endpoint | None = None,
        thresholds: Thresholds | None = None,
        ab_blocks: int = AB_BLOCKS,
        consistency: bool = False,
        reference_server: WatchedServer | None = None,
        **settings: Any,
    ) -> None:
        super().__init__(endpoint, spec, **settings)
        self.consistency = consistency  # the alone pass after each gated greedy run
        self.thresholds = thresholds or Thresholds(DEFAULT_AB_THRESHOLD)
        self.ab_blocks = ab_blocks
        self.comparisons: list[AbComparison] = []  # one per gated run, with a reference
        self.reference: LlmLoadgen | None = None  # --llm-reference-endpoint's generator
        if reference is not None:
            self.reference = self.for_endpoint(reference)
            self.reference.reference = None
            self.reference.server = reference_server  # --llm-reference-cmd's, watched alike

    async def run_spec(
        self,
        spec: RunSpec,
        *,
        label: str,
        gate: bool = True,
        observers: Iterable[RecordObserver] = (),
        workers: int | None = None,
    ) -> RunResult:
        """:meth:`LoadGenerator.run_spec`; with a reference endpoint, a gated run is an A/B
        comparison (:func:`~pytest_llmperf.methodology.reference.run_ab`) whose candidate
        side is kept as the run, and the comparison in :attr:`comparisons`."""
        if not gate or self.reference is None or observers or workers is not None:
            result = await super().run_spec(
                spec, label=label, gate=gate, observers=observers, workers=workers
            )
            if gate:
                await self.check_consistency(spec, result)
            return result
        comparison = await run_ab(
            self,
            self.reference,
            spec,
            label=label,
            slos=self.spec.slos,
            thresholds=self.thresholds,
            blocks=self.ab_blocks,
        )
        self.comparisons.append(comparison)
        self.attach(comparison.to_analysis())  # the HTML report's table for this comparison
        result = comparison.candidate
        if result.stop_reason is not StopReason.SIGINT:
            await self.check_consistency(spec, result)
        self.keep(result, gate=True)
        if result.stop_reason is StopReason.SIGINT:
            raise KeyboardInterrupt
        return result

    async def check_consistency(self, spec: RunSpec, result: RunResult) -> None:
        """The alone pass after a gated run that kept greedy outputs (with
        ``consistency``): ``result.output_consistency``, or why not in
        ``result.output_notes``. An interrupted run gets none."""
        if not self.consistency or not result.accumulator.outputs:
            return
        if result.interrupted:
            result.output_notes["output_consistency"] = "the run was interrupted: no alone pass"
            return
        indices = result.accumulator.outputs.indices()[:ALONE_SAMPLES]
        sized = sized_spec(spec, self.tokenizer, self.endpoint.api)
        alone, note = await outputs_alone(self.endpoint, sized, indices)
        match = compare_outputs(
            result.accumulator.outputs,
            alone,
            MatchedAgainst.ALONE,
            f"alone: {len(indices)} samples sent again at concurrency 1",
        )
        result.output_consistency = match
        if note or match is None:
            result.output_notes["output_consistency"] = note or "no sample sent alone gave output"
