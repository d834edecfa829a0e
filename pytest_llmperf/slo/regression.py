"""Regression against a baseline: slower by more than a threshold, and significantly so.

A run *regressed* on a statistic (say ``ttft.p99``) when both hold:

1. the change ``current / baseline − 1`` exceeds the threshold (default
   10%, configurable per metric or per statistic), and
2. the slowdown is statistically significant (p < alpha, default 0.01, then
   Holm over the test's comparisons: :mod:`.multiplicity`):

   - a **percentile** by its order statistics, whatever the sample count
     (:mod:`.percentile_change`): the exceedance test counts the run's samples
     above the baseline's percentile, whose law when nothing changed is exact
     and distribution-free; the run's confidence bounds (issue 27's,
     ``confidence``) are quoted when a change beyond the threshold is not
     significant, with about how many samples would decide it;
   - a **mean** by a one-sided bootstrap over the two stored HDR histograms:
     each histogram's buckets resampled (multinomial with the observed bucket
     shares, same sample count), the mean recomputed on both, and
     ``p = (1 + #{resampled change <= 0}) / (B + 1)``.

Why both: a threshold alone fails on noise in small runs, significance alone
fails on real but irrelevant 1% shifts in large ones. The bootstrap's spread
(for a percentile, drawn exactly through its order statistic's Beta
distribution) is kept for every statistic: the power figure (``mde``).

ITL is counted by request, not by gap: the gaps of one request share its speed
(its batch, its sequence length), so they are correlated and a test over gaps
is far too sure of itself (measured in tests/slo/test_regression_itl.py: 30-35%
false alarms at alpha 0.01 on two runs of one process, against 0% here). The
pooled ITL histogram gives the shape, and the sample size is the number of
requests that contributed gaps (``itl_request_mean``'s count, m): the
exceedance test takes m and the run's share of gaps above the baseline's
percentile of m; the bootstrap draws m values (a percentile: the order
statistic of m draws; the mean: a multinomial of m). A cluster bootstrap's
variance is the independent one times the design effect ``1 + (g - 1) rho`` (g
gaps per request, rho their intra-request correlation, 0 <= rho <= 1), so
``n / deff`` lies between m (rho = 1) and n (rho = 0): m samples are
conservative, never optimistic. States written before that histogram existed
fall back to the TPOT count (the requests with two or more tokens), with a
note.

A run that got *faster* beyond the threshold (and significantly) is
``improved``: reported, never failed. A statistic that runs of these sizes
could never decide, or that one side did not measure, is ``inconclusive``: an
inconclusive verdict of the test, which follows ``--llm-inconclusive``. Two
inconclusive cases are notes (``note_only``), never a verdict: a statistic
neither side measured, and one that is 0 ms in the baseline and above 0 now (a
change relative to 0 is undefined; TPOT and ITL are 0 when a server sends each
reply in one read). Both 0 is no change.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field
from enum import StrEnum
from statistics import NormalDist
from typing import Any

import numpy as np

from pytest_llmperf.errors import LlmPerfUsageError
from pytest_llmperf.metrics.histogram import LatencyHistogram
from pytest_llmperf.metrics.sample_size import nearest_rank
from pytest_llmperf.results.accumulator import MetricsAccumulator
from pytest_llmperf.slo.percentile_change import compare_percentile
from pytest_llmperf.specs.conversation_names import CONVERSATION_LATENCY_METRICS
from pytest_llmperf.specs.gpu_names import GPU_METRICS
from pytest_llmperf.specs.process_names import PROCESS_METRICS, STARTUP_METRICS
from pytest_llmperf.specs.server_names import COMMON_METRICS, MetricKind
from pytest_llmperf.specs.slo import DEFAULT_CONFIDENCE, STATS, percentile_of, stat_problem

__all__ = [
    "BURST_METRICS",
    "BY_REQUEST",
    "COMPARED_METRICS",
    "COMPARED_STATS",
    "DEFAULT_ALPHA",
    "DEFAULT_RESAMPLES",
    "DEFAULT_THRESHOLD",
    "RegressionCheck",
    "RegressionVerdict",
    "StatCheckBase",
    "StatComparison",
    "Thresholds",
    "bootstrap_p_value",
    "bootstrap_test",
    "compare_accumulators",
    "compare_stat",
    "inconclusive_check",
    "request_count",
    "zero_baseline",
]

DEFAULT_THRESHOLD = 0.10
DEFAULT_ALPHA = 0.01
DEFAULT_RESAMPLES = 2000
MIN_TAIL = 10  # resamples in a tail below which its p-value is the normal approximation
COMPARED_METRICS = ("ttft", "tpot", "itl", "e2e")
COMPARED_STATS = ("p50", "p99")
BY_REQUEST = ("itl",)  # resampled by request: their samples within one request are correlated
BURST_METRICS = ("tpot", "itl")  # 0 ms when a server sends a whole reply in one read
_CHUNK = 250  # resamples per numpy batch: bounds memory at B × buckets
_ITEM = re.compile(
    r"^\s*(?:(?P<key>gpu\.[a-z0-9_.]*[a-z0-9_]|"
    r"(?:server\.|startup\.|conversation\.|replica\.)?[a-z_][a-z0-9_]*"
    r"(?:\.p[\d.]+|\.mean)?)"
    r"\s*=\s*)?"
    r"(?P<value>[\d.]+)\s*(?P<pct>%?)\s*$"
)


@dataclass(frozen=True)
class Thresholds:
    """Allowed slowdown per statistic: ``ttft.p99`` beats ``ttft`` beats the default."""

    default: float = DEFAULT_THRESHOLD
    overrides: Mapping[str, float] = field(default_factory=dict)

    def for_stat(self, metric: str, stat: str) -> float:
        """The threshold of ``metric``'s ``stat``: named, else the metric's, else the default."""
        key = f"{metric}.{stat}"
        if key in self.overrides:
            return self.overrides[key]
        return self.overrides.get(metric, self.default)

    def stats(self) -> list[tuple[str, str]]:
        """Statistics compared: ``COMPARED_METRICS × COMPARED_STATS`` plus any named ones."""
        pairs = [(m, s) for m in COMPARED_METRICS for s in COMPARED_STATS]
        for key in self.overrides:
            if key in GPU_METRICS:  # one value per run of the GPUs: gpu_metrics()
                continue
            metric, stat = _metric_and_stat(key)
            own = metric.partition(".")[0] not in ("server", "startup", "replica")
            if own and stat and (metric, stat) not in pairs:
                pairs.append((metric, stat))
        return pairs

    def conversation_stats(self) -> list[tuple[str, str]]:
        """The conversations' statistics compared where both runs had conversations:
        each makespan's p50 and p99, plus any others named (``conversation.makespan.p90``)."""
        pairs = [(m, s) for m in CONVERSATION_LATENCY_METRICS for s in COMPARED_STATS]
        named = [(m, s) for m, s in self.stats() if m in CONVERSATION_LATENCY_METRICS]
        return pairs + [p for p in named if p not in pairs]

    def server_stats(self) -> list[tuple[str, str]]:
        """The server's statistics compared (``server.queue_time.p99=20%``): only those
        named, each against the baseline's own value of it."""
        return [
            split_server_key(key)
            for key in self.overrides
            if key.startswith("server.") and key not in PROCESS_METRICS
        ]

    def replica_stats(self) -> list[tuple[str, str]]:
        """The client statistics compared replica by replica (``replica.ttft.p99=20%``;
        ``replica.ttft=20%``: its p50 and p99): only those named, as ``(metric, stat)``
        of the plain metric (:mod:`~pytest_llmperf.slo.replica_regression`)."""
        pairs: list[tuple[str, str]] = []
        for key in self.overrides:
            if not key.startswith("replica."):
                continue
            metric, stat = _metric_and_stat(key.partition(".")[2])
            for one in (stat,) if stat else COMPARED_STATS:
                if (metric, one) not in pairs:
                    pairs.append((metric, one))
        return pairs

    def process_metrics(self) -> list[str]:
        """The server process's metrics compared (one value per side): ``startup.ready_s``
        and ``startup.first_token_s`` always (where both sides have them), the resources
        (``server.rss_max_mb=20%``) only where named."""
        named = [key for key in self.overrides if key in PROCESS_METRICS]
        return [*STARTUP_METRICS, *(k for k in named if k not in STARTUP_METRICS)]

    def gpu_metrics(self) -> list[str]:
        """The GPUs' figures compared (one value per side: ``gpu.power_w.mean=5%``,
        ``energy_per_output_token_j=10%``): only those named
        (:mod:`~pytest_llmperf.slo.gpu_regression`)."""
        return [key for key in self.overrides if key in GPU_METRICS]

    @classmethod
    def parse(
        cls,
        text: str | None,
        *,
        where: str = "--llm-baseline-threshold",
        default: float = DEFAULT_THRESHOLD,
    ) -> Thresholds:
        """``10%``, ``0.1`` or ``ttft=5%,tpot.p99=20%,15%`` (a bare value is the default).

        ``default`` applies to the statistics ``text`` does not name: the baseline
        gate's 10%, or the A/B comparison's own (``--llm-ab-threshold``, 5%), so
        ``ttft=8%`` there leaves tpot at 5%, not at the baseline's 10%.
        """
        if text is None or not str(text).strip():
            return cls(default)
        overrides: dict[str, float] = {}
        for part in str(text).split(","):
            m = _ITEM.match(part)
            if not m:
                raise LlmPerfUsageError(
                    f"bad threshold {part.strip()!r}; use e.g. '10%' or 'ttft.p99=20%,tpot=15%'",
                    where=where,
                )
            value = float(m["value"]) / (100.0 if m["pct"] else 1.0)
            if not value > 0:
                raise LlmPerfUsageError(f"threshold must be > 0, got {part.strip()!r}", where=where)
            key = m["key"]
            if key is None:
                default = value
                continue
            if key in PROCESS_METRICS or key in GPU_METRICS:
                overrides[key] = value
                continue
            if key.startswith("gpu."):
                raise LlmPerfUsageError(
                    f"unknown GPU metric {key!r} in {part.strip()!r}; known: "
                    f"{', '.join(GPU_METRICS)}",
                    where=where,
                )
            if key.startswith("startup."):
                raise LlmPerfUsageError(
                    f"unknown startup metric {key!r} in {part.strip()!r}; known: "
                    f"{', '.join(STARTUP_METRICS)}",
                    where=where,
                )
            if key.startswith("server."):
                overrides[_server_key(key, part, where)] = value
                continue
            replica = key.startswith("replica.")
            metric, stat = _metric_and_stat(key.partition(".")[2] if replica else key)
            known = (
                COMPARED_METRICS if replica else (*COMPARED_METRICS, *CONVERSATION_LATENCY_METRICS)
            )
            if metric not in known or (stat and (stat_problem(stat) or stat == "max")):
                raise LlmPerfUsageError(
                    f"unknown statistic {key!r} in {part.strip()!r}; metrics: "
                    f"{', '.join(known)}{' (after replica.)' if replica else ''}; "
                    f"statistics: {', '.join(STATS[:-1])} "
                    "or any pN.M (0 < N < 100)",
                    where=where,
                )
            overrides[key] = value
        return cls(default, overrides)

    def describe(self) -> dict[str, Any]:
        return {"default": self.default, **dict(self.overrides)}


