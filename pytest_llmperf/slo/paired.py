"""A/B against a reference endpoint: is the candidate worse than the reference, per statistic?

The runs come in interleaved blocks (ABBA: candidate, reference, reference,
candidate, ...), the same seeds on both sides
(:mod:`pytest_llmperf.methodology.reference`). A statistic (say
``ttft.p99``) of the candidate is *worse* than the reference's when all hold:

1. the change ``candidate / reference − 1`` over the merged blocks exceeds the
   A/B allowance (``--llm-ab-threshold``, :data:`DEFAULT_AB_THRESHOLD` = 5%,
   per metric or statistic as for the baseline gate; not the baseline gate's
   own 10%: the pairing cancels the drift that allowance is for);
2. it is significant, by the baseline gate's rule and code
   (:func:`pytest_llmperf.slo.regression.compare_stat`) over the two merged
   HDR histograms: for a percentile, the exceedance test over the order
   statistics gives p < alpha (0.01) (:mod:`pytest_llmperf.slo.percentile_change`);
   for a mean, the one-sided bootstrap gives p < alpha;
3. it is consistent over time: a one-sided paired t-test on the block pairs'
   log ratios ``log(candidate_k / reference_k)`` gives p < 0.01. Blocks that ran
   next to each other saw the same machine, so a disturbance of one or two
   blocks (a noisy neighbour, a GC pause, a thermal step) cannot fail the test
   alone: the bootstrap treats requests as independent and does not see such
   a block-level disturbance; the pairing does.

A candidate better beyond the threshold under the same rules is ``improved``
(reported, never failed); statistics that blocks of these sizes could never
decide are ``inconclusive`` (reported, never failed: the test's own SLOs judge
sample sizes), as is one that is 0 ms on the reference and above 0 on the
candidate (a change relative to 0 is undefined). The per-block log ratios are
reported too.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from pytest_llmperf.analysis.stats import t_sf
from pytest_llmperf.metrics.histogram import LatencyHistogram
from pytest_llmperf.results.accumulator import MetricsAccumulator
from pytest_llmperf.slo.quantile_bounds import DEFAULT_CONFIDENCE
from pytest_llmperf.slo.regression import (
    BY_REQUEST,
    DEFAULT_ALPHA,
    DEFAULT_RESAMPLES,
    RegressionVerdict,
    StatCheckBase,
    Thresholds,
    compare_stat,
    request_count,
)

__all__ = [
    "BLOCKS_ALPHA",
    "DEFAULT_AB_STATS",
    "DEFAULT_AB_THRESHOLD",
    "PairedCheck",
    "blocks_p_value",
    "paired_checks",
]

# --llm-ab-threshold's default, lower than the baseline gate's 10%: the interleaved, paired
# blocks on one machine cancel the drift a stored baseline cannot, and a candidate 10%
# slower sits *at* a 10% allowance, so it would be caught a third to two thirds of the time
# (docs/ab.md has the measured figures)
DEFAULT_AB_THRESHOLD = 0.05

BLOCKS_ALPHA = 0.01  # the block pairs' t-test: consistent over time, not one or two bad blocks

DEFAULT_AB_STATS: tuple[tuple[str, str], ...] = (
    ("ttft", "p50"),
    ("ttft", "p99"),
    ("tpot", "p50"),
    ("tpot", "p99"),
)


@dataclass(frozen=True)
class PairedCheck(StatCheckBase):
    """One statistic of the candidate against the reference (values in ms)."""

    metric: str
    stat: str
    reference: float | None
    candidate: float | None
    change: float | None  # candidate / reference - 1, over the merged blocks
    threshold: float
    p_value: float | None
    verdict: RegressionVerdict
    run: str = ""
    samples: tuple[int, int] = (0, 0)  # (reference, candidate)
    block_log_ratios: tuple[float | None, ...] = field(default_factory=tuple)
    slower_blocks: int = 0
    p_blocks: float | None = None  # one-sided paired t-test on the block log ratios
    test: str = ""
    reason: str = ""
    # as on RegressionCheck (slo/multiplicity.py): spread, level, power, verdict alone
    spread: float | None = None
    level: float | None = None
    mde: float | None = None
    alone: str = ""
    note_only: bool = False  # as on RegressionCheck: an inconclusive that is only a note

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "metric": self.metric,
            "stat": self.stat,
            "run": self.run,
            "reference": self.reference,
            "candidate": self.candidate,
            "change": self.change,
            "threshold": self.threshold,
            "p_value": self.p_value,
            "verdict": self.verdict.value,
            "samples": {"reference": self.samples[0], "candidate": self.samples[1]},
            "block_log_ratios": list(self.block_log_ratios),
            "slower_blocks": self.slower_blocks,
            "p_blocks": self.p_blocks,
            "blocks": len(self.block_log_ratios),
            "test": self.test,
            "reason": self.reason,
            "spread": self.spread,
            "level": self.level,
            "mde": self.mde,
            "alone": self.alone,
            "note_only": self.note_only,
        }


def _merged(blocks: Sequence[MetricsAccumulator], metric: str) -> LatencyHistogram:
    merged = MetricsAccumulator()
    for block in blocks:
        merged.merge(block)
    return merged.histograms[metric]


def _requests(blocks: Sequence[MetricsAccumulator]) -> int:
    return sum(request_count(block)[0] for block in blocks)


def blocks_p_value(ratios: Sequence[float | None], *, slower: bool = True) -> float | None:
    """One-sided p of "the candidate is slower" (``slower=False``: faster) from the block
    pairs' log ratios: a paired t-test of mean > 0 (< 0); None with fewer than 2 pairs."""
    values = [x for x in ratios if x is not None]
    if len(values) < 2:
        return None
    mean = statistics.fmean(values) * (1 if slower else -1)
    sd = statistics.stdev(values)
    if sd == 0:
        return 0.0 if mean > 0 else 1.0
    return round(t_sf(mean / (sd / math.sqrt(len(values))), len(values) - 1), 6)


