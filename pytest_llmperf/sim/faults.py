"""Seeded fault injection: what goes wrong with one request, decided up front.

The plugin's client must survive what real servers do under stress — error
statuses (429 with Retry-After, 500, 503), stalls before the first token or
mid-stream, streams cut without ``[DONE]``, malformed chunks, several tokens in
one chunk, ``:`` keep-alive comment lines. Each request's faults are drawn from
a generator seeded by (simulator seed, request index), so a failing test
replays the same faults on the same requests.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from .profiles import Profile

__all__ = ["FaultPlan", "plan_faults"]


@dataclass
class FaultPlan:
    """Faults for one request. Indices count content tokens from 0."""

    error_status: int | None = None
    retry_after_s: int = 0
    stall_first_s: float = 0.0
    stall_mid_at: int | None = None
    stall_mid_s: float = 0.0
    cut_at: int | None = None  # close the connection before emitting this token
    malformed_rate: float = 0.0
    multi_token_rate: float = 0.0
    multi_token_max: int = 1
    keepalive_rate: float = 0.0
    keepalive_interval_s: float = 0.0
    rng: random.Random | None = None

    @property
    def delays_tokens(self) -> bool:
        """True if planned token times are deliberately not honoured."""
        return self.stall_first_s > 0 or self.stall_mid_at is not None

    @property
    def per_chunk(self) -> bool:
        return self.rng is not None

    def chunk_size(self) -> int:
        """Tokens to put in the next chunk (1 unless multi-token chunks are on)."""
        if (
            self.rng is not None
            and self.multi_token_rate
            and self.rng.random() < self.multi_token_rate
        ):
            return self.rng.randint(2, max(2, self.multi_token_max))
        return 1

    def malformed(self) -> bool:
        """Whether to send a malformed frame before the next chunk."""
        return (
            self.rng is not None
            and self.malformed_rate > 0
            and self.rng.random() < self.malformed_rate
        )

    def keepalive(self) -> bool:
        """Whether to send a ``:`` comment line before the next chunk."""
        return (
            self.rng is not None
            and self.keepalive_rate > 0
            and self.rng.random() < self.keepalive_rate
        )


NO_FAULTS = FaultPlan()


def plan_faults(
    profile: Profile, seed: int, index: int, output_tokens: int, speedup: float = 1.0
) -> FaultPlan:
    """The seeded faults of request number ``index`` (NO_FAULTS if none are configured)."""
    p = profile
    if not (
        p.error_rate
        or p.stall_first_prob
        or p.stall_mid_prob
        or p.cut_rate
        or p.malformed_rate
        or p.multi_token_rate
        or p.keepalive_rate
    ):
        return NO_FAULTS
    rng = random.Random(f"faults:{seed}:{index}")
    plan = FaultPlan(
        malformed_rate=p.malformed_rate,
        multi_token_rate=p.multi_token_rate,
        multi_token_max=p.multi_token_max,
        keepalive_rate=p.keepalive_rate,
        keepalive_interval_s=p.keepalive_interval_ms / 1000.0 / speedup,
    )
    if p.error_rate and rng.random() < p.error_rate:
        plan.error_status = rng.choice(p.error_codes)
        plan.retry_after_s = p.retry_after_s
        return plan
    if p.stall_first_prob and rng.random() < p.stall_first_prob:
        plan.stall_first_s = p.stall_first_ms / 1000.0 / speedup
    if p.stall_mid_prob and output_tokens > 1 and rng.random() < p.stall_mid_prob:
        plan.stall_mid_at = rng.randint(1, output_tokens - 1)
        plan.stall_mid_s = p.stall_mid_ms / 1000.0 / speedup
    if p.cut_rate and output_tokens > 1 and rng.random() < p.cut_rate:
        plan.cut_at = rng.randint(1, output_tokens - 1)
    if p.malformed_rate or p.multi_token_rate or p.keepalive_rate:
        plan.rng = rng
    return plan
