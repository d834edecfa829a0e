"""Which workload sample the n-th request sends.

A workload is a pure function ``index -> sample``; the order decides which
indices a run walks through:

- ``sequential``: 0, 1, 2, … (the default for unbounded synthetic workloads,
  whose every index is already an independent seeded draw);
- ``without-replacement``: a seeded shuffle of all ``size`` samples, then a
  fresh shuffle once they are used up (the default for finite datasets, so a
  run covers the whole dataset before repeating any sample);
- ``with-replacement``: each index drawn uniformly at random (seeded), so
  samples repeat, as a cache-friendly production mix would.

The order is deterministic given ``(mode, seed, size)`` and is written into
the run's workload description, so a run can be repeated request for request.
"""

from __future__ import annotations

import itertools
import random
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from pytest_llmperf.errors import LlmPerfUsageError
from pytest_llmperf.specs.load import SAMPLE_ORDERS, SampleOrderMode  # llm_load(sample_order=)

__all__ = ["SampleOrder"]


@dataclass(frozen=True)
class SampleOrder:
    """A seeded, endless sequence of sample indices over a workload of ``size`` samples.

    ``size`` None means any index is valid; ``with-replacement`` then draws
    from the first ``pool`` indices (the run's request count).
    """

    mode: SampleOrderMode  # a plain name is accepted and converted
    seed: int
    size: int | None
    pool: int | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "mode", _checked_mode(self.mode))

    @classmethod
    def for_workload(
        cls,
        mode: SampleOrderMode | str | None,
        seed: int,
        size: int | None,
        pool: int | None = None,
    ) -> SampleOrder:
        """The requested order, or the default for this workload's kind."""
        if mode is None:
            mode = (
                SampleOrderMode.SEQUENTIAL if size is None else SampleOrderMode.WITHOUT_REPLACEMENT
            )
        return cls(_checked_mode(mode), seed, size, pool)

    def __iter__(self) -> Iterator[int]:
        rng = random.Random(f"sample-order:{self.seed}")
        if self.mode is SampleOrderMode.SEQUENTIAL:
            i = 0
            while True:
                yield i if self.size is None else i % self.size
                i += 1
        n = self.size if self.size is not None else self.pool
        if self.mode is SampleOrderMode.WITHOUT_REPLACEMENT:
            if n is None:  # unbounded workload: every index is a fresh draw anyway
                yield from itertools.count()
            indices = list(range(n or 1))
            while True:
                rng.shuffle(indices)
                yield from indices
        span = max(1, n or 1)
        while True:
            yield rng.randrange(span)

    def describe(self) -> dict[str, Any]:
        out: dict[str, Any] = {"mode": self.mode.value, "seed": self.seed}
        if self.size is not None:
            out["size"] = self.size
        elif self.mode is SampleOrderMode.WITH_REPLACEMENT:
            out["pool"] = self.pool
        return out


def _checked_mode(mode: str) -> SampleOrderMode:
    if mode not in SAMPLE_ORDERS:
        raise LlmPerfUsageError(
            f"unknown sample order {mode!r}; use one of {', '.join(SAMPLE_ORDERS)}"
        )
    return SampleOrderMode(mode)
