"""Step-time model: how long one engine iteration takes for a given batch.

A continuous-batching engine's iteration cost is dominated by a fixed part
(kernel launches, scheduling, sampling: beta0), a part proportional to the
prefill tokens (compute-bound: beta1), one per decoding sequence (beta2) and
one proportional to the attention context read (memory-bound: beta3). This
linear "blackbox" form is what BLIS fits to real vLLM traces; its profile
coefficients reproduce published step times (see profiles.yaml).
Non-GPU overheads (alpha) delay a request without blocking the engine.
"""

from __future__ import annotations

from dataclasses import dataclass

from .profiles import Profile

__all__ = ["LatencyModel"]


@dataclass(frozen=True)
class LatencyModel:
    """Coefficients in microseconds; results in seconds."""

    beta0_us: float
    beta1_us: float
    beta2_us: float
    beta3_us: float
    alpha0_us: float
    alpha1_us: float
    alpha2_us: float

    @classmethod
    def from_profile(cls, p: Profile) -> LatencyModel:
        return cls(
            p.beta0_us, p.beta1_us, p.beta2_us, p.beta3_us, p.alpha0_us, p.alpha1_us, p.alpha2_us
        )

    def step_s(self, prefill_tokens: int, decode_tokens: int, context_tokens: int) -> float:
        """Duration of one step (never zero, so simulated time always advances)."""
        us = (
            self.beta0_us
            + self.beta1_us * prefill_tokens
            + self.beta2_us * decode_tokens
            + self.beta3_us * context_tokens
        )
        return max(us, 1.0) * 1e-6

    def queue_delay_s(self, prompt_tokens: int) -> float:
        """API-server overhead between arrival and the wait queue (tokenization etc.)."""
        return (self.alpha0_us + self.alpha1_us * prompt_tokens) * 1e-6

    @property
    def output_delay_s(self) -> float:
        """Per-token output processing (detokenize, serialize) after the step ends."""
        return self.alpha2_us * 1e-6
