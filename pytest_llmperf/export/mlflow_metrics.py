"""One run of the JSON report (``tests[].runs[]``) as MLflow metrics.

Every number the report holds for the run becomes a metric named as the report and the
SLO grammar name it (``ttft.p99``, ``request_throughput``, ``error_rate``,
``server.ttft.p50``, ``gpu.energy_j``), in the report's units: latencies in ms, throughputs
per second, rates as fractions, durations in s (docs/export.md lists them). A
whole-run figure is logged at step 0; a stage's figures again under ``stage.<name>`` with
the stage's index as the step, so MLflow draws each one across the stages.

Pure data: no MLflow import, so the names can be checked without a tracking server.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from pytest_llmperf.export.mlflow_names import metric_value, mlflow_key
from pytest_llmperf.specs.gpu_names import GPU_METRICS, gpu_value

__all__ = ["MetricPoint", "run_metrics", "stage_metrics"]

# the run's blocks whose numbers are logged under their block's name
_BLOCKS = ("counts", "token_lengths", "self_check", "ttft_split", "steady")
# a stage's own scalars (its metrics and counts are walked like a run's)
_STAGE_SCALARS = (
    "start_s",
    "duration_s",
    "planned_rate",
    "schedule_rate",
    "achieved_rate",
    "concurrency",
)


@dataclass(frozen=True)
class MetricPoint:
    """One value of one metric: MLflow's (key, value, timestamp, step)."""

    key: str
    value: float
    step: int = 0
    timestamp_ms: int = 0


def _numbers(prefix: str, value: Any) -> Iterator[tuple[str, float]]:
    """Every finite number under ``value`` (dicts walked, lists not), keyed by its dotted
    path after ``prefix``; a ``value`` leaf is its parent's name (``server.preemptions``)."""
    if isinstance(value, Mapping):
        for key, inner in value.items():
            name = prefix if key == "value" and prefix else f"{prefix}.{key}" if prefix else key
            yield from _numbers(str(name), inner)
        return
    number = metric_value(value)
    if number is not None and prefix:
        yield prefix, number


def _run_numbers(run: Mapping[str, Any]) -> Iterator[tuple[str, float]]:
    yield from _numbers("", run.get("metrics") or {})
    for block in _BLOCKS:
        yield from _numbers(block, run.get(block) or {})
    yield from _numbers("duration_s", run.get("duration_s"))
    server = run.get("server_metrics") or {}
    yield from _numbers("", server.get("metrics") or {})  # named server.* already
    process = run.get("server_process") or {}
    yield from _numbers("server", process.get("resources") or {})  # server.rss_max_mb, ...
    yield from _numbers("startup", process.get("startup") or {})  # startup.ready_s, ...
    fleet = run.get("fleet") or {}
    for page in fleet.get("pages") or ():
        where = f"fleet.pages.{page.get('role')}.{page.get('name')}"
        yield from _numbers(where, (page.get("server_metrics") or {}).get("metrics") or {})
    for role, pool in (fleet.get("roles") or {}).items():
        yield from _numbers(f"fleet.roles.{role}", (pool or {}).get("metrics") or {})
    yield from _numbers("fleet.prefix_hit_rate", fleet.get("prefix_hit_rate"))
    gpu = run.get("gpu")
    if gpu:
        for name in GPU_METRICS:
            value = gpu_value(gpu, name)
            if value is not None:
                yield name, value


def run_metrics(run: Mapping[str, Any], *, timestamp_ms: int = 0) -> list[MetricPoint]:
    """The run's whole-run figures, each at step 0 (one value per key)."""
    seen: dict[str, MetricPoint] = {}
    for name, value in _run_numbers(run):
        key = mlflow_key(name)
        seen.setdefault(key, MetricPoint(key, value, 0, timestamp_ms))
    return list(seen.values())


def stage_metrics(run: Mapping[str, Any], *, start_ms: int = 0) -> list[MetricPoint]:
    """Each stage's figures as ``stage.<name>``, step = the stage's index, timestamp = its
    start (the run's start plus ``start_s``)."""
    points: list[MetricPoint] = []
    for position, stage in enumerate(run.get("stages") or ()):
        index = int(stage.get("index", position))
        at = start_ms + int(1000 * float(stage.get("start_s") or 0.0))
        numbers = [
            *_numbers("stage", stage.get("metrics") or {}),
            *_numbers("stage.counts", stage.get("counts") or {}),
            *(x for s in _STAGE_SCALARS for x in _numbers(f"stage.{s}", stage.get(s))),
        ]
        seen: set[str] = set()
        for name, value in numbers:
            key = mlflow_key(name)
            if key not in seen:
                seen.add(key)
                points.append(MetricPoint(key, value, index, at))
    return points
