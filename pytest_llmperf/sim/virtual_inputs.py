"""What a virtual run sends: the arrival schedule, each request's sizes and prefix.

Open-loop arrivals follow the load generator's own schedule (:func:`arrival_times`);
each request's prompt and output sizes, prompt block hashes (a shared prefix, then
its own blocks) and LoRA adapter are seeded draws (:class:`VirtualWorkload`), so a
run is a pure function of its inputs. The run itself is virtual.py's.
"""

from __future__ import annotations

import random
from collections.abc import Sequence

import numpy as np

from .profiles import Profile
from .request import Request

__all__ = ["OWN_KEYS", "VirtualWorkload", "adapter_mix", "arrival_times", "token_span"]

# A request's own blocks (past the shared prefix) are keyed ``OWN_KEYS + (rid << 32) + i``:
# the cache only ever compares block keys for equality, and these are unique to their
# request and block and, being >= 2**64, never equal to a ``hash()`` value (a shared
# prefix's chained hashes), which is all a chained hash of them guaranteed. As a
# ``range`` they cost no work per block and no memory per block while a request waits
# (an overloaded hour queues a quarter of a million requests).
OWN_KEYS = 1 << 64


def arrival_times(load: str, rate: float, duration: float, seed: int) -> list[float]:
    """Planned send times (s) in [0, duration): the load generator's own schedule.

    Same algorithm and seed use as ``pytest_llmperf.loadgen.plan.arrivals.arrival_offsets_ns``
    (Poisson gaps from ``random.Random(seed).expovariate(rate)``, constant at ``i / rate``,
    rounded to whole nanoseconds), so a virtual run sees exactly the arrivals a real run
    with the same seed would send. Kept here rather than imported so the simulator does
    not load the whole load generator; a test checks the two agree.
    """
    if rate <= 0:
        raise ValueError(f"rate must be positive, got {rate}")
    out: list[float] = []
    if load == "constant":
        i = 0
        while (t := round(i * 1e9 / rate) / 1e9) < duration:
            out.append(t)
            i += 1
        return out
    if load != "poisson":
        raise ValueError(f"unknown open-loop pattern {load!r}")
    rng = random.Random(seed)
    offset = 0.0
    while (t := round(offset * 1e9) / 1e9) < duration:
        out.append(t)
        offset += rng.expovariate(rate)
    return out


class VirtualWorkload:
    """Seeded request sizes and prompt block hashes."""

    def __init__(
        self,
        profile: Profile,
        input_tokens: tuple[int, int],
        output_tokens: tuple[int, int],
        shared_prefix: int,
        rng: np.random.Generator,
        adapters: tuple[tuple[str, float], ...] = (),
        seed: int = 0,
    ) -> None:
        self.rng = rng
        # adapters: drawn from a generator of their own, so sizes stay as without them
        self.adapter_weights = [w for _, w in adapters]
        self.adapter_rng = random.Random(f"adapters:{seed}") if adapters else None
        self.inp = input_tokens
        self.out = output_tokens
        self.bs = profile.block_size
        self.hashing = profile.enable_prefix_caching
        shared_blocks = shared_prefix // self.bs
        h = 0
        prefix = []
        for i in range(shared_blocks):
            h = hash((h, -1, i))
            prefix.append(h)
        self.prefix = tuple(prefix)

    def make(self, rid: int, arrival: float) -> Request:
        lo, hi = self.inp
        p = int(self.rng.integers(lo, hi + 1)) if hi > lo else lo
        lo, hi = self.out
        o = int(self.rng.integers(lo, hi + 1)) if hi > lo else lo
        hashes: Sequence[int] = ()
        shared: tuple[int, ...] = ()
        if self.hashing:
            n_blocks = (p + o) // self.bs  # prompt and output blocks are both cacheable
            shared = self.prefix[: p // self.bs]
            base = OWN_KEYS + (rid << 32)
            own = range(base + len(shared), base + n_blocks)
            hashes = shared + tuple(own) if shared else own
        lora = 0
        if self.adapter_rng is not None:
            x = self.adapter_rng.random()
            for k, w in enumerate(self.adapter_weights):
                if x < w:
                    lora = k + 1
                    break
                x -= w
        # blocks past the shared prefix are this request's alone (their hashes chain its rid)
        return Request(rid, arrival, p, o, hashes, lora=lora, own_from=len(shared))


def token_span(tokens: int | tuple[int, int]) -> tuple[int, int]:
    """``n`` -> ``(n, n)``; a ``(min, max)`` pair as a tuple."""
    if isinstance(tokens, int):
        return (tokens, tokens)
    low, high = tokens
    return (low, high)


def adapter_mix(prof: Profile, adapters: dict[str, float] | None) -> tuple[tuple[str, float], ...]:
    """``adapters`` checked against the profile (ValueError naming the problem)."""
    if not adapters:
        return ()
    for name, weight in adapters.items():
        if name not in prof.lora_adapters:
            raise ValueError(
                f"adapter {name!r} is not served by profile {prof.name!r} "
                f"(lora_adapters: {', '.join(prof.lora_adapters) or 'none'})"
            )
        if isinstance(weight, bool) or not isinstance(weight, int | float) or weight < 0:
            raise ValueError(f"adapter {name!r}: weight must be a number >= 0, got {weight!r}")
    if sum(adapters.values()) > 1 + 1e-9:
        raise ValueError(f"adapter weights sum to {sum(adapters.values()):g} > 1")
    order = {name: k for k, name in enumerate(prof.lora_adapters)}
    return tuple(sorted(((n, float(w)) for n, w in adapters.items()), key=lambda x: order[x[0]]))
