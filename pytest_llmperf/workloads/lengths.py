"""Length distributions the reference workloads draw token counts from.

The draft specifies log-normal lengths with a floor and a cap (synthetic-skewed,
the code-completion output); a draw is ``round(exp(N(mu, sigma)))`` clamped to
``[floor, cap]``, from the sample's own seeded stream so it is reproducible.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass
from typing import Any

from pytest_llmperf.errors import LlmPerfUsageError
from pytest_llmperf.workloads.params import positive_int

__all__ = ["LogNormalLength", "log_normal_length"]


@dataclass(frozen=True)
class LogNormalLength:
    """Log-normal token counts (``mu``, ``sigma`` in log space) clamped to ``[floor, cap]``."""

    mu: float
    sigma: float
    floor: int
    cap: int

    def draw(self, rng: random.Random) -> int:
        return min(self.cap, max(self.floor, round(math.exp(rng.gauss(self.mu, self.sigma)))))

    @property
    def median(self) -> float:
        return min(self.cap, max(self.floor, math.exp(self.mu)))

    def describe(self) -> dict[str, Any]:
        return {
            "distribution": "log-normal",
            "mu": self.mu,
            "sigma": self.sigma,
            "floor": self.floor,
            "cap": self.cap,
        }


def log_normal_length(name: str, value: Any, default: LogNormalLength) -> LogNormalLength:
    """``value`` as a log-normal spec: ``None`` (the draft's), or a dict overriding some keys."""
    if value is None:
        return default
    if not isinstance(value, dict):
        raise LlmPerfUsageError(
            f"{name} must be a dict with mu, sigma, floor, cap (any subset), got {value!r}"
        )
    unknown = sorted(set(value) - {"mu", "sigma", "floor", "cap"})
    if unknown:
        raise LlmPerfUsageError(
            f"{name} does not take {', '.join(unknown)} (mu, sigma, floor, cap)"
        )
    mu = value.get("mu", default.mu)
    sigma = value.get("sigma", default.sigma)
    for key, number in (("mu", mu), ("sigma", sigma)):
        if isinstance(number, bool) or not isinstance(number, (int, float)):
            raise LlmPerfUsageError(f"{name}.{key} must be a number, got {number!r}")
    if sigma < 0:
        raise LlmPerfUsageError(f"{name}.sigma must be >= 0, got {sigma!r}")
    floor = positive_int(f"{name}.floor", value.get("floor", default.floor))
    cap = positive_int(f"{name}.cap", value.get("cap", default.cap))
    if floor > cap:
        raise LlmPerfUsageError(f"{name}: floor {floor} is above cap {cap}")
    return LogNormalLength(float(mu), float(sigma), floor, cap)