def _server_key(key: str, part: str, where: str) -> str:
    """``server.queue_time.p99``: a latency of the server's own and a statistic its
    buckets give (pN or mean), compared only where named."""
    name, stat = split_server_key(key)
    latencies = [n for n, (kind, _) in COMMON_METRICS.items() if kind is MetricKind.LATENCY]
    if name not in latencies or not stat or (stat != "mean" and stat_problem(stat)):
        raise LlmPerfUsageError(
            f"unknown server statistic {key!r} in {part.strip()!r}; a server latency "
            f"({', '.join(latencies)}) and pN or mean, e.g. 'server.queue_time.p99=20%', "
            "or a process metric ("
            + ", ".join(n for n in PROCESS_METRICS if n.startswith("server."))
            + "), e.g. 'server.rss_max_mb=20%'",
            where=where,
        )
    return key


def split_server_key(key: str) -> tuple[str, str]:
    """``server.queue_time.p99.9`` -> ``("server.queue_time", "p99.9")``."""
    base, _, stat = key[len("server.") :].partition(".")
    return f"server.{base}", stat


class RegressionVerdict(StrEnum):
    """A statistic against its baseline, worst first (a ``StrEnum``: equal to, and written
    as, ``"regressed"`` etc.)."""

    REGRESSED = "regressed"  # slower beyond the threshold, significantly: fails the test
    IMPROVED = "improved"  # faster beyond the threshold, significantly: reported only
    UNCHANGED = "unchanged"
    INCONCLUSIVE = "inconclusive"  # too few samples, or nothing to compare with


