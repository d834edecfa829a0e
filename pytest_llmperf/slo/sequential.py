"""Always-valid percentile bounds: deciding a percentile SLO while the run goes on.

``llm_load(..., until="decided")`` / ``--llm-until-decided`` look at a run's
histograms as the samples arrive and end the run once every gated SLO is
decided. The fixed-size bounds of :mod:`.quantile_bounds` are valid for one
look at a sample size fixed in advance; looked at after every request they
would be crossed by chance far more often than ``1 − c``. The bounds here hold
at every sample size at once (a *confidence sequence*), so a verdict taken at
any look, or at a look chosen from the data, is wrong with probability at most
``1 − c``.

**Method** (a mixture likelihood-ratio martingale and Ville's inequality). Let
``Y_i = 1`` when sample ``i`` is under the target ``t``, ``θ = P(Y_i = 1)``,
``p`` the percentile as a fraction, ``n`` the samples so far and ``m`` those
under ``t``. ``pN < t`` is false exactly when ``θ <= p`` (continuous latency),
true only when ``θ >= p``. With alternatives ``θ_j = expit(logit p + δ_j)``,
``δ_j ∈ D = {2^(k/2): k = −8 … 8}`` (17 values, log-odds shifts from 0.0625
to 16) and equal weights ``w = 1/17``,

    E⁺_n = Σ_j w · (θ_j / p)^m · ((1 − θ_j)/(1 − p))^(n − m)      (θ_j > p)
    E⁻_n = the same with θ_j = expit(logit p − δ_j)                 (θ_j < p)

Each factor ``(θ_j/p)^Y ((1 − θ_j)/(1 − p))^(1 − Y)`` has expectation
``θθ_j/p + (1 − θ)(1 − θ_j)/(1 − p) <= 1`` whenever ``θ <= p`` (for ``θ_j > p``;
``θ >= p`` for ``θ_j < p``), so ``E⁺`` is a non-negative supermartingale with
``E⁺_0 = 1`` under every law with ``θ <= p``, and by Ville's inequality
``P(E⁺_n >= 1/α for some n) <= α``, ``α = 1 − c``; likewise ``E⁻`` when
``θ >= p``. Hence:

- **pass** (``pN < t``) when ``E⁺_n >= 1/α``: wrong only if the true ``θ <= p``,
  probability at most ``α`` over the whole run, however often it is looked at
  and whenever it stops;
- **fail** when ``E⁻_n >= 1/α``: wrong only if the true percentile is under
  ``t``, and then ``θ >= p``: probability at most ``α`` likewise.

``E⁺_n`` grows with ``m`` and ``E⁻_n`` falls with it, so at each ``n`` the rule
is a pair of ranks, exactly like the fixed-size one: ``r_hi(n)`` the smallest
``m`` with ``E⁺_n >= 1/α`` and ``r_lo(n) − 1`` the largest with
``E⁻_n >= 1/α``. The order statistics ``X(r_lo(n))`` and ``X(r_hi(n))`` are
then a confidence sequence of the percentile, read from the HDR histogram
(conservative bucket edges) by the same code as the fixed-size interval
(:func:`sequential_rank_bounds` has the contract of
:func:`~.quantile_bounds.rank_bounds`). ``>``/``>=`` SLOs use the same two
bounds, mirrored.

**Price of looking**: the always-valid interval is wider than the fixed-size
one at the same ``n`` (threshold ``17/α`` on a mixture instead of one exact
tail): all 46 samples of a p90 under the target decide it at a fixed size, 71
when looked at after every request. A run with ``until="decided"`` is judged
by these bounds at its end too, never by the fixed-size ones (that second look
would spend ``α`` twice).

**What can stop a run early**: percentile SLOs of client latencies
(``ttft.p99 < 500ms``, any of ``<``, ``<=``, ``>``, ``>=``). ``mean``, ``max``,
``pN == t``, rates (``error_rate``, throughputs, goodput) and the server's
metrics (``server.*``, scraped at the run's end) have no always-valid verdict
here: a test gating any of them runs to its declared size
(:func:`stop_blockers` names them); so do the server process's resources
(``server.rss_growth_mb``: a run stopped early would grow less). Its startup
(``startup.ready_s``) was measured before the run and neither blocks nor waits.

Assumption: the samples are independent with a common law (as for the
fixed-size bounds); under positive autocorrelation (batching) both are
optimistic.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from pytest_llmperf.results.accumulator import MetricsAccumulator
from pytest_llmperf.slo.quantile_bounds import decided
from pytest_llmperf.specs.rulesets import ruleset_bar
from pytest_llmperf.specs.slo import DEFAULT_CONFIDENCE, Slo

__all__ = [
    "MIN_REQUESTS",
    "SHIFTS",
    "Decision",
    "decide_run",
    "decider",
    "log_evidence",
    "sequential_rank_bounds",
    "sequential_rank_table",
    "stop_blockers",
    "stop_decidable",
]

SHIFTS: tuple[float, ...] = tuple(2.0 ** (k / 2) for k in range(-8, 9))  # δ_j, log-odds
MIN_REQUESTS = 20  # a run never stops as decided before this many measured samples


def _alternatives(p: float, side: int) -> tuple[np.ndarray, np.ndarray]:
    """``(log(θ_j/p), log((1 − θ_j)/(1 − p)))`` for the alternatives above (side +1) or
    below (side −1) ``p``."""
    logit = math.log(p) - math.log1p(-p)
    z = logit + side * np.asarray(SHIFTS)
    log_theta = -np.logaddexp(0.0, -z)  # log expit(z)
    log_one_minus = -np.logaddexp(0.0, z)  # log(1 − expit(z))
    return log_theta - math.log(p), log_one_minus - math.log1p(-p)


def log_evidence(
    n: np.ndarray | int, m: np.ndarray | int, percentile: float, side: int
) -> np.ndarray:
    """``log E⁺_n`` (side +1) or ``log E⁻_n`` (side −1) for ``m`` of ``n`` samples under
    the target (broadcast over ``n`` and ``m``)."""
    a, b = _alternatives(percentile / 100.0, side)
    n_arr = np.asarray(n, dtype=np.float64)[..., None]
    m_arr = np.asarray(m, dtype=np.float64)[..., None]
    terms = m_arr * a + (n_arr - m_arr) * b - math.log(len(SHIFTS))
    top = terms.max(axis=-1)
    out: np.ndarray = top + np.log(np.exp(terms - top[..., None]).sum(axis=-1))
    return out


def _thresholds(ns: np.ndarray, percentile: float, confidence: float) -> tuple[np.ndarray, ...]:
    """Per ``n``: ``k_hi`` the smallest ``m`` in ``0..n`` with ``E⁺ >= 1/α`` (``n + 1``:
    none) and ``k_lo`` the largest with ``E⁻ >= 1/α`` (−1: none), by a bisection
    vectorised over ``ns`` (``E⁺`` rises with ``m``, ``E⁻`` falls)."""
    level = math.log(1.0 / (1.0 - confidence))
    ns = np.asarray(ns, dtype=np.int64)
    # k_hi: invariant E⁺(lo) < level (lo = −1 virtual), E⁺(hi) >= level (hi = n + 1 virtual)
    lo, hi = np.full_like(ns, -1), ns + 1
    while np.any(hi - lo > 1):
        mid = (lo + hi) // 2
        active = hi - lo > 1
        ok = log_evidence(ns, np.clip(mid, 0, ns), percentile, +1) >= level
        hi = np.where(active & ok, mid, hi)
        lo = np.where(active & ~ok, mid, lo)
    k_hi = hi
    # k_lo: invariant E⁻(lo) >= level (lo = −1 virtual), E⁻(hi) < level (hi = n + 1 virtual)
    lo, hi = np.full_like(ns, -1), ns + 1
    while np.any(hi - lo > 1):
        mid = (lo + hi) // 2
        active = hi - lo > 1
        ok = log_evidence(ns, np.clip(mid, 0, ns), percentile, -1) >= level
        lo = np.where(active & ok, mid, lo)
        hi = np.where(active & ~ok, mid, hi)
    return lo, k_hi


def sequential_rank_bounds(
    n: int, percentile: float, confidence: float
) -> tuple[int | None, int | None]:
    """1-based ranks ``(r_lo, r_hi)`` of the order statistics that bound the ``percentile``
    of ``n`` samples at ``confidence``, valid at every ``n`` at once (the contract of
    :func:`~.quantile_bounds.rank_bounds`); None where no rank does."""
    if n <= 0:
        return None, None
    k_lo, k_hi = (int(v[0]) for v in _thresholds(np.array([n]), percentile, confidence))
    return (k_lo + 1 if k_lo >= 0 else None), (k_hi if 1 <= k_hi <= n else None)


@lru_cache(maxsize=64)
def sequential_rank_table(
    n_max: int, percentile: float, confidence: float
) -> tuple[np.ndarray, np.ndarray]:
    """``(k_lo, k_hi)`` for every ``n`` in ``0..n_max`` (index ``n``): with ``m`` of ``n``
    samples under the target, ``pN < t`` passes when ``m >= k_hi[n]`` and fails when
    ``m <= k_lo[n]`` (``k_hi = n + 1`` / ``k_lo = −1``: no count does)."""
    ns = np.arange(n_max + 1, dtype=np.int64)
    k_lo, k_hi = _thresholds(ns, percentile, confidence)
    k_lo[0], k_hi[0] = -1, 1
    k_lo.setflags(write=False)
    k_hi.setflags(write=False)
    return k_lo, k_hi


def stop_decidable(slo: Slo) -> bool:
    """Can ``slo`` be decided before a run's end (a client latency percentile of the whole
    run's requests, not ``==``)?"""
    return (
        slo.is_latency
        and not slo.is_server
        and not slo.is_conversation  # a conversation's figures are whole at its end only
        and slo.turn_band is None  # judged on its band's requests, not the run's
        and not slo.in_fleet_scope  # judged on each replica's requests, or a pool's pages
        and slo.percentile is not None
        and slo.op != "=="
    )


