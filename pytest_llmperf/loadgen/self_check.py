"""The load generator's self-check: was the generator, not the server, the bottleneck?

A verdict on a run the client could not drive as planned says nothing about
the server, so every run reports ``self_check`` and the verdicts treat a
``generator_bound`` run as inconclusive (see docs/measurement.md). The check
reads only what the run measured: the schedule lag histogram, the issuing
side's :class:`~pytest_llmperf.loadgen.issue.IssueStats` and the client's CPU
time.
"""

from __future__ import annotations

from pytest_llmperf.loadgen.issue import IssueStats
from pytest_llmperf.loadgen.result import StopReason
from pytest_llmperf.metrics.accumulator import MetricsAccumulator
from pytest_llmperf.metrics.sample_size import supported_percentile
from pytest_llmperf.specs.load import LoadSpec

__all__ = [
    "GENERATOR_BOUND_CPU_SHARE",
    "GENERATOR_BOUND_LAG_MS",
    "GENERATOR_BOUND_RATE_SHARE",
    "generator_self_check",
]

GENERATOR_BOUND_RATE_SHARE = 0.9
GENERATOR_BOUND_LAG_MS = 10.0
GENERATOR_BOUND_CPU_SHARE = 0.95  # closed loop: a client process this busy was the bottleneck


def generator_self_check(
    accumulator: MetricsAccumulator,
    stats: IssueStats,
    load: LoadSpec,
    *,
    workers: int,
    wall_s: float,
    stop_reason: StopReason | None,
) -> dict[str, object]:
    """The run's ``self_check`` entry, with ``generator_bound`` and the reasons for it.

    ``planned_rate`` is the pattern's nominal rate; ``schedule_rate`` the
    rate of the schedule actually drawn (a Poisson sample differs from
    its mean); ``achieved_rate`` the rate the sends really happened at.
    The generator is the bottleneck when (open loop) it sent at under 90%
    of the schedule's rate or its schedule_lag p99 exceeds 10 ms (p90 on runs
    too small for a p99, p50 on smaller still: see metrics.sample_size), or
    (closed loop) a client process was busy at least 95% of the time.
    Under ``max_concurrency`` a send counts when the generator queued it
    and the lag excludes ``queue_wait``: the cap's queueing is the load
    shape the test asked for, not a generator fault.
    """
    lag = accumulator.histograms["schedule_lag"]
    lag_p50, lag_p99 = lag.p(50), lag.p(99)
    # Judge the lag at the highest percentile the sample count supports: on a
    # 100-request run "p99" is the slowest send, and one hiccup is not a bottleneck.
    judged_p = supported_percentile(lag.count, 99.0, (90.0, 50.0))
    check: dict[str, object] = {
        "schedule_lag_p50_ms": None if lag_p50 != lag_p50 else round(lag_p50, 4),
        "schedule_lag_p99_ms": None if lag_p99 != lag_p99 else round(lag_p99, 4),
        "client_cpu_s": round(stats.cpu_s, 4),
        "client_cpu_share": round(stats.cpu_s / wall_s, 4) if wall_s > 0 else None,
        "workers": workers,
        "planned_rate": None,
        "schedule_rate": None,
        "achieved_rate": None,
    }
    if stats.worker_cpu_s:
        check["worker_cpu_s"] = stats.worker_cpu_s
    reasons: list[str] = []
    n = stats.tracked_issued
    if n > 1:
        span = (stats.last_send_ns - stats.first_send_ns) / 1e9
        achieved = (n - 1) / span if span > 0 else float("inf")
        check["achieved_rate"] = round(achieved, 4)
        planned_span = (stats.last_planned_ns - stats.first_planned_ns) / 1e9
        if load.open_loop and planned_span > 0:
            # stages, ramps and traces have no single planned rate: the drawn schedule's counts
            schedule = (n - 1) / planned_span
            check["planned_rate"] = load.rate
            check["schedule_rate"] = round(schedule, 4)
            share = achieved / schedule if schedule else 1.0
            check["achieved_share"] = round(share, 4)
            if share < GENERATOR_BOUND_RATE_SHARE and stop_reason is StopReason.COMPLETED:
                planned = f" (planned {load.rate:g}/s)" if load.rate else ""
                reasons.append(
                    f"achieved send rate {achieved:.1f}/s < 90% of the schedule's "
                    f"{schedule:.1f}/s{planned}"
                )
    if load.open_loop and judged_p is not None:
        judged = lag.p(judged_p)
        check["schedule_lag_judged_at"] = f"p{judged_p:g}"
        if judged > GENERATOR_BOUND_LAG_MS:
            reasons.append(
                f"schedule_lag p{judged_p:g} {judged:.1f} ms > {GENERATOR_BOUND_LAG_MS:g} ms"
            )
    per_process = stats.cpu_s / wall_s / workers if wall_s > 0 else 0.0
    if not load.open_loop and per_process >= GENERATOR_BOUND_CPU_SHARE:
        # A closed loop has no schedule to fall behind; a saturated client core is the sign.
        reasons.append(
            f"client CPU {per_process:.0%} of each process's wall time "
            f">= {GENERATOR_BOUND_CPU_SHARE:.0%}: the client, not the server, set the pace"
        )
    check["generator_bound"] = bool(reasons)
    check["reasons"] = reasons
    return check