class StatCheckBase:
    """What a baseline check and an A/B check (:class:`~pytest_llmperf.slo.paired.PairedCheck`)
    share: a ``verdict`` given as a plain name (from JSON, across xdist's wire) becomes the
    enum, and ``name`` is the statistic's (``ttft.p99``)."""

    metric: str
    stat: str
    verdict: RegressionVerdict

    def __post_init__(self) -> None:
        object.__setattr__(self, "verdict", RegressionVerdict(self.verdict))

    @property
    def name(self) -> str:
        """``ttft.p99``; a metric without a statistic (``startup.ready_s``) by itself."""
        return f"{self.metric}.{self.stat}" if self.stat else self.metric


@dataclass(frozen=True)
class RegressionCheck(StatCheckBase):
    """One statistic of one run compared with its baseline (values in ms; ``verdict`` may be
    given as a plain name)."""

    metric: str
    stat: str
    baseline: float | None
    current: float | None
    change: float | None  # current / baseline - 1
    threshold: float
    p_value: float | None
    verdict: RegressionVerdict
    run: str = ""
    samples: tuple[int, int] = (0, 0)  # (baseline, current)
    test: str = ""
    reason: str = ""
    compared_with: str = ""  # what the baseline was: a file, or "history (last N runs, …)"
    # Measured on the same server configuration and machine (the fingerprints compared:
    # server_metrics/fingerprint.py)? None: not known (no fingerprint on a side); ``differs``
    # names what differs, baseline -> current.
    comparable: bool | None = None
    differs: tuple[str, ...] = ()
    # Many comparisons (slo/multiplicity.py): the SD of the bootstrap's relative change, the
    # level this check was judged at (its share of the session's alpha), the smallest true
    # change it would catch with 80% power there, and its verdict judged alone at alpha
    spread: float | None = None
    level: float | None = None
    mde: float | None = None
    alone: str = ""
    # an inconclusive check that is a note, never a verdict of its test: a statistic
    # measured on neither side, or 0 ms in the baseline (a relative change is undefined)
    note_only: bool = False

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["verdict"] = self.verdict.value  # plain JSON: reports cross xdist's wire
        out["differs"] = list(self.differs)
        out["samples"] = {"baseline": self.samples[0], "current": self.samples[1]}
        out["name"] = self.name
        return out