def _before_the_run(slo: Slo) -> bool:
    """Was ``slo``'s value measured before the run (the server's startup)?"""
    return slo.is_process and slo.metric.startswith("startup.")


def stop_blockers(slos: Iterable[Slo]) -> list[str]:
    """The SLOs (their expressions) that keep a run going to its declared size."""
    return [slo.expr for slo in slos if not stop_decidable(slo) and not _before_the_run(slo)]


@dataclass(frozen=True)
class Decision:
    """Whether a run's SLOs are all decided at one look, and what each says.

    ``verdicts`` maps each SLO's expression to True (pass), False (fail) or None
    (undecided); ``samples`` is the least sample count among them.
    """

    done: bool
    verdicts: dict[str, bool | None]
    samples: int
    why: str = ""


def _decide(
    slo: Slo, acc: MetricsAccumulator, confidence: float, pending: int = 0
) -> tuple[bool | None, int]:
    """One SLO's verdict at a look (None: undecided) and its sample count.

    ``pending`` requests were issued and have not ended: their values are unknown, and
    they are the slow ones more often than not (a fast request ends first). Leaving
    them out would bias a live look towards "pass", so the bounds are those of all
    ``n + pending`` samples with the unknown ones at their worst for each side: above
    every known value for the upper bound (a pass), below every one for the lower (a
    fail). The mixture statistic is monotone in the count under the target, so a
    decision that holds at the worst case holds whatever the pending values turn out
    to be, and Ville's bound over the issue order still applies.
    """
    hist = acc.histograms[slo.metric]
    n = hist.count
    percentile = slo.percentile
    if n == 0 or percentile is None:
        return None, n
    r_lo, r_hi = sequential_rank_bounds(n + pending, percentile, slo.confidence or confidence)
    known_lo = r_lo - pending if r_lo is not None else 0  # the rank among the known values
    lower = hist.rank_range_ms(known_lo)[0] if known_lo >= 1 else 0.0
    upper = hist.rank_range_ms(r_hi)[1] if r_hi is not None and r_hi <= n else math.inf
    return decided(slo.op, lower, upper, slo.target), n


