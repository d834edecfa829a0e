"""The LoRA slot model: which adapters are resident, what swapping one in costs.

vLLM serves LoRA adapters (``--enable-lora --lora-modules NAME=PATH``) as model
names of their own: a request naming one runs the base model plus that adapter.
Two costs make that path regress apart from plain serving, and the simulator
models both (profile keys in brackets):

- **slots** (``max_loras``, vLLM's default 1): at most that many distinct
  adapters are resident on the GPU, hence in one batch. A waiting request whose
  adapter is not resident joins the batch only if a slot is free or holds an
  adapter no running request uses (that one is evicted, least recently used
  first); otherwise it is skipped this step and the next waiting requests are
  considered, as vLLM's scheduler does.
- **time**: every engine step pays ``lora_step_us`` per distinct adapter in its
  batch (the LoRA kernels' extra work), and ``lora_load_us`` per adapter it had
  to load into a slot.

The ``fixed`` back end has no batch: there an adapter request's ITL grows by
``lora_step_us`` and its TTFT by ``lora_load_us`` when its adapter was not among
the ``max_loras`` most recently used. The base model (adapter 0) is always
resident and costs nothing extra.
"""

from __future__ import annotations

from collections import OrderedDict

__all__ = ["LoraSlots"]


class LoraSlots:
    """``max_loras`` slots, LRU, with the running requests holding theirs."""

    __slots__ = ("load_us", "loads", "max_loras", "resident", "step_us", "total_loads", "users")

    def __init__(self, max_loras: int, step_us: float, load_us: float) -> None:
        self.max_loras = max_loras
        self.step_us = step_us
        self.load_us = load_us
        self.resident: OrderedDict[int, None] = OrderedDict()  # least recently used first
        self.users: dict[int, int] = {}  # running requests per resident adapter
        self.loads = 0  # loads since the engine last priced a step
        self.total_loads = 0

    def can_admit(self, lora: int) -> bool:
        """Whether a request of adapter ``lora`` may join the batch now."""
        if lora in self.resident or len(self.resident) < self.max_loras:
            return True
        return any(not self.users.get(a) for a in self.resident)

    def admit(self, lora: int) -> bool:
        """Make ``lora`` resident (evicting the least recently used idle adapter if the
        slots are full) and count one more user; True if it had to be loaded. Call only
        after :meth:`can_admit`."""
        loaded = False
        if lora in self.resident:
            self.resident.move_to_end(lora)
        else:
            if len(self.resident) >= self.max_loras:
                victim = next(a for a in self.resident if not self.users.get(a))
                del self.resident[victim]
                self.users.pop(victim, None)
            self.resident[lora] = None
            self.loads += 1
            self.total_loads += 1
            loaded = True
        self.users[lora] = self.users.get(lora, 0) + 1
        return loaded

    def release(self, lora: int) -> None:
        """A request of ``lora`` left the batch (finished, preempted or aborted)."""
        self.users[lora] -= 1

    def step_cost_us(self, batch_loras: set[int]) -> float:
        """The extra time of a step whose batch uses ``batch_loras``; takes the loads
        counted since the last call."""
        cost = self.step_us * len(batch_loras) + self.load_us * self.loads
        self.loads = 0
        return cost
