"""The fixed-latency back end: constant TTFT and ITL, no batching limits.

Measurement tests need a server whose latencies are known exactly, so that a
reported p99 can be compared with the truth. Each request's token times are
planned at arrival — ``ttft`` then one token every ``itl`` — and nothing else
in the server can delay them. Optional load dependence adds a fixed amount per
request already in flight, which makes latency rise with concurrency in a way
a test can predict; images in the prompt add ``ttft_per_image_token_ms`` per image
token (apis/prompt_images.py), so a larger image raises TTFT here too (text prompts do not).
"""

from __future__ import annotations

import asyncio

from .adapters import LoraSlots
from .clock import sleep_until
from .profiles import Profile
from .slow import SlowRequests
from .streams import BackendStats, ServedTimes, Submission

__all__ = ["FixedBackend", "FixedStream"]


class FixedStream:
    """Tokens at ``start + ttft + i * itl`` (loop time), scaled by speedup."""

    cached_tokens = 0

    def __init__(
        self, backend: FixedBackend, start: float, ttft_s: float, itl_s: float, n: int
    ) -> None:
        self._backend = backend
        self._arrival = start
        self._start = start + ttft_s
        self._itl = itl_s
        self._n = n
        self._i = 0
        self._closed = False

    async def next_token(self) -> float | None:
        if self._i >= self._n:
            self.close()
            return None
        when = self._start + self._i * self._itl
        self._i += 1
        await sleep_until(when, self._backend.timing)
        return when

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self._backend.active -= 1

    def served_times(self) -> ServedTimes | None:
        """Scheduled at once on arrival (no queue), tokens at their planned instants."""
        if self._i < self._n:
            return None
        last = self._start + (self._n - 1) * self._itl
        return ServedTimes(self._arrival, self._arrival, self._start, last)


class FixedBackend:
    """Back end for ``kind: fixed`` profiles."""

    def __init__(
        self,
        profile: Profile,
        speedup: float = 1.0,
        timing: str = "block",
        slow: SlowRequests | None = None,
    ) -> None:
        self.profile = profile
        self.slow = slow  # the slow-replica fault (slow.py): a slowed request's TTFT and ITL
        self.speedup = speedup
        self.timing = timing
        self.active = 0
        self.lora = LoraSlots(profile.max_loras, profile.lora_step_us, profile.lora_load_us)

    async def start(self) -> None:
        return None

    async def stop(self) -> None:
        return None

    @property
    def in_flight(self) -> int:
        """Requests submitted and not yet released (what ``least_loaded`` reads)."""
        return self.active

    def poll(self) -> None:
        """Nothing to do: each stream waits for its own tokens."""

    def submit(self, sub: Submission) -> FixedStream:
        p = self.profile
        load = self.active
        ttft_ms = p.ttft_ms + p.ttft_per_active_ms * load
        if sub.image_tokens:  # the vision encoder's share (docs/simulator.md, "Images")
            ttft_ms += p.ttft_per_image_token_ms * sub.image_tokens
        itl_ms = p.itl_ms + p.itl_per_active_ms * load
        if sub.lora:  # adapters.py: no batch here, so an LRU of max_loras and no waiting
            if self.lora.admit(sub.lora):
                ttft_ms += p.lora_load_us / 1000.0
            self.lora.release(sub.lora)
            itl_ms += p.lora_step_us / 1000.0
        if self.slow is not None and self.slow.next():
            ttft_ms *= self.slow.factor
            itl_ms *= self.slow.factor
        ttft_s = ttft_ms / 1000.0 / self.speedup
        itl_s = itl_ms / 1000.0 / self.speedup
        self.active += 1
        start = asyncio.get_running_loop().time()
        return FixedStream(self, start, ttft_s, itl_s, sub.output_tokens)

    def stats(self) -> BackendStats:
        return BackendStats(running=self.active)