def decide_run(
    slos: Sequence[Slo],
    acc: MetricsAccumulator,
    *,
    confidence: float = DEFAULT_CONFIDENCE,
    minimum: int = MIN_REQUESTS,
    bars: Mapping[Slo, tuple[int, float]] | None = None,
    pending: int = 0,
) -> Decision:
    """Is every one of ``slos`` decided on the live accumulator ``acc`` (its measured,
    post-warm-up samples)? Never before ``minimum`` samples of each, never with an SLO
    that cannot be decided early (:func:`stop_blockers`), never with no SLO at all.

    ``bars``: an SLO's ``(min_count, min_duration_s)`` from the rulesets that name it
    (:func:`~pytest_llmperf.specs.rulesets.ruleset_bars`): its verdict at the end would need
    them, so a stop waits for them too (a run stopped short of a ruleset's minimum would
    only be judged inconclusive). ``pending``: requests issued and not ended, counted
    at their worst for each side (:func:`_decide`).
    """
    if not slos:
        return Decision(False, {}, 0, "no SLO to decide")
    slos = [slo for slo in slos if not _before_the_run(slo)]
    if not slos:
        return Decision(False, {}, 0, "no SLO of the run to decide")
    blockers = stop_blockers(slos)
    if blockers:
        return Decision(False, {}, 0, "not decidable before the end: " + ", ".join(blockers))
    verdicts: dict[str, bool | None] = {}
    least = math.inf
    short: list[str] = []
    window_s = acc.window_s
    for slo in slos:
        verdict, n = _decide(slo, acc, confidence, pending)
        verdicts[slo.expr] = verdict
        least = min(least, n)
        count, duration = ruleset_bar(bars, slo)
        if n < count:
            short.append(f"{slo.expr} has {n} of its ruleset's {count} samples")
        elif window_s < duration:
            short.append(f"{slo.expr} has {window_s:.1f} s of its ruleset's {duration:g} s")
    samples = int(least)
    if samples < minimum:
        return Decision(False, verdicts, samples, f"{samples} samples, a stop needs >= {minimum}")
    if short:
        return Decision(False, verdicts, samples, "; ".join(short))
    undecided = [expr for expr, v in verdicts.items() if v is None]
    if undecided:
        return Decision(False, verdicts, samples, "undecided: " + ", ".join(undecided))
    return Decision(True, verdicts, samples, f"every SLO decided after {samples} samples")


def decider(
    slos: Sequence[Slo],
    confidence: float = DEFAULT_CONFIDENCE,
    *,
    bars: Mapping[Slo, tuple[int, float]] | None = None,
) -> Callable[[MetricsAccumulator, int], tuple[bool, str]]:
    """The look a run with ``until="decided"`` takes at its live accumulator and the count
    of its requests in flight: ``(every SLO decided?, why)`` (:func:`decide_run`;
    ``bars``: its rulesets' minimums)."""
    frozen = list(slos)
    frozen_bars = dict(bars or {})

    def look(acc: MetricsAccumulator, pending: int) -> tuple[bool, str]:
        decision = decide_run(frozen, acc, confidence=confidence, bars=frozen_bars, pending=pending)
        return decision.done, decision.why

    return look
