"""Run specifications: what ``llm_workload``/``llm_load`` (and ``run()`` overrides) ask for.

``llm_workload`` says *what* to send and how many, ``llm_load`` says *when*;
:class:`RunSpec` is the validated combination. Everything is checked here, at
collection time, so a typo fails the test before any request is sent.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, TypedDict

from pytest_llmperf.errors import LlmPerfUsageError
from pytest_llmperf.specs.load import (
    LOAD_PATTERNS,
    LoadPattern,
    LoadSpec,
    SampleOrderMode,
    TraceSpec,
)
from pytest_llmperf.workloads import Workload, build_workload

__all__ = [
    "DEFAULT_REQUESTS",
    "LevelOverrides",
    "RunOverrides",
    "RunSpec",
    "WarmUpOverrides",
    "check_extra_body",
]

DEFAULT_REQUESTS = 100


class _OrderOverrides(TypedDict, total=False):
    seed: int  # the load's seed: Poisson arrivals and the sample order
    sample_order: SampleOrderMode | str


class _WorkloadOverrides(TypedDict, total=False):
    workload: str  # another registered workload's name
    workload_params: Mapping[str, Any]  # merged into the declared workload's parameters


class _LoadLevel(TypedDict, total=False):
    pattern: LoadPattern | str
    rate: float  # requests/s, open-loop patterns
    concurrency: int  # requests in flight (closed loop), or max-throughput's cap
    stages: Sequence[Mapping[str, Any]]  # levels on the clock (specs.stages)
    ramp: Mapping[str, Any]  # a level moving from "from" to "to"


class _LoadShape(TypedDict, total=False):
    burstiness: float  # gamma-shaped gaps (1.0 = Poisson)
    max_concurrency: int  # an open loop's cap on requests in flight
    pacing: str  # an open loop's wait for each planned instant ("default", "precise")
    cancel: Mapping[str, Any]  # {"share", "after_tokens"/"after_ms"}
    steady: str | Mapping[str, Any]  # "auto" or {"skip_s", "until_s", "latency"}


class LevelOverrides(_OrderOverrides, _LoadShape, _WorkloadOverrides, total=False):
    """``run()`` overrides a sweep or search applies to every run it makes.

    Everything but the load level itself (``pattern``, ``rate``,
    ``concurrency``, ``stages``, ``ramp``), which is what the procedure varies.
    """

    requests: int
    duration: float  # seconds of issuing, instead of a request count
    warmup: int  # untracked requests first


class WarmUpOverrides(_LoadLevel, _OrderOverrides, _LoadShape, _WorkloadOverrides, total=False):
    """``run()`` overrides of a warm-up's rounds: all but their size (requests, duration)."""

    warmup: int


class RunOverrides(LevelOverrides, _LoadLevel, total=False):
    """Every override ``run()`` takes (what :meth:`RunSpec.with_overrides` accepts)."""


# With workload and workload_params: RunOverrides' keys (tests/specs/test_run_specs.py checks).
_LOAD_KEYS = {
    "pattern",
    "rate",
    "concurrency",
    "seed",
    "sample_order",
    "stages",
    "ramp",
    "burstiness",
    "max_concurrency",
    "pacing",
    "cancel",
    "steady",
}
# an override of one of these replaces the others (they all set the load level)
_LEVEL_KEYS = ("rate", "concurrency", "stages", "ramp")
_STOP_KEYS = {"requests", "duration", "warmup"}
# what llm_workload takes besides its workload's own parameters (named when one is unknown)
_RUN_WORKLOAD_KEYS = ("extra_body", "requests", "duration", "warmup", "seed")


