"""One SLO's verdict on one run (:class:`SloVerdict`) and its three values (:class:`Verdict`).

Apart from :mod:`.verdicts`, which judges, so that the modules that judge parts of a run
(:mod:`.fleet_verdicts`) name verdicts without importing the judge that calls them.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from enum import StrEnum
from typing import Any

__all__ = ["SloVerdict", "Verdict"]


class Verdict(StrEnum):
    """What an SLO says of a run (a ``StrEnum``: equal to, and written as, ``"pass"`` etc.)."""

    PASS = "pass"
    FAIL = "fail"
    INCONCLUSIVE = "inconclusive"  # never a pass


@dataclass(frozen=True)
class SloVerdict:
    """One SLO judged on one run (``verdict`` may be given as a plain name).

    A verdict on one stage of a staged run names the run in ``run``, the
    stage's index in ``stage`` (None for a whole run) and its planned load
    in ``stage_load`` (``"40 req/s"``, ``"10→20 req/s"``, ``"concurrency 4"``).
    """

    expr: str
    observed: float | None
    target: float
    unit: str
    verdict: Verdict
    run: str = ""
    samples: int = 0
    reason: str = ""
    stage: int | None = None
    stage_load: str = ""
    # a percentile verdict's confidence interval [lower, upper] of the percentile (upper
    # None: unbounded) at ``confidence``; None for the statistics judged as observed
    interval: tuple[float, float | None] | None = None
    confidence: float | None = None
    # llm_slo(..., per_model=True): the served model whose requests this verdict judged
    model: str | None = None
    # replica.<metric>: the replica whose requests this verdict judged (its name, as its
    # response header and its /metrics page name it); in the JSON only where set
    replica: str | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "verdict", Verdict(self.verdict))

    @property
    def where(self) -> str:
        """``stage 1: 40 req/s`` for a stage's verdict, ``model sim-lora-1`` for a served
        model's, ``replica 2`` for a replica's, ``""`` for a whole run's."""
        if self.replica is not None:
            return f"replica {self.replica}"
        if self.model is not None:
            return f"model {self.model}"
        if self.stage is None:
            return ""
        return f"stage {self.stage}" + (f": {self.stage_load}" if self.stage_load else "")

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON (the verdict as a plain string: reports cross xdist's wire);
        ``replica`` only on a replica's verdict."""
        out = {**asdict(self), "verdict": self.verdict.value}
        if self.replica is None:
            del out["replica"]
        return out