def compare_accumulators(
    baseline: MetricsAccumulator,
    current: MetricsAccumulator,
    *,
    thresholds: Thresholds | None = None,
    alpha: float = DEFAULT_ALPHA,
    resamples: int = DEFAULT_RESAMPLES,
    seed: int = 0,
    run: str = "",
    compared_with: str = "",
    confidence: float = DEFAULT_CONFIDENCE,
) -> list[RegressionCheck]:
    """Compare every statistic of :meth:`Thresholds.stats` between two runs.

    ``compared_with`` says what the baseline is (e.g. ``history (last 5 runs, tags …)``);
    it is kept on every check and named in its ``test``. ``confidence`` is that of a
    percentile's order-statistic bounds (``--llm-confidence``).
    """
    thresholds = thresholds or Thresholds()
    test = (
        f"percentiles: one-sided exceedance test over the order statistics (the run's "
        f"{confidence:g} bounds quoted where undecided); means: one-sided bootstrap, "
        f"{resamples} resamples of both HDR histograms (ITL by request); alpha {alpha:g}"
    )
    if compared_with:
        test += f"; compared with {compared_with}"
    checks: list[RegressionCheck] = []
    wanted = [p for p in thresholds.stats() if p[0] not in CONVERSATION_LATENCY_METRICS]
    if baseline.conversations and current.conversations:  # both ran conversations
        wanted += thresholds.conversation_stats()
    for metric, stat in wanted:
        base_h = _histogram(baseline, metric)
        cur_h = _histogram(current, metric)
        limit = thresholds.for_stat(metric, stat)
        sizes: tuple[int | None, int | None] = (None, None)
        reason = ""
        if metric in BY_REQUEST:
            (nb, old_b), (nc, old_c) = request_count(baseline), request_count(current)
            sizes = (nb, nc)
            if old_b or old_c:
                side = "baseline" if old_b else "current"
                reason = (
                    f"{metric} resampled by request; the {side} predates per-request ITL "
                    "counts, so its request count is the TPOT count"
                )
        common: dict[str, Any] = {
            "metric": metric,
            "stat": stat,
            "threshold": limit,
            "run": run,
            "samples": (base_h.count, cur_h.count),
            "test": test,
            "compared_with": compared_with,
        }
        compared = compare_stat(
            base_h, cur_h, stat, sides=("baseline", "current"),
            resamples=resamples, seed=seed, sizes=sizes, metric=metric,
            limit=limit, alpha=alpha, confidence=confidence,
        )  # fmt: skip
        checks.append(
            RegressionCheck(
                baseline=compared.before,
                current=compared.after,
                **compared.outcome(limit, alpha, note=reason),
                **common,
            )
        )
    return checks