@dataclass(frozen=True)
class RunSpec:
    """A validated run: workload, load pattern and when to stop.

    Stop after ``requests`` requests or after ``duration`` seconds of
    issuing, whichever is given (``requests`` defaults to 100 when neither
    is). ``warmup`` requests go first, with the same pattern, and are
    excluded from every metric.
    """

    workload_name: str
    workload_params: Mapping[str, Any]
    workload_seed: int
    load: LoadSpec
    requests: int | None = DEFAULT_REQUESTS
    duration: float | None = None
    warmup: int = 0
    workload: Workload = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        params = {k: v for k, v in self.workload_params.items() if k != "extra_body"}
        check_extra_body(self.workload_params.get("extra_body", {}), "extra_body")
        object.__setattr__(
            self,
            "workload",
            build_workload(
                self.workload_name,
                seed=self.workload_seed,
                also_takes=_RUN_WORKLOAD_KEYS,
                **params,
            ),
        )

    @property
    def extra_body(self) -> Mapping[str, Any]:
        """The user's own request fields for this run (``llm_workload(extra_body={...})``)."""
        return self.workload_params.get("extra_body") or {}

    @classmethod
    def from_markers(
        cls,
        workload_args: tuple[Any, ...] = (),
        workload_kwargs: Mapping[str, Any] | None = None,
        load_args: tuple[Any, ...] = (),
        load_kwargs: Mapping[str, Any] | None = None,
    ) -> RunSpec:
        """Build from ``llm_workload(name, **kw)`` and ``llm_load(pattern, **kw)`` arguments."""
        wkw = dict(workload_kwargs or {})
        lkw = dict(load_kwargs or {})
        if len(workload_args) > 1:
            raise LlmPerfUsageError(
                f"llm_workload takes one positional name, got {workload_args!r}"
            )
        if len(load_args) > 1:
            raise LlmPerfUsageError(f"llm_load takes one positional pattern, got {load_args!r}")
        name = workload_args[0] if workload_args else wkw.pop("name", "synthetic")
        if not isinstance(name, str):
            raise LlmPerfUsageError(f"workload name must be a string, got {name!r}")
        seed = wkw.pop("seed", 0)
        if isinstance(seed, bool) or not isinstance(seed, int):
            raise LlmPerfUsageError(f"workload seed must be an integer, got {seed!r}")
        stops = {k: wkw.pop(k) for k in list(wkw) if k in _STOP_KEYS}
        for key in [k for k in lkw if k in _STOP_KEYS]:
            if key in stops:
                raise LlmPerfUsageError(f"{key}= is given in both llm_workload and llm_load")
            stops[key] = lkw.pop(key)
        pattern = load_args[0] if load_args else lkw.pop("pattern", None)
        if pattern is None:
            pattern, lkw = "concurrency", {"concurrency": 4, **lkw}
        lkw.setdefault("seed", seed)
        load = LoadSpec.parse(pattern, lkw)
        if load.trace is not None:
            name = _trace_workload(workload_args, wkw, load.trace)
        if load.stages:
            for key in ("requests", "duration"):
                if key in stops:
                    raise LlmPerfUsageError(
                        f"llm_load({load.pattern.value!r}): the stages set the run's length "
                        f"({load.staged_duration_s:g} s); drop {key}={stops[key]!r}"
                    )
            _, _, warmup = _stop_values(stops)
            return cls(name, wkw, seed, load, None, load.staged_duration_s, warmup)
        requests, duration, warmup = _stop_values(
            stops, default_requests=None if load.trace is not None else DEFAULT_REQUESTS
        )
        return cls(name, wkw, seed, load, requests, duration, warmup)

    def with_overrides(self, overrides: Mapping[str, Any]) -> RunSpec:
        """This spec changed by ``run(**overrides)``; a new pattern drops the old load params."""
        known = _LOAD_KEYS | _STOP_KEYS | {"workload", "workload_params"}
        unknown = sorted(set(overrides) - known)
        if unknown:
            raise LlmPerfUsageError(
                f"run() does not take {', '.join(unknown)}; it takes "
                f"{', '.join(sorted(_LOAD_KEYS | _STOP_KEYS))}, workload=, workload_params="
            )
        spec = self
        if any(k in overrides for k in _LOAD_KEYS):
            pattern = overrides.get("pattern", self.load.pattern)
            if pattern not in LOAD_PATTERNS:
                raise LlmPerfUsageError(f"unknown load pattern {pattern!r}")
            params: dict[str, Any] = {
                "seed": self.load.seed,
                "sample_order": self.load.sample_order,
            }
            if pattern == self.load.pattern:
                params.update(self.load.params)
            given = {k: v for k, v in overrides.items() if k in _LOAD_KEYS - {"pattern"}}
            if any(k in given for k in _LEVEL_KEYS):
                for key in _LEVEL_KEYS:
                    params.pop(key, None)
            params.update(given)
            params = {k: v for k, v in params.items() if v is not None}
            if self.load.pattern == "max-throughput" and pattern == "max-throughput":
                params.setdefault("concurrency", self.load.concurrency)
            spec = replace(spec, load=LoadSpec.parse(pattern, params))
            if spec.load.stages:
                spec = replace(spec, requests=None, duration=spec.load.staged_duration_s)
        stop_given = {k: overrides[k] for k in _STOP_KEYS if k in overrides}
        if stop_given:
            merged: dict[str, Any] = {"warmup": spec.warmup}
            if "requests" not in stop_given and "duration" not in stop_given:
                merged.update({"requests": spec.requests, "duration": spec.duration})
            merged.update(stop_given)
            requests, duration, warmup = _stop_values(merged)
            spec = replace(spec, requests=requests, duration=duration, warmup=warmup)
        if "workload" in overrides or "workload_params" in overrides:
            spec = replace(
                spec,
                workload_name=overrides.get("workload", spec.workload_name),
                workload_params={**spec.workload_params, **overrides.get("workload_params", {})},
            )
        return spec

    def scaled(self, factor: float) -> RunSpec:
        """Request counts and durations multiplied by ``factor`` (``--llm-scale``), at least 1."""
        if factor == 1.0:
            return self
        load = self.load
        if load.stages:  # a staged run's length is its stages': each is scaled
            stages = tuple(replace(st, duration_s=st.duration_s * factor) for st in load.stages)
            load = replace(load, stages=stages)
        return replace(
            self,
            load=load,
            requests=max(1, round(self.requests * factor)) if self.requests else None,
            duration=self.duration * factor if self.duration else None,
            warmup=round(self.warmup * factor),
        )

    def describe_workload(self) -> dict[str, Any]:
        out = self.workload.describe()
        if self.extra_body:
            out["extra_body"] = dict(self.extra_body)
        out["requests"] = self.requests
        out["duration_s"] = self.duration
        out["warmup"] = self.warmup
        return out


