"""A virtual run's summary streamed: each request's figures taken as it ends, then let go.

Keeping every request of a long run (``run_virtual(keep_requests=True)``, the
default) holds its token times: an hour at 100 req/s is 360,000 requests and 46
million token times. The summary needs far less: per completed request its
arrival, first and last token times and token counts (five numbers, in flat
arrays), and the pooled inter-token gaps, which the engines' token ledgers
(virtual_ledger.py) keep per step. :class:`StreamedRuns` takes them when a
request ends (finished or dropped) and checks its causality there, so the loop
can forget it; :meth:`StreamedRuns.summary` gives what summary.summarize gives
for the kept requests (the ITL mean exact rather than numpy's pairwise sum: see
summary.weighted_latency_stats). Kept per model (``Request.lora``) for a run with
adapters.
"""

from __future__ import annotations

import math
from array import array
from collections.abc import Sequence
from typing import Any

import numpy as np

from .engine import InvariantError
from .request import Request
from .summary import run_summary, weighted_latency_stats
from .virtual_ledger import TokenLedger

__all__ = ["StreamedRuns"]


class _Model:
    """One model's completed requests as flat arrays, and its issued and dropped counts."""

    __slots__ = ("arrival", "dropped", "first", "first_arrival", "issued", "last", "n_in", "n_out")

    def __init__(self) -> None:
        self.arrival = array("d")
        self.first = array("d")
        self.last = array("d")
        self.n_out = array("q")
        self.n_in = array("q")
        self.issued = 0
        self.dropped = 0
        self.first_arrival = math.inf


class StreamedRuns:
    """The summary's inputs, request by request, for ``models`` models (1 + adapters)."""

    def __init__(self, models: int = 1) -> None:
        self.models = [_Model() for _ in range(models)]
        self.finished = 0
        self.dropped = 0

    @property
    def issued(self) -> int:
        return sum(m.issued for m in self.models)

    def issue(self, r: Request) -> None:
        """``r`` was sent (at ``r.arrival``)."""
        m = self.models[r.lora]
        m.issued += 1
        if r.arrival < m.first_arrival:
            m.first_arrival = r.arrival

    def drop(self, r: Request) -> None:
        """``r`` could never be served."""
        self.models[r.lora].dropped += 1
        self.dropped += 1

    def finish(self, r: Request) -> None:
        """``r`` finished: its figures taken and checked (INV-5), its token times and block
        keys let go (a closed loop's or a caller's reference keeps only the small rest)."""
        if not (
            r.arrival <= r.enqueue_time <= r.schedule_time <= r.first_token_time <= r.finish_time
        ):
            raise InvariantError(f"causality violated by {r!r}")
        m = self.models[r.lora]
        m.arrival.append(r.arrival)
        m.first.append(r.first_token_time)
        m.last.append(r.finish_time)
        m.n_out.append(r.generated)
        m.n_in.append(r.prompt_len)
        self.finished += 1
        r.token_times = []
        r.block_hashes = ()

    def summary(self, ledgers: Sequence[TokenLedger], model: int | None = None) -> dict[str, Any]:
        """summary.summarize's result for one model (``model``) or all of them (None), the
        gaps from every engine's ledger (a fixed profile's: one ledger of odd gaps)."""
        picked = self.models if model is None else [self.models[model]]
        ks = range(len(self.models)) if model is None else [model]
        values, weights = [], []
        for ledger in ledgers:
            for k in ks:
                v, w = ledger.gaps(k)
                values.append(v)
                weights.append(w)
        itl = weighted_latency_stats(np.concatenate(values), np.concatenate(weights))

        def cat(name: str, dtype: type) -> np.ndarray:
            parts: list[np.ndarray] = [np.frombuffer(getattr(m, name), dtype=dtype) for m in picked]
            return np.concatenate(parts) if parts else np.array([], dtype=dtype)

        arrival = cat("arrival", np.float64)
        n_out = cat("n_out", np.int64)
        gaps_expected = int(n_out.sum()) - len(n_out)
        if itl["count"] != gaps_expected:
            raise InvariantError(
                f"token ledgers hold {itl['count']} gaps, the finished requests {gaps_expected}"
            )
        return run_summary(
            arrival,
            cat("first", np.float64),
            cat("last", np.float64),
            n_out,
            cat("n_in", np.int64),
            itl,
            issued=sum(m.issued for m in picked),
            failed=sum(m.dropped for m in picked),
            first_arrival=min(m.first_arrival for m in picked),
        )
