"""The chat wire format (skeleton: its client half moves here next)."""

from __future__ import annotations

__all__: list[str] = []


# -- the simulator's side (pytest_llmperf.sim serves this format with what follows) --