@dataclass(frozen=True)
class StatComparison:
    """One statistic on two sides (``before`` the baseline or reference, ``after`` the run
    judged): values rounded as reported, the relative ``change`` and the one-sided
    p-values (a percentile's from the exceedance test, a mean's from the bootstrap);
    ``reason`` instead when the sides cannot be compared (``note_only``: a note, not a
    verdict). ``undecided``: why a slowdown beyond the threshold was not decided, and
    how many samples would decide it."""

    before: float | None
    after: float | None
    change: float = 0.0
    p_slower: float = 1.0
    p_faster: float = 1.0
    reason: str = ""
    spread: float | None = None  # SD of the bootstrap's relative change (power)
    undecided: str = ""
    note_only: bool = False

    @property
    def rounded_change(self) -> float | None:
        return round(self.change, 6) if math.isfinite(self.change) else None

    def judge(
        self, limit: float, alpha: float, *, slower_too: bool = True, faster_too: bool = True
    ) -> tuple[RegressionVerdict, float]:
        """Regressed (improved) when slower (faster) beyond ``limit`` with p < ``alpha`` and
        ``slower_too`` (``faster_too``): a further test's agreement, where there is one."""
        change = self.change
        if change > limit and self.p_slower < alpha and slower_too:
            return RegressionVerdict.REGRESSED, self.p_slower
        if change < -limit and self.p_faster < alpha and faster_too:
            return RegressionVerdict.IMPROVED, self.p_faster
        return RegressionVerdict.UNCHANGED, (self.p_slower if change >= 0 else self.p_faster)

    def outcome(
        self,
        limit: float,
        alpha: float,
        *,
        slower_too: bool = True,
        faster_too: bool = True,
        note: str = "",
    ) -> dict[str, Any]:
        """A check's ``change``, ``p_value``, ``verdict``, ``reason`` and ``note_only``
        (keyword arguments of :class:`RegressionCheck` and
        :class:`~pytest_llmperf.slo.paired.PairedCheck` alike): inconclusive with the
        reason, else :meth:`judge`'s verdict and ``note`` (and, for a slowdown beyond the
        threshold left undecided, how many samples would decide it) as the reason."""
        if self.reason:
            return {
                "change": None,
                "p_value": None,
                "verdict": RegressionVerdict.INCONCLUSIVE,
                "reason": self.reason,
                "spread": None,
                "note_only": self.note_only,
            }
        verdict, p = self.judge(limit, alpha, slower_too=slower_too, faster_too=faster_too)
        why = note
        if verdict is RegressionVerdict.UNCHANGED and self.undecided:
            why = f"{note}; {self.undecided}" if note else self.undecided
        return {
            "change": self.rounded_change,
            "p_value": _rounded_p(p),
            "verdict": verdict,
            "reason": why,
            "spread": None if self.spread is None else round(self.spread, 6),
            "note_only": False,
        }


