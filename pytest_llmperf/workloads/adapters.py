"""``llm_workload(adapters={"name": weight, ...})``: which served model each request names.

Multi-adapter serving (LoRA adapters behind one base model, requests naming
the adapter as their ``model``) has its own scheduling and swap costs; a test
spreads its requests over the adapters by weight and the rest of the weight
goes to the base model. The draw is a pure function of the workload's seed and
the sample's index, so a repeated run sends each sample to the same model and
per-model results compare run to run.
"""

from __future__ import annotations

import math
import random
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pytest_llmperf.errors import LlmPerfUsageError

__all__ = ["BASE_MODEL", "BASE_MODEL_LABEL", "AdapterMix", "parse_adapters"]

BASE_MODEL = ""  # a draw of the base model: the client sends the endpoint's model
BASE_MODEL_LABEL = "base"  # the base model's share in describe()
_SLACK = 1e-9  # weights summing to 1 within float error


@dataclass(frozen=True, slots=True)
class AdapterMix:
    """Adapters with their shares of the requests, in the order given; the base model
    takes ``1 - sum`` (:attr:`base_share`)."""

    weights: tuple[tuple[str, float], ...]

    @property
    def base_share(self) -> float:
        return max(0.0, 1.0 - sum(w for _, w in self.weights))

    def draw(self, seed: int, index: int) -> str:
        """The model sample ``index`` names: an adapter, or :data:`BASE_MODEL` (``""``).

        A pure function of ``(seed, index)``: one uniform draw from its own
        seeded stream, placed on the cumulative weights.
        """
        return self.at(random.Random(f"{seed}:model:{index}").random())

    def at(self, u: float) -> str:
        """The model at point ``u`` of ``[0, 1)``: the adapters' shares in order, then the
        base model's."""
        total = 0.0
        for name, weight in self.weights:
            total += weight
            if u < total:
                return name
        if self.base_share <= _SLACK:  # weights summing to 1: float error must not reach base
            return next((n for n, w in reversed(self.weights) if w > 0), BASE_MODEL)
        return BASE_MODEL

    def describe(self) -> dict[str, float]:
        """Each adapter's share, then the base model's under ``"base"``."""
        return {**dict(self.weights), BASE_MODEL_LABEL: round(self.base_share, 12)}


def parse_adapters(workload: str, value: Any) -> AdapterMix | None:
    """``adapters=``: a dict of served model names to weights (>= 0, summing to at most 1).

    None when not given. Bad values are :class:`LlmPerfUsageError` naming
    ``workload`` and the value.
    """
    if value is None:
        return None
    given = f"adapters={value!r:.200}"
    if not isinstance(value, Mapping) or not value:
        raise LlmPerfUsageError(
            f"workload {workload!r}: adapters must be a dict of served model names to "
            f'weights, e.g. {{"lora-a": 0.4, "lora-b": 0.4}} (the rest goes to the base '
            f"model), got {value!r:.200}"
        )
    weights: list[tuple[str, float]] = []
    for name, weight in value.items():
        if not isinstance(name, str) or not name.strip():
            raise LlmPerfUsageError(
                f"workload {workload!r}: {given}: a model name must be a non-empty string, "
                f"got {name!r}"
            )
        if name == BASE_MODEL_LABEL:
            raise LlmPerfUsageError(
                f"workload {workload!r}: {given}: {BASE_MODEL_LABEL!r} stands for the base "
                "model's share (what the weights leave); name the adapters only"
            )
        if (
            isinstance(weight, bool)
            or not isinstance(weight, (int, float))
            or not math.isfinite(weight)
            or weight < 0
        ):
            raise LlmPerfUsageError(
                f"workload {workload!r}: {given}: the weight of {name!r} must be a number "
                f">= 0, got {weight!r}"
            )
        weights.append((name, float(weight)))
    total = sum(w for _, w in weights)
    if total > 1 + _SLACK:
        raise LlmPerfUsageError(
            f"workload {workload!r}: {given}: the weights sum to {total:g}; they are shares "
            "of the requests and must sum to at most 1 (the rest goes to the base model)"
        )
    return AdapterMix(tuple(weights))
