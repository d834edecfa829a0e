"""Load patterns as a test declares them: ``llm_load(pattern, rate=, concurrency=, ...)``.

Open-loop patterns (``poisson``, ``constant``) fix every request's planned
send time in advance as a cumulative offset from the run's start, so one late
send never delays the ones after it, and latency is counted from the plan.
Closed-loop patterns (``concurrency``, ``max-throughput``) send the next
request when a slot frees, and count latency from the actual send.

``trace`` replays a production trace file (Mooncake, BurstGPT, Azure, plain
JSONL) on its own timestamps: it is an open loop whose schedule and request
lengths both come from the file. Open loops also take ``stages=``/``ramp=``
(:mod:`~pytest_llmperf.specs.stages`), ``burstiness=`` (gamma-distributed
gaps) and ``max_concurrency=`` (a cap on requests in flight: a planned
request waits for a free slot, and the wait is ``queue_wait``); every
pattern takes ``cancel=`` (a share of requests abandoned mid-stream).

This module only parses and validates (at collection time, before any
request is sent); the schedule a pattern draws is the load generator's
(:func:`pytest_llmperf.loadgen.plan.arrivals.arrival_offsets_ns`), and the order
samples are walked in is :class:`pytest_llmperf.loadgen.plan.sample_order.SampleOrder`.
The names of both live here because a marker is checked against them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, replace
from enum import StrEnum
from os import PathLike
from typing import Any

from pytest_llmperf.errors import LlmPerfUsageError
from pytest_llmperf.specs.stages import Stage, parse_ramp, parse_stages
from pytest_llmperf.specs.steady import SteadySpec
from pytest_llmperf.workloads.traces.trace import AGENTIC_TRACE_FORMATS

__all__ = [
    "DEFAULT_MAX_THROUGHPUT_CONCURRENCY",
    "LOAD_PATTERNS",
    "OPEN_LOOP",
    "PACING_MODES",
    "SAMPLE_ORDERS",
    "TRACE_TAKES",
    "UNTIL_DECIDED",
    "CancelSpec",
    "LoadPattern",
    "LoadSpec",
    "PacingMode",
    "SampleOrderMode",
    "TraceSpec",
]


class LoadPattern(StrEnum):
    """The patterns ``llm_load(pattern)`` takes (a ``StrEnum``: equal to, and written as,
    the plain names, e.g. ``"poisson"``)."""

    POISSON = "poisson"  # open loop: exponential inter-arrival times at rate=
    CONSTANT = "constant"  # open loop: evenly spaced at rate=
    CONCURRENCY = "concurrency"  # closed loop: concurrency= requests in flight
    MAX_THROUGHPUT = "max-throughput"  # closed loop, as fast as the server answers
    TRACE = "trace"  # open loop: a production trace's own timestamps and lengths

    @property
    def open_loop(self) -> bool:
        return self in OPEN_LOOP


class PacingMode(StrEnum):
    """The open loop's ``llm_load(pacing=)`` (:mod:`~pytest_llmperf.loadgen.issue.pacing`):
    ``default`` yields to the event loop until the planned instant; ``precise`` spins
    the last stretch of it (CPU for a send within about 0.1 ms of its plan)."""

    DEFAULT = "default"
    PRECISE = "precise"


class SampleOrderMode(StrEnum):
    """The orders ``llm_load(sample_order=)`` takes (:mod:`~.loadgen.plan.sample_order`)."""

    SEQUENTIAL = "sequential"
    WITHOUT_REPLACEMENT = "without-replacement"
    WITH_REPLACEMENT = "with-replacement"


LOAD_PATTERNS: tuple[LoadPattern, ...] = tuple(LoadPattern)
SAMPLE_ORDERS: tuple[SampleOrderMode, ...] = tuple(SampleOrderMode)
PACING_MODES: tuple[PacingMode, ...] = tuple(PacingMode)
OPEN_LOOP: tuple[LoadPattern, ...] = (LoadPattern.POISSON, LoadPattern.CONSTANT, LoadPattern.TRACE)
DEFAULT_MAX_THROUGHPUT_CONCURRENCY = 256
UNTIL_DECIDED = "decided"  # llm_load(..., until="decided")
TRACE_TAKES = ("path", "format", "time_scale", "start", "limit", "conversations", "stagger")
_COMMON = ("seed", "sample_order", "cancel", "steady")
_OPEN_TAKES = ("rate", "stages", "ramp", "burstiness", "max_concurrency", "pacing", *_COMMON)
_TAKES: dict[LoadPattern, tuple[str, ...]] = {
    LoadPattern.POISSON: _OPEN_TAKES,
    LoadPattern.CONSTANT: _OPEN_TAKES,
    LoadPattern.CONCURRENCY: ("concurrency", "stages", "ramp", *_COMMON),
    LoadPattern.MAX_THROUGHPUT: ("concurrency", *_COMMON),
    LoadPattern.TRACE: (*TRACE_TAKES, "max_concurrency", "pacing", "seed", "cancel", "steady"),
}


@dataclass(frozen=True)
class CancelSpec:
    """``cancel={"share": 0.2, "after_tokens": 10}``: abandon that share of requests mid-stream.

    Which requests is drawn from the load's seed, per run position, so a
    repeat cancels the same ones. The client disconnects after
    ``after_tokens`` token events or ``after_ms`` from the send, whichever
    comes first.
    """

    share: float
    after_tokens: int | None = None
    after_ms: float | None = None

    @classmethod
    def parse(cls, where: str, value: Any) -> CancelSpec:
        example = "{'share': 0.2, 'after_tokens': 10} or {'share': 0.1, 'after_ms': 500}"
        if not isinstance(value, Mapping):
            raise LlmPerfUsageError(f"{where}: cancel must be a dict like {example}, got {value!r}")
        unknown = sorted(set(value) - {"share", "after_tokens", "after_ms"})
        if unknown:
            raise LlmPerfUsageError(
                f"{where}: cancel does not take {', '.join(map(repr, unknown))} "
                "(takes 'share', 'after_tokens', 'after_ms')"
            )
        share = value.get("share")
        if isinstance(share, bool) or not isinstance(share, (int, float)) or not 0 < share <= 1:
            raise LlmPerfUsageError(f"{where}: cancel share must be in (0, 1], got {share!r}")
        tokens, ms = value.get("after_tokens"), value.get("after_ms")
        if tokens is None and ms is None:
            raise LlmPerfUsageError(
                f"{where}: cancel needs after_tokens= or after_ms= (when to disconnect), "
                f"got {dict(value)!r}"
            )
        if tokens is not None and (
            isinstance(tokens, bool) or not isinstance(tokens, int) or tokens < 1
        ):
            raise LlmPerfUsageError(
                f"{where}: cancel after_tokens must be an integer >= 1, got {tokens!r}"
            )
        if ms is not None and (
            isinstance(ms, bool) or not isinstance(ms, (int, float)) or not ms > 0
        ):
            raise LlmPerfUsageError(f"{where}: cancel after_ms must be a number > 0, got {ms!r}")
        return cls(float(share), tokens, None if ms is None else float(ms))

    def describe(self) -> dict[str, Any]:
        return {k: v for k, v in asdict(self).items() if v is not None}


@dataclass(frozen=True)
class TraceSpec:
    """``llm_load("trace", path=..., format=..., time_scale=, start=, limit=)``.

    Row ``i`` is planned at ``(t_i - t_first) * time_scale`` (``time_scale=2``
    replays at half speed, ``0.5`` at double); ``start`` skips the trace's
    first seconds, ``limit`` keeps at most that many rows. The file is read
    by the ``trace`` workload (:mod:`pytest_llmperf.workloads.traces`).

    Agentic formats (``weka``, ``agentic``, ``otel``: docs/agentic.md) hold
    conversations, not rows: ``conversations=N`` replays the first N (repeated
    past the file's count), ``start="mid"`` begins each part-way in after a
    cache warm-up, ``stagger=`` is the seconds between conversation starts
    where the file records none; ``time_scale`` scales the recorded waits and
    starts. ``limit`` and a numeric ``start`` are the row formats' only.
    """

    path: str
    format: str = "mooncake"
    time_scale: float = 1.0
    start: float | str | None = None
    limit: int | None = None
    conversations: int | None = None
    stagger: float | None = None

    @property
    def agentic(self) -> bool:
        """Whether the format holds agentic conversations (trees of calls, not rows)."""
        return self.format in AGENTIC_TRACE_FORMATS

    @classmethod
    def parse(cls, params: Mapping[str, Any]) -> TraceSpec:
        where = "llm_load('trace')"
        path = params.get("path")
        if not isinstance(path, (str, PathLike)) or not str(path):
            raise LlmPerfUsageError(f"{where} needs path= to a trace file, got {path!r}")
        fmt = params.get("format", "mooncake")
        if not isinstance(fmt, str):
            raise LlmPerfUsageError(f"{where}: format must be a name, got {fmt!r}")
        agentic = fmt in AGENTIC_TRACE_FORMATS
        scale = params.get("time_scale", 1.0)
        if isinstance(scale, bool) or not isinstance(scale, (int, float)) or not scale > 0:
            raise LlmPerfUsageError(f"{where}: time_scale must be a number > 0, got {scale!r}")
        start = params.get("start")
        if agentic:
            if start is not None and start != "mid":
                raise LlmPerfUsageError(
                    f"{where}: format={fmt!r} takes start='mid' (each conversation begins "
                    f"part-way in, after a cache warm-up), got start={start!r}; seconds "
                    "apply to row formats"
                )
        elif start == "mid":
            raise LlmPerfUsageError(
                f"{where}: start='mid' applies to agentic formats "
                f"({', '.join(AGENTIC_TRACE_FORMATS)}), not format={fmt!r} (it takes seconds)"
            )
        elif start is not None and (
            isinstance(start, bool) or not isinstance(start, (int, float)) or start < 0
        ):
            raise LlmPerfUsageError(
                f"{where}: start must be seconds >= 0 into the trace, got {start!r}"
            )
        limit = params.get("limit")
        if limit is not None and agentic:
            raise LlmPerfUsageError(
                f"{where}: format={fmt!r} holds conversations, not rows: use conversations=N "
                f"instead of limit={limit!r}"
            )
        if limit is not None and (
            isinstance(limit, bool) or not isinstance(limit, int) or limit < 1
        ):
            raise LlmPerfUsageError(f"{where}: limit must be an integer >= 1 rows, got {limit!r}")
        count = params.get("conversations")
        stagger = params.get("stagger")
        if not agentic:
            given = [k for k in ("conversations", "stagger") if params.get(k) is not None]
            if given:
                raise LlmPerfUsageError(
                    f"{where}: {', '.join(f'{k}=' for k in given)} apply to agentic formats "
                    f"({', '.join(AGENTIC_TRACE_FORMATS)}), not format={fmt!r}"
                )
        if count is not None and (
            isinstance(count, bool) or not isinstance(count, int) or count < 1
        ):
            raise LlmPerfUsageError(
                f"{where}: conversations must be an integer >= 1, got {count!r}"
            )
        if stagger is not None and (
            isinstance(stagger, bool)
            or not isinstance(stagger, (int, float))
            or not stagger >= 0
            or stagger == float("inf")
        ):
            raise LlmPerfUsageError(f"{where}: stagger must be seconds >= 0, got {stagger!r}")
        return cls(
            str(path),
            fmt,
            float(scale),
            start if start is None or start == "mid" else float(start),
            limit,
            count,
            None if stagger is None else float(stagger),
        )

    def describe(self) -> dict[str, Any]:
        return {k: v for k, v in asdict(self).items() if v is not None}


@dataclass(frozen=True)
class LoadSpec:
    """A validated load pattern.

    ``rate`` (requests/s) is for open-loop patterns; ``concurrency`` is the
    number of requests in flight for ``concurrency`` and the cap for
    ``max-throughput``; ``seed`` drives Poisson inter-arrival times and the
    sample order; ``sample_order`` is ``sequential``, ``without-replacement``
    or ``with-replacement`` (None: the workload's default, see
    :mod:`~pytest_llmperf.loadgen.plan.sample_order`).

    ``stages`` (from ``stages=`` or ``ramp=``) replace ``rate``/``concurrency``
    with levels on the clock (the run lasts their total duration);
    ``burstiness`` is the shape of gamma-distributed gaps (1.0 = Poisson,
    smaller = burstier, None = the pattern's own gaps); ``max_concurrency``
    caps an open loop's requests in flight; ``pacing`` is how an open loop waits for
    each planned instant; ``cancel`` abandons a share of requests mid-stream;
    ``trace`` is the trace pattern's file; ``steady`` the steady-state window whose
    requests alone make the throughput figures (:mod:`~pytest_llmperf.specs.steady`).
    """

    pattern: LoadPattern
    rate: float | None = None
    concurrency: int | None = None
    seed: int = 0
    sample_order: SampleOrderMode | None = None
    stages: tuple[Stage, ...] = ()
    burstiness: float | None = None
    max_concurrency: int | None = None
    pacing: PacingMode = PacingMode.DEFAULT
    cancel: CancelSpec | None = None
    trace: TraceSpec | None = None
    ramped: bool = False  # the stages came from ramp= (reported as its windows)
    # "decided": end the run once every gated SLO is decided (always-valid bounds,
    # :mod:`~pytest_llmperf.slo.sequential`), within its declared requests/duration
    until: str | None = None
    steady: SteadySpec | None = None  # steady="auto" | {"skip_s", "until_s", "latency"}
    # the marker's own keyword arguments, so run() overrides can change one of them
    params: Mapping[str, Any] = field(default_factory=dict, compare=False, repr=False)

    def __post_init__(self) -> None:  # plain names (LoadSpec("poisson", rate=5)) are converted
        object.__setattr__(self, "pattern", LoadPattern(self.pattern))
        if self.sample_order is not None:
            object.__setattr__(self, "sample_order", SampleOrderMode(self.sample_order))
        object.__setattr__(self, "pacing", PacingMode(self.pacing))

    @property
    def open_loop(self) -> bool:
        return self.pattern.open_loop

    @property
    def staged_duration_s(self) -> float | None:
        """The stages' total duration (the run's length), or None without stages."""
        return sum(s.duration_s for s in self.stages) if self.stages else None

    @property
    def peak_rate(self) -> float | None:
        """The highest planned open-loop rate (for sizing warm connections)."""
        if self.stages and self.open_loop:
            return max(max(s.rate or 0.0, s.end_rate or 0.0) for s in self.stages)
        return self.rate

    @property
    def slots(self) -> int | None:
        """The most requests a closed loop keeps in flight (stages included)."""
        if self.stages and not self.open_loop:
            return max(s.concurrency or 1 for s in self.stages)
        return self.concurrency

    @classmethod
    def parse(cls, pattern: Any, params: Mapping[str, Any]) -> LoadSpec:
        """Check a marker's ``llm_load(pattern, **params)``; errors name the bad word."""
        spec = cls._parse(pattern, {k: v for k, v in params.items() if k != "until"})
        until = params.get("until")
        if until is not None and until != UNTIL_DECIDED:
            raise LlmPerfUsageError(
                f"llm_load({spec.pattern.value!r}): until= takes {UNTIL_DECIDED!r} (end the run "
                f"once its SLOs are decided), got {until!r}"
            )
        if until is not None and spec.stages:
            raise LlmPerfUsageError(
                f"llm_load({spec.pattern.value!r}): until= does not apply to a staged run "
                "(its stages set its length, and each is judged on its own)"
            )
        return replace(spec, until=until, params={k: v for k, v in params.items() if v is not None})

    @classmethod
    def _parse(cls, pattern: Any, params: Mapping[str, Any]) -> LoadSpec:
        if pattern not in LOAD_PATTERNS:
            raise LlmPerfUsageError(
                f"unknown load pattern {pattern!r}; use one of {', '.join(LOAD_PATTERNS)}"
            )
        kind = LoadPattern(pattern)
        name = kind.value  # the plain name, for the messages below
        where = f"llm_load({name!r})"
        takes = _TAKES[kind]
        # the other loop's level gets its own, clearer message below
        levels = set() if kind is LoadPattern.TRACE else {"rate", "concurrency"}
        unknown = sorted(set(params) - set(takes) - levels - {"until"})
        if unknown:
            raise LlmPerfUsageError(
                f"{where} does not take {', '.join(unknown)} "
                f"(takes {', '.join(f'{k}=' for k in takes)}, requests=, duration=, warmup=)"
            )
        rate = params.get("rate")
        concurrency = params.get("concurrency")
        seed = params.get("seed", 0)
        order = params.get("sample_order")
        if isinstance(seed, bool) or not isinstance(seed, int):
            raise LlmPerfUsageError(f"{where}: seed must be an integer, got {seed!r}")
        if order is not None and order not in SAMPLE_ORDERS:
            raise LlmPerfUsageError(
                f"{where}: unknown sample_order {order!r}; use one of {', '.join(SAMPLE_ORDERS)}"
            )
        order = None if order is None else SampleOrderMode(order)
        cancel = CancelSpec.parse(where, params["cancel"]) if "cancel" in params else None
        cap = params.get("max_concurrency")
        if cap is not None and (isinstance(cap, bool) or not isinstance(cap, int) or cap < 1):
            raise LlmPerfUsageError(
                f"{where}: max_concurrency must be an integer >= 1, got {cap!r}"
            )
        pacing = params.get("pacing", PacingMode.DEFAULT)
        if pacing not in PACING_MODES:
            raise LlmPerfUsageError(
                f"{where}: unknown pacing {pacing!r}; use one of {', '.join(PACING_MODES)}"
            )
        steady = SteadySpec.parse(where, params["steady"]) if "steady" in params else None
        common: dict[str, Any] = {
            "seed": seed,
            "sample_order": order,
            "cancel": cancel,
            "max_concurrency": cap,
            "steady": steady,
        }
        if kind.open_loop:
            common["pacing"] = PacingMode(pacing)
        if kind is LoadPattern.TRACE:
            return cls(kind, trace=TraceSpec.parse(params), **common)
        stages = _levels(kind, params)
        if kind.open_loop:
            burst = params.get("burstiness")
            if burst is not None and (
                isinstance(burst, bool) or not isinstance(burst, (int, float)) or not burst > 0
            ):
                raise LlmPerfUsageError(
                    f"{where}: burstiness must be a number > 0 (1.0 = Poisson, smaller = "
                    f"burstier), got {burst!r}"
                )
            burstiness = None if burst is None else float(burst)
            if stages:
                return cls(kind, stages=stages, burstiness=burstiness, ramped="ramp" in params,
                           **common)  # fmt: skip
            if isinstance(rate, bool) or not isinstance(rate, (int, float)) or not rate > 0:
                raise LlmPerfUsageError(
                    f"{where} needs rate= > 0 requests/s (or stages=/ramp=), got {rate!r}"
                )
            if concurrency is not None:
                raise LlmPerfUsageError(
                    f"{where} is open-loop: it takes rate=, not concurrency= "
                    f"(got concurrency={concurrency!r}); use 'concurrency' for a closed loop, "
                    "or max_concurrency= to cap requests in flight"
                )
            return cls(kind, rate=float(rate), burstiness=burstiness, **common)
        if rate is not None:
            raise LlmPerfUsageError(
                f"{where} is closed-loop: it takes concurrency=, not rate= (got rate={rate!r})"
            )
        if stages:
            return cls(kind, stages=stages, ramped="ramp" in params, **common)
        if kind is LoadPattern.CONCURRENCY and concurrency is None:
            raise LlmPerfUsageError(f"{where} needs concurrency= >= 1 (or stages=/ramp=)")
        if concurrency is None:
            concurrency = DEFAULT_MAX_THROUGHPUT_CONCURRENCY
        if isinstance(concurrency, bool) or not isinstance(concurrency, int) or concurrency < 1:
            raise LlmPerfUsageError(
                f"{where}: concurrency must be an integer >= 1, got {concurrency!r}"
            )
        return cls(kind, concurrency=concurrency, **common)

    def describe(self) -> dict[str, Any]:
        """The report's ``load``: the set fields, names as plain strings."""
        out: dict[str, Any] = {"pattern": self.pattern.value}
        for key in ("rate", "concurrency", "seed", "burstiness", "max_concurrency"):
            value = getattr(self, key)
            if value is not None:
                out[key] = value
        if self.sample_order is not None:
            out["sample_order"] = self.sample_order.value
        if self.pacing is not PacingMode.DEFAULT:  # (absent by default: old reports compare)
            out["pacing"] = self.pacing.value
        if self.stages:
            out["stages"] = [stage.describe() for stage in self.stages]
            if self.ramped:
                out["ramp"] = True
        if self.cancel is not None:
            out["cancel"] = self.cancel.describe()
        if self.trace is not None:
            out["trace"] = self.trace.describe()
        if self.until is not None:
            out["until"] = self.until
        if self.steady is not None:
            out["steady"] = self.steady.describe()
        return out


def _levels(kind: LoadPattern, params: Mapping[str, Any]) -> tuple[Stage, ...]:
    """``stages=`` or ``ramp=`` (not both, nor beside a single ``rate``/``concurrency``)."""
    given = [k for k in ("stages", "ramp") if k in params]
    if not given:
        return ()
    where = f"llm_load({kind.value!r})"
    level = "rate" if kind.open_loop else "concurrency"
    if len(given) > 1:
        raise LlmPerfUsageError(f"{where} takes stages= or ramp=, not both")
    if params.get(level) is not None:
        raise LlmPerfUsageError(
            f"{where}: {given[0]}= sets the {level} over time; drop {level}={params[level]!r}"
        )
    if "stages" in params:
        return parse_stages(kind.value, params["stages"], open_loop=kind.open_loop)
    return parse_ramp(kind.value, params["ramp"], open_loop=kind.open_loop)
