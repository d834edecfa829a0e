"""When a run's steady-state window opens (``llm_load(..., steady=...)``), seen from the
issuing side: the book asks :meth:`SteadyGate.note` at each tracked request it issues
until the window is open, and the gate opens the accumulator's
:class:`~pytest_llmperf.results.steady.SteadyWindow`.

- ``steady={"skip_s": a, "until_s": b}``: at the first tracked request, the window is
  set to ``[t + a, t + b)`` with ``t`` that request's planned send;
- ``"auto"``, closed loop (conversation slots included): at the first request that
  brings this process's requests in flight to its slots (a staged loop: its largest
  stage's), the window opens at that request's send;
- ``"auto"``, open loop with stages or a ramp: at the planned instant the rate first
  reaches its highest level (the start of the first stage planned at it, or the end
  of the ramp that rises to it), on the run's clock;
- ``"auto"``, an open loop at one rate, or a trace: at the first tracked request (no
  ramp to leave out: only the drain is).

The window ends at the last request issued in it (the accumulator's side). Opening it
at issue is exact: no request started after the instant can end before it.
"""

from __future__ import annotations

from pytest_llmperf.results.steady import SteadyWindow
from pytest_llmperf.specs.load import LoadSpec
from pytest_llmperf.specs.steady import SteadyMode, SteadySpec

__all__ = ["SteadyGate", "level_offset_ns"]


def level_offset_ns(load: LoadSpec, bounds_ns: list[int]) -> int | None:
    """The planned instant (offset from ``t0``) an open loop's rate first reaches its
    highest level, from its stages and their planned ``bounds_ns``; None without stages."""
    stages = load.stages
    if not stages or not load.open_loop or len(bounds_ns) < len(stages) + 1:
        return None
    top = max(max(s.rate or 0.0, s.end_rate or 0.0) for s in stages)
    for k, stage in enumerate(stages):
        if (stage.rate or 0.0) >= top:
            return bounds_ns[k]
        if (stage.end_rate or 0.0) >= top:
            return bounds_ns[k + 1]
    return bounds_ns[-1]  # (not reached: some stage holds the top)


class SteadyGate:
    """Opens ``window`` at the right request; ``pending`` until it has.

    ``slots``: a closed loop's requests in flight at its level in this process (0: an
    open loop); ``level_offset_ns``: an open loop's planned instant of its level.
    """

    __slots__ = ("explicit", "level_offset_ns", "pending", "slots", "spec", "window")

    def __init__(
        self,
        spec: SteadySpec,
        window: SteadyWindow,
        *,
        slots: int = 0,
        level_offset_ns: int | None = None,
    ) -> None:
        self.spec = spec
        self.window = window
        self.explicit = spec.mode is SteadyMode.EXPLICIT
        self.slots = slots
        self.level_offset_ns = level_offset_ns
        self.pending = True

    def note(self, t_sched: int, offset_ns: int | None, in_flight: int) -> None:
        """A tracked request is issued, planned at ``t_sched`` (``offset_ns`` from ``t0``
        where planned), with ``in_flight`` others in flight: open the window if it is time."""
        if self.explicit:
            until = self.spec.until_ns
            self.window.open_at(
                t_sched + self.spec.skip_ns, None if until is None else t_sched + until
            )
        elif self.slots:
            if in_flight + 1 < self.slots:
                return
            self.window.open_at(t_sched)
        elif self.level_offset_ns is not None and offset_ns is not None:
            self.window.open_at(t_sched - offset_ns + self.level_offset_ns)
        else:
            self.window.open_at(t_sched)
        self.pending = False
