"""The load generator's self-check: was the generator, not the server, the bottleneck?

A verdict on a run the client could not drive as planned says nothing about
the server, so every run reports ``self_check`` and the verdicts treat a
``generator_bound`` run as inconclusive (see docs/measurement.md). The check
reads only what the run measured: the schedule lag histogram, the issuing
side's :class:`~pytest_llmperf.loadgen.issue.stats.IssueStats` and the client's CPU
time.

A run spread over Ray actors (``--llm-workers=ray:N``) is also judged actor
by actor (:class:`WorkerReport`): one actor that fell behind its schedule,
started at an uncertain instant or was lost makes the whole run inconclusive,
by name, even when the merged histogram hides it among the others.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from pytest_llmperf.loadgen.issue.stats import IssueStats
from pytest_llmperf.metrics.sample_size import supported_percentile
from pytest_llmperf.results.accumulator import MetricsAccumulator
from pytest_llmperf.results.run_result import StopReason
from pytest_llmperf.specs.load import LoadSpec, PacingMode

__all__ = [
    "GENERATOR_BOUND_CPU_SHARE",
    "GENERATOR_BOUND_LAG_MS",
    "GENERATOR_BOUND_RATE_SHARE",
    "WorkerReport",
    "generator_self_check",
]

GENERATOR_BOUND_RATE_SHARE = 0.9
GENERATOR_BOUND_LAG_MS = 10.0
GENERATOR_BOUND_CPU_SHARE = 0.95  # closed loop: a client process this busy was the bottleneck


@dataclass
class WorkerReport:
    """One load-generator worker as the self-check sees it: where it ran and how it kept time.

    Made by the Ray pool for each actor (local worker processes share the
    parent's host and clock, and report none). ``accumulator``: the worker's
    own part before the merge (None when it was lost); ``clock_offset_ns`` and
    ``clock_rtt_ns``: its wall clock minus the parent's and the ping round
    trip that estimate came from (None on the parent's own node, where the
    monotonic clock is shared); ``lost``: why its results are missing.
    """

    name: str
    backend: str
    node_id: str = ""
    host: str = ""
    actor_id: str = ""
    accumulator: MetricsAccumulator | None = None
    clock_offset_ns: int | None = None
    clock_rtt_ns: int | None = None
    lost: str = ""
    cpus: float = 1.0

    @property
    def where(self) -> str:
        return f"{self.name} on {self.host or '?'} (node {self.node_id[:12] or '?'})"

    def describe(self) -> dict[str, object]:
        acc = self.accumulator
        lag = acc.histograms["schedule_lag"] if acc is not None else None
        lag_p99 = lag.p(99) if lag is not None else float("nan")
        return {
            "worker": self.name,
            "node_id": self.node_id,
            "host": self.host,
            "actor_id": self.actor_id,
            "cpus": self.cpus,
            "state": "lost" if self.lost else "ok",
            "requests": acc.issued if acc is not None else None,
            "schedule_lag_p99_ms": None if lag_p99 != lag_p99 else round(lag_p99, 4),
            "clock_offset_ms": _ms(self.clock_offset_ns),
            "clock_rtt_ms": _ms(self.clock_rtt_ns),
        }


def generator_self_check(
    accumulator: MetricsAccumulator,
    stats: IssueStats,
    load: LoadSpec,
    *,
    workers: int,
    wall_s: float,
    stop_reason: StopReason | None,
    worker_reports: Sequence[WorkerReport] = (),
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
    shape the test asked for, not a generator fault. With ``worker_reports``
    (Ray actors) each worker is judged too (:func:`_judge_workers`).
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
    if load.pacing is PacingMode.PRECISE:  # the CPU its spins cost
        check["pacing_spin_s"] = round(stats.spin_s, 4)
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
    if worker_reports:
        reasons += _judge_workers(check, worker_reports, open_loop=load.open_loop)
    check["generator_bound"] = bool(reasons)
    check["reasons"] = reasons
    return check


def _judge_workers(
    check: dict[str, object], reports: Sequence[WorkerReport], *, open_loop: bool
) -> list[str]:
    """Where the workers ran (``worker_nodes``, ``worker_runs``) and which of them make the
    run inconclusive: a lost one, an open-loop one whose own schedule lag is over the limit,
    or one whose start instant is uncertain by more than that limit (half its clock ping)."""
    nodes: dict[str, dict[str, object]] = {}
    for r in reports:
        node = nodes.setdefault(r.node_id, {"node_id": r.node_id, "host": r.host, "workers": 0})
        node["workers"] = int(str(node["workers"])) + 1
    check["worker_backend"] = reports[0].backend
    check["worker_nodes"] = list(nodes.values())
    check["worker_runs"] = [r.describe() for r in reports]
    reasons: list[str] = []
    for r in reports:
        if r.lost:
            reasons.append(r.lost)
            continue
        lag = r.accumulator.histograms["schedule_lag"] if r.accumulator is not None else None
        judged_p = supported_percentile(lag.count, 99.0, (90.0, 50.0)) if lag else None
        if open_loop and lag is not None and judged_p is not None:
            judged = lag.p(judged_p)
            if judged > GENERATOR_BOUND_LAG_MS:
                reasons.append(
                    f"{r.where}: schedule_lag p{judged_p:g} {judged:.1f} ms > "
                    f"{GENERATOR_BOUND_LAG_MS:g} ms"
                )
        if r.clock_rtt_ns is not None and r.clock_rtt_ns / 2e6 > GENERATOR_BOUND_LAG_MS:
            reasons.append(
                f"{r.where}: its start instant is uncertain by up to {r.clock_rtt_ns / 2e6:.1f} "
                f"ms (clock ping round trip {r.clock_rtt_ns / 1e6:.1f} ms)"
            )
    return reasons


def _ms(ns: int | None) -> float | None:
    return None if ns is None else round(ns / 1e6, 4)