def _block_ratio(cand: LatencyHistogram, ref: LatencyHistogram, stat: str) -> float | None:
    if not cand.count or not ref.count:
        return None
    c, r = cand.stat(stat), ref.stat(stat)
    if c <= 0 or r <= 0:
        return None
    return round(math.log(c / r), 6)


def paired_checks(
    candidate: Sequence[MetricsAccumulator],
    reference: Sequence[MetricsAccumulator],
    stats: Sequence[tuple[str, str]],
    *,
    thresholds: Thresholds | None = None,
    alpha: float = DEFAULT_ALPHA,
    blocks_alpha: float = BLOCKS_ALPHA,
    resamples: int = DEFAULT_RESAMPLES,
    seed: int = 0,
    run: str = "",
    confidence: float = DEFAULT_CONFIDENCE,
) -> list[PairedCheck]:
    """Judge each ``(metric, stat)`` of the candidate's blocks against the reference's.

    ``candidate[k]`` and ``reference[k]`` are block pair ``k`` (same spec, same
    seed, run next to each other).
    """
    if len(candidate) != len(reference):
        raise ValueError("paired_checks needs as many candidate blocks as reference blocks")
    thresholds = thresholds or Thresholds(DEFAULT_AB_THRESHOLD)
    test = (
        f"percentiles: one-sided exceedance test over the merged order statistics (the "
        f"candidate's {confidence:g} bounds quoted where undecided); means: one-sided "
        f"bootstrap, {resamples} resamples of both merged HDR histograms; alpha {alpha:g}; "
        f"paired t-test on {len(candidate)} block log ratios, alpha {blocks_alpha:g}"
    )
    checks: list[PairedCheck] = []
    for metric, stat in stats:
        ref_h = _merged(reference, metric)
        cand_h = _merged(candidate, metric)
        limit = thresholds.for_stat(metric, stat)
        ratios = tuple(
            _block_ratio(c.histograms[metric], r.histograms[metric], stat)
            for c, r in zip(candidate, reference, strict=True)
        )
        slower = sum(1 for x in ratios if x is not None and x > 0)
        p_blocks_slower = blocks_p_value(ratios)
        p_blocks_faster = blocks_p_value(ratios, slower=False)
        common: dict[str, Any] = {
            "metric": metric,
            "stat": stat,
            "threshold": limit,
            "run": run,
            "samples": (ref_h.count, cand_h.count),
            "block_log_ratios": ratios,
            "slower_blocks": slower,
            "p_blocks": p_blocks_slower,
            "test": test,
        }
        sizes: tuple[int | None, int | None] = (None, None)
        if metric in BY_REQUEST:  # ITL: resampled by request, as the baseline gate does
            sizes = (_requests(reference), _requests(candidate))
        compared = compare_stat(
            ref_h, cand_h, stat, sides=("reference", "candidate"),
            resamples=resamples, seed=seed, sizes=sizes, metric=metric,
            limit=limit, alpha=alpha, confidence=confidence,
        )  # fmt: skip
        outcome = compared.outcome(
            limit,
            alpha,
            slower_too=p_blocks_slower is not None and p_blocks_slower < blocks_alpha,
            faster_too=p_blocks_faster is not None and p_blocks_faster < blocks_alpha,
        )
        checks.append(
            PairedCheck(reference=compared.before, candidate=compared.after, **outcome, **common)
        )
    return checks