def _rounded_p(p: float) -> float:
    """Six decimals, or three significant figures below 0.001 (a session's many
    comparisons are judged at levels far below it)."""
    return round(p, 6) if p >= 1e-3 else float(f"{p:.3g}")


def compare_stat(
    before: LatencyHistogram,
    after: LatencyHistogram,
    stat: str,
    *,
    sides: tuple[str, str],
    resamples: int = DEFAULT_RESAMPLES,
    seed: int = 0,
    sizes: tuple[int | None, int | None] = (None, None),
    metric: str = "",
    limit: float = DEFAULT_THRESHOLD,
    alpha: float = DEFAULT_ALPHA,
    confidence: float = DEFAULT_CONFIDENCE,
) -> StatComparison:
    """``stat`` of ``after`` against ``before``.

    A note (``note_only``) when neither side measured it, or ``before``'s value is 0 and
    ``after``'s is not (a relative change is undefined: :func:`zero_baseline`, naming
    ``metric``); inconclusive when only one side measured it, or (a percentile) when
    runs of these sizes could never decide it at ``alpha``, saying how many samples
    would (the reason names the two ``sides``). Else the change and the p-values: a
    percentile's from the order statistics (:mod:`.percentile_change`: the exceedance
    test, and the run's bounds at ``confidence`` against ``limit``), a mean's from the
    bootstrap. Both 0: no change."""
    name = f"{metric}.{stat}" if metric else stat
    if not before.count or not after.count:
        have = f"have {before.count} ({sides[0]}) and {after.count} ({sides[1]})"
        if not before.count and not after.count:
            return StatComparison(None, None, reason=f"{name}: no samples on either side",
                                  note_only=True)  # fmt: skip
        return StatComparison(
            _value(before, stat),
            _value(after, stat),
            reason=f"{name}: one side has no samples, {have}",
        )
    b, c = before.stat(stat), after.stat(stat)
    if b <= 0 < c:
        return StatComparison(
            round(b, 4), round(c, 4), reason=zero_baseline(name, sides[0]), note_only=True
        )
    change = (c / b - 1.0) if b > 0 else 0.0  # both 0: no change
    p_slower, p_faster, sd = bootstrap_test(
        before, after, stat, resamples=resamples, seed=seed, sizes=sizes
    )
    spread = sd / b if b > 0 else None
    percentile = _percentile(stat)
    if percentile is None or b <= 0:
        return StatComparison(round(b, 4), round(c, 4), change, p_slower, p_faster, spread=spread)
    found = compare_percentile(
        before, after, percentile, limit=limit, alpha=alpha, confidence=confidence, sizes=sizes
    )
    m, n = found.sizes
    if not found.decidable:
        would = f"about {found.needed} on each side would" if found.needed else "more would"
        return StatComparison(
            round(b, 4),
            round(c, 4),
            reason=f"{stat} cannot be decided at alpha {alpha:g} with {m} ({sides[0]}) and "
            f"{n} ({sides[1]}) samples, whatever they show: {would}",
        )
    undecided = ""
    if change > limit and found.p_slower >= alpha:
        would = (
            f"about {found.needed} samples on each side would decide it (if the "
            "distributions stay as observed)"
            if found.needed
            else "more samples would not decide it"
        )
        sure = "" if found.beyond else f", {(1 + limit) * b:.4g} ms within the run's bounds"
        undecided = (
            f"{stat} {change:+.1%} is beyond the {limit:.0%} threshold but not significant "
            f"(exceedance p={found.p_slower:.3g} >= {alpha:g}; the run's {confidence:g} "
            f"bounds {found.lower:.4g}..{found.upper:.4g} ms{sure}) with {m} and {n} "
            f"samples: {would}"
        )
    return StatComparison(
        round(b, 4),
        round(c, 4),
        change,
        found.p_slower,
        found.p_faster,
        spread=spread,
        undecided=undecided,
    )


