"""An A/B comparison's outcome: a gated run against the reference endpoint, judged.

The procedure that runs the interleaved blocks is
:mod:`pytest_llmperf.methodology.reference`; this is what it produces and what the
reports read (JUnit properties, the JSON ``ab[]`` entry, the HTML table), so that the
reports need not reach the procedure, nor through it the load generator.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pytest_llmperf.results.run_result import RunResult
from pytest_llmperf.slo.paired import PairedCheck
from pytest_llmperf.slo.regression import RegressionVerdict

__all__ = ["AbComparison"]


@dataclass
class AbComparison:
    """One gated run compared with the reference: both merged sides and the checks."""

    run: str
    blocks: int
    order: list[str]
    candidate: RunResult
    reference: RunResult
    checks: list[PairedCheck]
    reference_endpoint: dict[str, Any] = field(default_factory=dict)
    events: dict[str, list[str]] = field(default_factory=dict)
    # the allowance judged against (``--llm-ab-threshold``): {"default": 0.05, "ttft": ...}
    thresholds: dict[str, float] = field(default_factory=dict)

    @property
    def allowed(self) -> str:
        """The allowance in words: ``+5%``, ``+5% (ttft.p99 +20%)``."""
        default = self.thresholds.get("default")
        if default is None:  # built by hand: the checks carry their limits
            return ", ".join(sorted({f"+{c.threshold * 100:g}%" for c in self.checks}))
        named = [f"{k} +{v * 100:g}%" for k, v in self.thresholds.items() if k != "default"]
        return f"+{default * 100:g}%" + (f" ({', '.join(named)})" if named else "")

    @property
    def verdict(self) -> RegressionVerdict:
        verdicts = {c.verdict for c in self.checks}
        for verdict in RegressionVerdict:
            if verdict in verdicts:
                return verdict
        return RegressionVerdict.UNCHANGED

    def to_analysis(self) -> dict[str, Any]:
        """The comparison as a table of the test's report (HTML, JSON ``analyses``)."""
        where = self.reference_endpoint.get("url") or "the reference"
        rows = [
            [
                c.name,
                c.candidate,
                c.reference,
                None if c.change is None else round(c.change * 100, 2),
                round(c.threshold * 100, 2),
                c.p_value,
                f"{c.slower_blocks}/{len(c.block_log_ratios)}",
                c.p_blocks,
                c.verdict.value,
            ]
            for c in self.checks
        ]
        return {
            "title": (
                f"A/B {self.run} against {where}: {self.verdict.value} "
                f"(allowed {self.allowed}, {self.blocks} blocks a side, {' '.join(self.order)})"
            ),
            "kind": "table",
            "columns": [
                "statistic",
                "candidate ms",
                "reference ms",
                "change %",
                "allowed %",
                "p",
                "blocks slower",
                "blocks p",
                "verdict",
            ],
            "rows": rows,
            "ab_verdict": self.verdict.value,
        }

    def to_dict(self) -> dict[str, Any]:
        """The JSON report's ``ab[]`` entry (``reference.run`` has a ``runs[]`` entry's keys)."""
        return {
            "run": self.run,
            "verdict": self.verdict.value,
            "blocks": self.blocks,
            "order": self.order,
            "thresholds": self.thresholds,
            "reference_endpoint": self.reference_endpoint,
            "candidate": {"counts": self.candidate.counts, "metrics": _summary(self.candidate)},
            "reference": {
                "counts": self.reference.counts,
                "metrics": _summary(self.reference),
                "run": self.reference.to_dict(),
            },
            "checks": [c.to_dict() for c in self.checks],
            "events": self.events,
        }


def _summary(result: RunResult) -> dict[str, Any]:
    summary: dict[str, Any] = result.accumulator.summary()
    return summary
