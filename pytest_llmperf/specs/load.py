"""Load patterns as a test declares them: ``llm_load(pattern, rate=, concurrency=, ...)``.

Open-loop patterns (``poisson``, ``constant``) fix every request's planned
send time in advance as a cumulative offset from the run's start, so one late
send never delays the ones after it, and latency is counted from the plan.
Closed-loop patterns (``concurrency``, ``max-throughput``) send the next
request when a slot frees, and count latency from the actual send.

This module only parses and validates (at collection time, before any
request is sent); the schedule a pattern draws is the load generator's
(:func:`pytest_llmperf.loadgen.plan.arrival_offsets_ns`), and the order
samples are walked in is :class:`pytest_llmperf.loadgen.sample_order.SampleOrder`.
The names of both live here because a marker is checked against them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass
from enum import StrEnum
from typing import Any

from pytest_llmperf.errors import LlmPerfUsageError

__all__ = [
    "DEFAULT_MAX_THROUGHPUT_CONCURRENCY",
    "LOAD_PATTERNS",
    "OPEN_LOOP",
    "SAMPLE_ORDERS",
    "LoadPattern",
    "LoadSpec",
    "SampleOrderMode",
]


class LoadPattern(StrEnum):
    """The patterns ``llm_load(pattern)`` takes (a ``StrEnum``: equal to, and written as,
    the plain names, e.g. ``"poisson"``)."""

    POISSON = "poisson"  # open loop: exponential inter-arrival times at rate=
    CONSTANT = "constant"  # open loop: evenly spaced at rate=
    CONCURRENCY = "concurrency"  # closed loop: concurrency= requests in flight
    MAX_THROUGHPUT = "max-throughput"  # closed loop, as fast as the server answers

    @property
    def open_loop(self) -> bool:
        return self in OPEN_LOOP


class SampleOrderMode(StrEnum):
    """The orders ``llm_load(sample_order=)`` takes (:mod:`pytest_llmperf.loadgen.sample_order`)."""

    SEQUENTIAL = "sequential"
    WITHOUT_REPLACEMENT = "without-replacement"
    WITH_REPLACEMENT = "with-replacement"


LOAD_PATTERNS: tuple[LoadPattern, ...] = tuple(LoadPattern)
SAMPLE_ORDERS: tuple[SampleOrderMode, ...] = tuple(SampleOrderMode)
OPEN_LOOP: tuple[LoadPattern, ...] = (LoadPattern.POISSON, LoadPattern.CONSTANT)
DEFAULT_MAX_THROUGHPUT_CONCURRENCY = 256


@dataclass(frozen=True)
class LoadSpec:
    """A validated load pattern.

    ``rate`` (requests/s) is for open-loop patterns; ``concurrency`` is the
    number of requests in flight for ``concurrency`` and the cap for
    ``max-throughput``; ``seed`` drives Poisson inter-arrival times and the
    sample order; ``sample_order`` is ``sequential``, ``without-replacement``
    or ``with-replacement`` (None: the workload's default, see
    :mod:`~pytest_llmperf.loadgen.sample_order`).
    """

    pattern: LoadPattern
    rate: float | None = None
    concurrency: int | None = None
    seed: int = 0
    sample_order: SampleOrderMode | None = None

    def __post_init__(self) -> None:  # plain names (LoadSpec("poisson", rate=5)) are converted
        object.__setattr__(self, "pattern", LoadPattern(self.pattern))
        if self.sample_order is not None:
            object.__setattr__(self, "sample_order", SampleOrderMode(self.sample_order))

    @property
    def open_loop(self) -> bool:
        return self.pattern.open_loop

    @classmethod
    def parse(cls, pattern: Any, params: Mapping[str, Any]) -> LoadSpec:
        """Check a marker's ``llm_load(pattern, **params)``; errors name the bad word."""
        if pattern not in LOAD_PATTERNS:
            raise LlmPerfUsageError(
                f"unknown load pattern {pattern!r}; use one of {', '.join(LOAD_PATTERNS)}"
            )
        kind = LoadPattern(pattern)
        name = kind.value  # the plain name, for the messages below
        allowed = {"rate", "concurrency", "seed", "sample_order"}
        unknown = sorted(set(params) - allowed)
        if unknown:
            raise LlmPerfUsageError(
                f"llm_load({name!r}) does not take {', '.join(unknown)} "
                f"(takes rate=, concurrency=, seed=, sample_order=, requests=, duration=)"
            )
        rate = params.get("rate")
        concurrency = params.get("concurrency")
        seed = params.get("seed", 0)
        order = params.get("sample_order")
        if isinstance(seed, bool) or not isinstance(seed, int):
            raise LlmPerfUsageError(f"seed must be an integer, got {seed!r}")
        if order is not None and order not in SAMPLE_ORDERS:
            raise LlmPerfUsageError(
                f"llm_load({name!r}): unknown sample_order {order!r}; "
                f"use one of {', '.join(SAMPLE_ORDERS)}"
            )
        order = None if order is None else SampleOrderMode(order)
        if kind.open_loop:
            if isinstance(rate, bool) or not isinstance(rate, (int, float)) or not rate > 0:
                raise LlmPerfUsageError(
                    f"llm_load({name!r}) needs rate= > 0 requests/s, got {rate!r}"
                )
            if concurrency is not None:
                raise LlmPerfUsageError(
                    f"llm_load({name!r}) is open-loop: it takes rate=, not concurrency= "
                    f"(got concurrency={concurrency!r}); use 'concurrency' for a closed loop"
                )
            return cls(kind, rate=float(rate), seed=seed, sample_order=order)
        if rate is not None:
            raise LlmPerfUsageError(
                f"llm_load({name!r}) is closed-loop: it takes concurrency=, not rate= "
                f"(got rate={rate!r})"
            )
        if kind is LoadPattern.CONCURRENCY and concurrency is None:
            raise LlmPerfUsageError("llm_load('concurrency') needs concurrency= >= 1")
        if concurrency is None:
            concurrency = DEFAULT_MAX_THROUGHPUT_CONCURRENCY
        if isinstance(concurrency, bool) or not isinstance(concurrency, int) or concurrency < 1:
            raise LlmPerfUsageError(f"concurrency must be an integer >= 1, got {concurrency!r}")
        return cls(kind, concurrency=concurrency, seed=seed, sample_order=order)

    def describe(self) -> dict[str, Any]:
        """The report's ``load``: the set fields, names as plain strings."""
        out = {k: v for k, v in asdict(self).items() if v is not None}
        out["pattern"] = self.pattern.value
        if self.sample_order is not None:
            out["sample_order"] = self.sample_order.value
        return out