def zero_baseline(name: str, side: str) -> str:
    """Why ``name`` (``tpot.p50``) is inconclusive when ``side``'s value is 0 and the other's
    is not: a change relative to 0 is undefined, not infinite. TPOT and ITL are 0 when a
    server sends each reply in one read (llama-server; vLLM CPU under load)."""
    hint = " (every token in one read?)" if name.split(".")[0] in BURST_METRICS else ""
    return f"{name}: {side} is 0 ms: a relative change is undefined{hint}"


def inconclusive_check(run: str, reason: str, *, compared_with: str = "") -> RegressionCheck:
    """A run that could not be compared at all (``metric`` and ``stat`` ``*``: no baseline
    run, or one that measured another experiment): an inconclusive verdict of its test,
    which follows ``--llm-inconclusive``."""
    return RegressionCheck(
        metric="*",
        stat="*",
        baseline=None,
        current=None,
        change=None,
        threshold=0.0,
        p_value=None,
        verdict=RegressionVerdict.INCONCLUSIVE,
        run=run,
        reason=reason,
        compared_with=compared_with,
    )


def _metric_and_stat(key: str) -> tuple[str, str]:
    """``ttft.p99`` -> ``("ttft", "p99")``; ``conversation.makespan.p90`` ->
    ``("conversation.makespan", "p90")`` (the conversation metrics' names have a dot)."""
    if key.startswith("conversation."):
        head, _, rest = key.partition(".")
        name, _, stat = rest.partition(".")
        return f"{head}.{name}", stat
    metric, _, stat = key.partition(".")
    return metric, stat


def _histogram(acc: MetricsAccumulator, metric: str) -> LatencyHistogram:
    """A run's histogram of ``metric``: a request latency's, or a conversation's
    (``conversation.makespan``: empty where the run had no conversation)."""
    if metric in CONVERSATION_LATENCY_METRICS:
        tracker = acc.conversations
        name = metric.partition(".")[2]
        return tracker.stats().histogram(name) if tracker else LatencyHistogram()
    return acc.histograms[metric]


def request_count(acc: MetricsAccumulator) -> tuple[int, bool]:
    """How many requests contributed ITL gaps, and whether that was inferred from an old
    state (no ``itl_request_mean`` histogram: the TPOT count stands in)."""
    per_request = acc.histograms.get("itl_request_mean")
    if per_request is not None and per_request.count:
        return per_request.count, False
    if not acc.histograms["itl"].count:
        return 0, False
    return acc.histograms["tpot"].count, True


def bootstrap_p_value(
    baseline: LatencyHistogram,
    current: LatencyHistogram,
    stat: str,
    *,
    resamples: int = DEFAULT_RESAMPLES,
    seed: int = 0,
    sizes: tuple[int | None, int | None] = (None, None),
) -> tuple[float, float]:
    """One-sided p-values ``(current not slower, current not faster)`` for ``stat``.

    Resamples each histogram ``resamples`` times (multinomial over its
    buckets) and counts how often the resampled change is <= 0 (resp. >= 0).
    ``sizes`` are the effective sample sizes ``(baseline, current)`` when the
    samples are not independent (ITL: the request counts); None is the
    histogram's count. Beyond the resamples' resolution (fewer than
    :data:`MIN_TAIL` resamples in a tail) the tail is the normal approximation of
    the resampled changes, ``Phi(-mean / sd)``: the many comparisons of a session
    are judged at levels far below ``1 / (resamples + 1)``
    (:mod:`pytest_llmperf.slo.multiplicity`).
    """
    p_slower, p_faster, _ = bootstrap_test(
        baseline, current, stat, resamples=resamples, seed=seed, sizes=sizes
    )
    return p_slower, p_faster


