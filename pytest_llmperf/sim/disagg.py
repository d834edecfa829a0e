"""Disaggregated serving: a prefill pool and a decode pool, the KV cache moved between.

vLLM's P/D disaggregation (the NIXL connector behind llm-d's or vLLM's own proxy),
SGLang's PD mode and Dynamo run a request's prompt on a prefill engine, move the
prompt's KV blocks to a decode engine, and decode there. The profile keys
``prefill_replicas`` and ``decode_replicas`` make the simulator that deployment, with
``kv_transfer_us_per_block`` the cost of moving one full prompt block:

1. the router (router.py, the profile's policy) picks a prefill engine and a decode
   engine when the request arrives (as llm-d's scheduler and vLLM's proxy do; the
   answer's ``x-replica-id`` names the decode engine, ``x-prefill-replica-id`` the
   prefill one);
2. the prefill engine queues and runs the prompt as a request of one output token
   (vLLM's prefill instance gets ``max_tokens=1``): its queue and prefill time, in its
   batch, with its prefix cache;
3. the prompt's full blocks the decode engine does not hold yet move: blocks × the
   per-block cost, while the request waits (observed on the decode engine's page as
   ``vllm:nixl_xfer_time_seconds``, as vLLM records it on the side that pulls);
4. the blocks land in the decode engine's prefix cache (:meth:`~.kv_cache.KVCache.land`),
   so its own prefill of the request finds them and computes only the prompt's last
   partial block; it emits the first token and the rest.

The client's TTFT is so prefill queue + prefill + transfer + the decode engine's queue
and first step (plus the API overhead), each on the page of the engine it happened on.
A prefill engine's page counts its requests (one generated token each) and their queue
and prefill times; the answer's front-end histograms (TTFT, ITL, end to end) are the
decode engine's page's, as the decode side streams the answer.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
from collections.abc import Sequence

from .clock import sleep_until
from .prometheus import KV_TRANSFER_BUCKETS, Histogram, ServerCounters
from .replicas import ReplicaSet, summed_stats
from .streams import Backend, BackendStats, ServedTimes, Submission, TokenStream

__all__ = ["DecodeView", "DisaggBackend", "DisaggStream"]


class DecodeView:
    """What a router reads of the decode pool: the requests assigned to each decode
    engine (from arrival: it is picked up front) and its prefix cache."""

    def __init__(self, backend: DisaggBackend) -> None:
        self._backend = backend

    def loads(self) -> list[int]:
        return list(self._backend.assigned)

    def cached_blocks(self, replica: int, hashes: Sequence[int]) -> int:
        return self._backend.decode.cached_blocks(replica, hashes)


class DisaggBackend:
    """The prefill pool and the decode pool served as one back end (``Submission.replica``
    the prefill engine, ``Submission.decode`` the decode engine)."""

    def __init__(
        self,
        prefill: Sequence[Backend],
        decode: Sequence[Backend],
        *,
        prefill_counters: Sequence[ServerCounters],
        decode_counters: Sequence[ServerCounters],
        block_size: int,
        transfer_s_per_block: float,
        timing: str,
    ) -> None:
        self.prefill = ReplicaSet(prefill)
        self.decode = ReplicaSet(decode)
        self.prefill_counters = list(prefill_counters)
        self.decode_counters = list(decode_counters)
        for counters in self.decode_counters:
            if counters.kv_transfer is None:
                counters.kv_transfer = Histogram(KV_TRANSFER_BUCKETS)
        self.block_size = block_size
        self.transfer_s_per_block = transfer_s_per_block  # loop seconds (speedup applied)
        self.timing = timing
        self.assigned = [0] * len(decode)  # requests picked for each decode engine, not done
        self.view = DecodeView(self)

    @property
    def in_flight(self) -> int:
        return sum(self.assigned)

    @property
    def has_prefix_cache(self) -> bool:
        return self.prefill.has_prefix_cache and self.decode.has_prefix_cache

    async def start(self) -> None:
        await self.prefill.start()
        await self.decode.start()

    async def stop(self) -> None:
        await asyncio.gather(self.prefill.stop(), self.decode.stop())

    def poll(self) -> None:
        self.prefill.poll()
        self.decode.poll()

    def submit(self, sub: Submission) -> DisaggStream:
        if not 0 <= sub.decode < len(self.decode):
            raise ValueError(f"no decode engine {sub.decode} (decode: {len(self.decode)})")
        return DisaggStream(self, sub)

    def replica_stats(self) -> list[BackendStats]:
        """Each engine's own stats: the prefill pool, then the decode pool."""
        return self.prefill.replica_stats() + self.decode.replica_stats()

    def stats(self) -> BackendStats:
        return summed_stats(self.replica_stats())

    def reset_prefix_cache(self) -> bool:
        done = [self.prefill.reset_prefix_cache(), self.decode.reset_prefix_cache()]
        return all(done)


class DisaggStream:
    """One request through both pools: its prefill, the transfer, then the decode
    engine's stream (whose tokens the client gets)."""

    def __init__(self, backend: DisaggBackend, sub: Submission) -> None:
        self._backend = backend
        self._sub = sub
        loop = asyncio.get_running_loop()
        self.arrival = loop.time()
        backend.assigned[sub.decode] += 1
        self._prefill = backend.prefill.submit(dataclasses.replace(sub, output_tokens=1))
        self._decode: TokenStream | None = None
        self._closed = False
        self.transfer_s: float | None = None  # the transfer's loop seconds, once done
        self._ready = loop.create_task(self._hand_over(), name="sim-kv-transfer")

    @property
    def cached_tokens(self) -> int:
        """The prompt's prefix-cache hit where it was computed: on the prefill engine."""
        return self._prefill.cached_tokens

    async def _hand_over(self) -> None:
        backend, sub = self._backend, self._sub
        prefill = self._prefill
        await prefill.next_token()  # its one token: the prompt's KV blocks are computed
        loop = asyncio.get_running_loop()
        counters = backend.prefill_counters[sub.replica]
        counters.prompt_tokens += sub.prompt_tokens
        counters.prefilled(prefill.served_times())
        prefill.close()
        hashes = sub.block_hashes[: sub.prompt_tokens // backend.block_size]
        kv = backend.decode.cache(sub.decode)
        assert kv is not None  # disaggregated profiles are engines with prefix caching
        moving = len(hashes) - kv.cached_prefix(hashes)
        if moving > 0:
            start = loop.time()
            await sleep_until(start + moving * backend.transfer_s_per_block, backend.timing)
            self.transfer_s = loop.time() - start
            kv_transfer = backend.decode_counters[sub.decode].kv_transfer
            assert kv_transfer is not None
            kv_transfer.observe(self.transfer_s)
        kv.land(hashes)
        self._decode = backend.decode.submit(dataclasses.replace(sub, replica=sub.decode))

    async def next_token(self) -> float | None:
        if self._decode is None:
            await self._ready
            assert self._decode is not None
        return await self._decode.next_token()

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._backend.assigned[self._sub.decode] -= 1
        if not self._ready.done():
            self._ready.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            if self._ready.done() and not self._ready.cancelled():
                self._ready.exception()  # retrieved: no "never retrieved" warning
        self._prefill.close()
        if self._decode is not None:
            self._decode.close()

    def served_times(self) -> ServedTimes | None:
        """The decode engine's own times of the request (its page's phases)."""
        return None if self._decode is None else self._decode.served_times()
