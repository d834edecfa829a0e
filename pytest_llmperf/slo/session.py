"""Session-wide aggregation: all gated runs merged per endpoint and model, then judged.

Why a group per (endpoint, model): a session may test several models or
servers, and a percentile over their pooled requests describes none of
them. The embedded simulator is keyed by its profile, not its URL, because
each pytest-xdist worker starts its own copy on its own port.

The merge is exact (HDR histograms add bucket by bucket; counts add). The
group's *window* is the sum of its runs' windows, not first-start to
last-end: the gaps between tests are not measured time, and rates
(``request_throughput`` …) computed over them would be wrong. So a group's
throughput is its runs' total work over their total measured time. Its GPU figures are
its runs' blocks merged (:mod:`.gpu_session`: energy and tokens added, so
``energy_per_output_token_j`` is the session's energy over the same runs' tokens).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from pytest_llmperf.results.accumulator import MetricsAccumulator
from pytest_llmperf.results.run_result import RunResult
from pytest_llmperf.slo.gpu_session import merge_gpu_blocks
from pytest_llmperf.slo.verdicts import SloVerdict, Verdict, evaluate
from pytest_llmperf.specs.rulesets import Ruleset
from pytest_llmperf.specs.slo import DEFAULT_CONFIDENCE

__all__ = [
    "SESSION_NOTHING_MEASURED",
    "SessionGroup",
    "endpoint_key",
    "evaluate_session",
    "group_runs",
]

SESSION_NOTHING_MEASURED = "declared but no gated run measured anything"


def endpoint_key(endpoint: Mapping[str, Any]) -> str:
    """``sim:fixed model`` for the simulator, ``URL model`` for a real server."""
    where = f"sim:{endpoint['simulator']}" if endpoint.get("simulator") else endpoint.get("url")
    return f"{where or '?'} {endpoint.get('model') or '?'}"


@dataclass
class SessionGroup:
    """The merged gated runs of one endpoint and model."""

    key: str
    endpoint: dict[str, Any]
    accumulator: MetricsAccumulator = field(default_factory=MetricsAccumulator)
    measured_s: float = 0.0
    runs: int = 0
    tests: list[str] = field(default_factory=list)
    generator_bound: list[str] = field(default_factory=list)
    # each merged run's gpu block (JSON; None: it read no GPU), merged in as_result
    gpu_blocks: list[Mapping[str, Any] | None] = field(default_factory=list)

    def add(self, nodeid: str, run: Mapping[str, Any], state: Mapping[str, Any]) -> None:
        acc = MetricsAccumulator.from_state(state)
        self.measured_s += acc.window_s
        acc.window_start_ns = acc.window_end_ns = None  # summed below, not spanned
        acc.timeline = {}  # seconds of different runs do not line up
        acc.stages, acc.turns = {}, {}  # stage k of one test is not stage k of another
        acc.steady = acc.steady_part = None  # windows of different runs do not add up
        self.accumulator.merge(acc)
        self.accumulator.window_start_ns = 0
        self.accumulator.window_end_ns = round(self.measured_s * 1e9)
        self.runs += 1
        self.gpu_blocks.append(run.get("gpu"))
        if nodeid not in self.tests:
            self.tests.append(nodeid)
        if (run.get("self_check") or {}).get("generator_bound"):
            self.generator_bound.append(f"{nodeid} [{run.get('label', '')}]")

    def as_result(self) -> RunResult:
        """The group as one run, for the ordinary verdict path."""
        check: dict[str, Any] = {"generator_bound": bool(self.generator_bound), "reasons": []}
        if self.generator_bound:
            check["reasons"] = [
                f"{len(self.generator_bound)} of {self.runs} merged runs were load-generator "
                f"bound ({', '.join(self.generator_bound[:3])}"
                + (", …" if len(self.generator_bound) > 3 else "")
                + ")"
            ]
        return RunResult(
            workload={},
            load={},
            endpoint=self.endpoint,
            accumulator=self.accumulator,
            self_check=check,
            duration_s=self.measured_s,
            label=f"session {self.key}",
            gpu=merge_gpu_blocks(self.gpu_blocks),
        )

    def describe(self) -> dict[str, Any]:
        return {
            "key": self.key,
            "endpoint": self.endpoint,
            "runs": self.runs,
            "tests": list(self.tests),
            "measured_s": round(self.measured_s, 6),
            "generator_bound_runs": list(self.generator_bound),
            "counts": self.accumulator.counts(),
            "metrics": self.accumulator.summary(),
        }


def group_runs(
    entries: Iterable[tuple[str, Mapping[str, Any], list[dict[str, Any]], list[dict[str, Any]]]],
) -> dict[str, SessionGroup]:
    """``(nodeid, endpoint, runs, states)`` per test -> gated runs merged per endpoint+model."""
    groups: dict[str, SessionGroup] = {}
    for nodeid, test_endpoint, runs, states in entries:
        for run, state in zip(runs, states, strict=False):
            if not run.get("gated", True):
                continue
            endpoint = dict(run.get("endpoint") or test_endpoint)
            key = endpoint_key(endpoint)
            group = groups.get(key)
            if group is None:
                group = groups[key] = SessionGroup(key, endpoint)
            group.add(nodeid, run, state)
    return groups


def evaluate_session(
    groups: Mapping[str, SessionGroup], ruleset: Ruleset, *, confidence: float = DEFAULT_CONFIDENCE
) -> list[SloVerdict]:
    """Every ruleset target on every group, with the ruleset's sample and duration minimums
    (a percentile target judged by its bounds at ``confidence``).

    Where no gated run of the session completed a request (no test ran one, or all of
    theirs failed), each target fails, ``run`` ``"session"``, saying so: a ruleset
    judged over nothing is not a pass."""
    if not any(group.accumulator.completed for group in groups.values()):
        why = (
            "every gated run completed no request"
            if groups
            else "no test made a gated llm_loadgen.run()"
        )
        reason = f"--llm-ruleset {ruleset.name} {SESSION_NOTHING_MEASURED}: {why}"
        return [
            SloVerdict(slo.expr, None, slo.target, slo.unit, Verdict.FAIL, "session", 0, reason)
            for slo in ruleset.slos
        ]
    verdicts: list[SloVerdict] = []
    for group in groups.values():
        result = group.as_result()
        verdicts.extend(
            evaluate(
                slo,
                result,
                min_count=ruleset.min_samples,
                min_duration_s=ruleset.min_duration_s,
                confidence=confidence,
            )
            for slo in ruleset.slos
        )
    return verdicts
