"""One test's declared measurement: its run (workload and load) and its SLOs.

:class:`PerfSpec` is what the plugin builds from a test's markers at
collection time (``llm_workload``, ``llm_load``, every ``llm_slo`` at module,
class and function level), so a bad marker is a usage error before any
request is sent; the load generator runs its :class:`~.run.RunSpec` and the
plugin judges its SLOs.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from pytest_llmperf.errors import LlmPerfUsageError
from pytest_llmperf.specs.rulesets import load_ruleset
from pytest_llmperf.specs.run import RunSpec
from pytest_llmperf.specs.slo import Slo, confidence_problem, parse_slo

__all__ = ["PerfSpec"]


@dataclass(frozen=True)
class PerfSpec:
    """Everything one test's markers declare: the run and its SLOs."""

    run: RunSpec
    slos: tuple[Slo, ...] = ()
    rulesets: tuple[str, ...] = ()

    @classmethod
    def from_markers(
        cls,
        workload: tuple[tuple[Any, ...], Mapping[str, Any]] | None,
        load: tuple[tuple[Any, ...], Mapping[str, Any]] | None,
        slo_markers: list[tuple[tuple[Any, ...], Mapping[str, Any]]],
    ) -> PerfSpec:
        run = RunSpec.from_markers(
            workload[0] if workload else (),
            workload[1] if workload else None,
            load[0] if load else (),
            load[1] if load else None,
        )
        slos: list[Slo] = []
        rulesets: list[str] = []
        for args, kwargs in slo_markers:
            unknown = sorted(set(kwargs) - {"ruleset", "confidence", "per_model"})
            if unknown:
                raise LlmPerfUsageError(
                    f"llm_slo does not take {', '.join(unknown)}= "
                    "(takes ruleset=, confidence=, per_model=)"
                )
            if not args and "ruleset" not in kwargs:
                # confidence= and per_model= apply to the marker's own objectives only
                raise LlmPerfUsageError(
                    "llm_slo declares no objective: give one or more like 'ttft.p99 < 500ms', "
                    "or ruleset=NAME"
                )
            per_model = kwargs.get("per_model", False)
            if not isinstance(per_model, bool):
                raise LlmPerfUsageError(
                    f"llm_slo(per_model=) must be True or False, got {per_model!r}"
                )
            confidence = kwargs.get("confidence")
            if confidence is not None:
                problem = confidence_problem(confidence)
                if problem:
                    raise LlmPerfUsageError(f"llm_slo(confidence=): {problem}")
                confidence = float(confidence)
            slos.extend(
                replace(parse_slo(expr), confidence=confidence, per_model=per_model)
                for expr in args
            )
            if "ruleset" in kwargs:
                ruleset = load_ruleset(kwargs["ruleset"])
                rulesets.append(ruleset.name)
                slos.extend(
                    replace(slo, per_model=True) if per_model else slo for slo in ruleset.slos
                )
        return cls(run, tuple(slos), tuple(rulesets))