def check_extra_body(value: Any, where: str) -> dict[str, Any]:
    """``value`` as request fields: a JSON object of named fields, else a usage error."""
    if not isinstance(value, Mapping) or not all(isinstance(k, str) for k in value):
        raise LlmPerfUsageError(
            f"{where} must be a dict of request fields, e.g. {{'top_k': 5}}, got {value!r}"
        )
    reserved = sorted({"model", "stream", "messages", "prompt"} & set(value))
    if reserved:
        raise LlmPerfUsageError(
            f"{where} may not set {', '.join(reserved)}: the load generator sends them"
        )
    try:
        json.dumps(value)
    except (TypeError, ValueError) as exc:
        raise LlmPerfUsageError(f"{where} is not JSON-serializable ({exc}): {value!r}") from None
    return dict(value)


def _trace_workload(
    workload_args: tuple[Any, ...], params: dict[str, Any], trace: TraceSpec
) -> str:
    """The ``trace`` workload, fed the load's file; a trace brings its own requests."""
    name = workload_args[0] if workload_args else "trace"
    if name != "trace":
        raise LlmPerfUsageError(
            f"llm_load('trace') replays the trace's own requests; llm_workload({name!r}) "
            "cannot apply (use llm_workload('trace', ...) or give only its options: "
            "tokenizer=, block_size=, ignore_eos=, extra_body=, structured=, tools=, "
            "tool_choice=, adapters=, greedy=; replies= for agentic formats)"
        )
    clash = sorted(set(params) & {"path", "format", "start", "limit", "conversations", "stagger"})
    if clash:
        raise LlmPerfUsageError(
            f"llm_workload('trace'): {', '.join(clash)} belong to llm_load('trace', ...)"
        )
    params.update(path=trace.path, format=trace.format)
    # agentic formats also take conversations= and stagger= (workloads.agentic.workload)
    for key in ("start", "limit", "conversations", "stagger"):
        value = getattr(trace, key)
        if value is not None:
            params[key] = value
    return "trace"


def _stop_values(
    stops: Mapping[str, Any], *, default_requests: int | None = DEFAULT_REQUESTS
) -> tuple[int | None, float | None, int]:
    requests = stops.get("requests")
    duration = stops.get("duration")
    warmup = stops.get("warmup", 0) or 0
    if requests is not None and (
        isinstance(requests, bool) or not isinstance(requests, int) or requests < 1
    ):
        raise LlmPerfUsageError(f"requests must be an integer >= 1, got {requests!r}")
    if duration is not None and (
        isinstance(duration, bool) or not isinstance(duration, (int, float)) or not duration > 0
    ):
        raise LlmPerfUsageError(f"duration must be a number of seconds > 0, got {duration!r}")
    if isinstance(warmup, bool) or not isinstance(warmup, int) or warmup < 0:
        raise LlmPerfUsageError(f"warmup must be an integer >= 0 requests, got {warmup!r}")
    if requests is None and duration is None:
        requests = default_requests
    return requests, (float(duration) if duration is not None else None), warmup
