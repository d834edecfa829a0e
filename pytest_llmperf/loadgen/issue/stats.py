"""What the issuing side did, for the self-check: sends on and off their plan, CPU time.

Plain data that merges across workers (:meth:`IssueStats.merge`) and crosses
processes as a dict (:meth:`IssueStats.to_state`); the issuing book fills it,
the self-check, the worker pools and the live progress read it. Imports
nothing of ``loadgen/``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

__all__ = ["IssueStats"]


@dataclass
class IssueStats:
    """What the issuing side did, for the self-check; merges across workers."""

    tracked_issued: int = 0
    first_send_ns: int = 0
    last_send_ns: int = 0
    first_planned_ns: int = 0
    last_planned_ns: int = 0
    cpu_s: float = 0.0
    spin_s: float = 0.0  # of which spent spinning to planned instants (pacing="precise")
    wall_s: float = 0.0
    worker_cpu_s: list[float] = field(default_factory=list)
    stage_sends: list[int] = field(default_factory=list)  # tracked sends on each stage's clock

    def note(self, planned_ns: int, send_ns: int) -> None:
        if not self.tracked_issued:
            self.first_send_ns, self.first_planned_ns = send_ns, planned_ns
        self.tracked_issued += 1
        self.last_send_ns, self.last_planned_ns = send_ns, planned_ns

    def merge(self, other: IssueStats) -> None:
        if other.tracked_issued:
            if not self.tracked_issued:
                self.first_send_ns, self.first_planned_ns = (
                    other.first_send_ns,
                    other.first_planned_ns,
                )
                self.last_send_ns, self.last_planned_ns = other.last_send_ns, other.last_planned_ns
            else:
                self.first_send_ns = min(self.first_send_ns, other.first_send_ns)
                self.first_planned_ns = min(self.first_planned_ns, other.first_planned_ns)
                self.last_send_ns = max(self.last_send_ns, other.last_send_ns)
                self.last_planned_ns = max(self.last_planned_ns, other.last_planned_ns)
        self.tracked_issued += other.tracked_issued
        if len(self.stage_sends) < len(other.stage_sends):
            self.stage_sends += [0] * (len(other.stage_sends) - len(self.stage_sends))
        for k, n in enumerate(other.stage_sends):
            self.stage_sends[k] += n
        self.cpu_s += other.cpu_s
        self.spin_s += other.spin_s
        self.worker_cpu_s.append(round(other.cpu_s, 4))

    def to_state(self) -> dict[str, Any]:
        return dict(self.__dict__)

    @classmethod
    def from_state(cls, state: dict[str, Any]) -> IssueStats:
        return cls(**state)