def bootstrap_test(
    baseline: LatencyHistogram,
    current: LatencyHistogram,
    stat: str,
    *,
    resamples: int = DEFAULT_RESAMPLES,
    seed: int = 0,
    sizes: tuple[int | None, int | None] = (None, None),
) -> tuple[float, float, float]:
    """:func:`bootstrap_p_value`'s two p-values and the standard deviation of the
    resampled difference ``current − baseline`` (ms), from one set of resamples."""
    rng = np.random.default_rng(seed)
    b = _bootstrap_stats(baseline, stat, resamples, rng, sizes[0])
    c = _bootstrap_stats(current, stat, resamples, rng, sizes[1])
    diff = c - b
    sd = float(np.std(diff, ddof=1)) if resamples > 1 else 0.0
    mean = float(np.mean(diff))
    below, above = int(np.count_nonzero(diff <= 0)), int(np.count_nonzero(diff >= 0))
    not_slower = (1 + below) / (resamples + 1)
    not_faster = (1 + above) / (resamples + 1)
    if below < MIN_TAIL:
        not_slower = _normal_tail(mean, sd)
    if above < MIN_TAIL:
        not_faster = _normal_tail(-mean, sd)
    return not_slower, not_faster, sd


def _normal_tail(mean: float, sd: float) -> float:
    """P(X <= 0) for X normal with ``mean`` and ``sd``: ``Phi(-mean / sd)``."""
    if sd <= 0:
        return 0.0 if mean > 0 else 1.0
    return NormalDist().cdf(-mean / sd)


def _bootstrap_stats(
    hist: LatencyHistogram,
    stat: str,
    resamples: int,
    rng: np.random.Generator,
    size: int | None = None,
) -> np.ndarray:
    """The statistic over ``resamples`` bootstrap resamples of ``hist``.

    A percentile is the k-th order statistic of the resample, and for n
    i.i.d. draws ``F(X_(k)) ~ Beta(k, n - k + 1)``: drawing that uniform order
    statistic and mapping it through the histogram's inverse CDF gives the
    exact bootstrap distribution in O(resamples), whatever the sample count.
    The mean uses multinomial resamples of the buckets. ``size`` (default: the
    count) is the number of draws per resample: the effective sample size.
    """
    values, counts = _buckets(hist)
    total = int(counts.sum())
    n = total if size is None else max(1, min(int(size), total))
    cdf = np.cumsum(counts) / total
    percentile = _percentile(stat)
    if percentile is not None:
        rank = nearest_rank(percentile, n)
        u = rng.beta(rank, n - rank + 1, size=resamples)
        index = np.searchsorted(cdf, u, side="left")
        return values[np.minimum(index, len(values) - 1)]
    out = np.empty(resamples)
    shares = counts / total
    for start in range(0, resamples, _CHUNK):
        size = min(_CHUNK, resamples - start)
        out[start : start + size] = rng.multinomial(n, shares, size=size) @ values / n
    return out


def _buckets(hist: LatencyHistogram) -> tuple[np.ndarray, np.ndarray]:
    """Bucket values (ms) and counts, from the histogram's public CDF."""
    points = hist.cdf_points(max_points=1 << 30)
    values = np.array([v for v, _ in points], dtype=float)
    cum = np.rint(np.array([f for _, f in points]) * hist.count)
    counts = np.diff(cum, prepend=0.0).clip(min=0)
    return values, counts


def _percentile(stat: str) -> float | None:
    return percentile_of(stat)


def _value(hist: LatencyHistogram, stat: str) -> float | None:
    return round(hist.stat(stat), 4) if hist.count else None


def worst(checks: Iterable[RegressionCheck]) -> RegressionVerdict:
    """``regressed`` if any, else ``improved`` if any, else ``unchanged``/``inconclusive``."""
    verdicts = {c.verdict for c in checks}
    for verdict in RegressionVerdict:
        if verdict in verdicts:
            return verdict
    return RegressionVerdict.UNCHANGED
