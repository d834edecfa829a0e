"""Token times of a virtual run as per-step counts, not one list per request.

A virtual run's only use for a request's token times is its inter-token gaps (the
pooled ITL) and its first and last token (kept on the request anyway). Every
token is stamped with its step's token time, so a gap between tokens of two
consecutive steps ``k`` and ``k + 1`` is always ``times[k + 1] - times[k]``: the
ledger keeps each step's token time once, and for each ``k`` how many requests
emitted in both steps (a difference array, ``cover``: a lockstep decoder's whole
run of steps costs two additions however long it is). A gap between steps that
are not consecutive (a request preempted, or one that waited a step) is kept as
its value, computed as the same subtraction of the same two floats that
``numpy.diff`` of the request's token times would do. The pooled ITL is then
the gaps ``times[k + 1] - times[k]`` with multiplicity ``sum(cover[:k + 1])``
plus the odd ones: exactly the multiset the token-time lists gave, in memory
that grows with the steps (a float and an int each), not with the tokens (an
hour at 100 req/s: 180,000 steps, 46 million tokens).

One ledger per engine (its ``tick`` numbers its steps); counts and odd gaps are
kept per model (``Request.lora``) so a run with adapters has each model's ITL.
Used by virtual_stats.py; the engine calls :meth:`one` for a request stepped on its
own and lockstep.py :meth:`span` for a lockstep decoder's run of steps.
"""

from __future__ import annotations

import numpy as np

from .request import Request

__all__ = ["TokenLedger"]


class TokenLedger:
    """Each step's token time and, per model, the gaps between a request's tokens."""

    def __init__(self, models: int = 1) -> None:
        self.times: list[float] = []  # token time of step 0, 1, ...
        # per model: cover[k] summed up to k = requests with tokens at steps k and k + 1
        self.covers: list[list[int]] = [[] for _ in range(models)]
        self.odd: list[list[float]] = [[] for _ in range(models)]  # gaps across >1 step

    def record(self, t_tok: float) -> None:
        """The token time of the next step (every step, whether it emits or not)."""
        self.times.append(t_tok)
        for cover in self.covers:
            cover.append(0)

    def one(self, r: Request, tick: int) -> None:
        """``r`` emitted a token at step ``tick`` (after :meth:`record` of that step)."""
        p = r.tok_last
        if p >= 0:
            if p == tick - 1:
                cover = self.covers[r.lora]
                cover[p] += 1
                cover[tick] -= 1
            else:
                self.odd[r.lora].append(self.times[tick] - self.times[p])
        r.tok_last = tick

    def span(self, r: Request, start: int, stop: int) -> None:
        """``r`` emitted a token at each of steps ``start .. stop - 1``."""
        if stop <= start:
            return
        cover = self.covers[r.lora]
        p = r.tok_last
        if p == start - 1 and p >= 0:
            cover[p] += 1
        else:
            if p >= 0:
                self.odd[r.lora].append(self.times[start] - self.times[p])
            cover[start] += 1
        cover[stop - 1] -= 1
        r.tok_last = stop - 1

    def gaps(self, model: int = 0) -> tuple[np.ndarray, np.ndarray]:
        """Model ``model``'s gaps (s) and how many times each occurs (the odd ones once)."""
        times = np.asarray(self.times, dtype=np.float64)
        steady = np.diff(times)
        counts = np.cumsum(np.asarray(self.covers[model], dtype=np.int64))[: len(steady)]
        keep = counts > 0
        odd = np.asarray(self.odd[model], dtype=np.float64)
        values = np.concatenate([steady[keep], odd])
        weights = np.concatenate([counts[keep], np.ones(len(odd), dtype=np.int64)])
        return values, weights
