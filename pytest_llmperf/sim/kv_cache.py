"""KV cache of fixed-size blocks with prefix caching, as vLLM manages it.

Only block *counts* and block *hashes* matter to latency, so the cache keeps
no block ids: a free pool of content-less blocks (a counter), a map from the
chained hash of a full prompt block to its reference count, and an LRU list of
hashed blocks nobody references (they are free, but reusable by a later
request with the same prefix until evicted; an ended request's own blocks, which
nobody can hit, wait there as one anonymous run). A request's own blocks (hashes
no other request has, ``own_from`` on) are held without an entry in the map
until it is first preempted: only it could look them up, and only after that.
Allocation is transactional: it checks the whole need first and either takes
every block or changes nothing. Conservation, ``allocated + free == total``,
holds after every operation.
"""

from __future__ import annotations

from collections import OrderedDict, deque
from collections.abc import Iterable, Sequence
from typing import Protocol

__all__ = ["NEVER", "FreedRun", "KVCache", "KVHolder", "prompt_block_hashes"]


def prompt_block_hashes(
    tokens: list[str], block_size: int, adapter: str | None = None
) -> tuple[int, ...]:
    """Chained hashes of the prompt's full blocks: block i's hash covers blocks 0..i.

    Chaining makes a hash identify a whole prefix, so two prompts share a
    cached block only if everything before it is identical too. A LoRA
    ``adapter``'s blocks start from a chain of their own: its KV differs from the
    base model's for the same tokens, so vLLM keys its prefix cache by adapter too.
    """
    out = []
    h = 0 if adapter is None else hash(("lora", adapter))
    for start in range(0, len(tokens) - block_size + 1, block_size):
        h = hash((h, tuple(tokens[start : start + block_size])))
        out.append(h)
    return tuple(out)


NEVER = 1 << 62


class FreedRun:
    """Free cached blocks of an ended request that no other request can hit (its own
    blocks): in the LRU order they take their place, but only as a count."""

    __slots__ = ("blocks",)

    def __init__(self, blocks: int) -> None:
        self.blocks = blocks

    def __repr__(self) -> str:
        return f"FreedRun({self.blocks})"


class KVHolder(Protocol):
    """What the cache keeps on each request (the engine's Request)."""

    blocks: int  # blocks held: shared (hashed) + private
    held: list[int]  # hashes this request holds a reference on, a prefix of block_hashes
    block_hashes: Sequence[int]  # chained hashes of the full blocks of prompt + output
    pub_at: int  # computed tokens at which publishing the next block is possible
    own_from: int  # block_hashes[own_from:] are in no other holder's block_hashes
    preemptions: int  # times it lost its blocks and started over


class KVCache:
    """Block accounting for one engine."""

    def __init__(self, num_blocks: int, block_size: int, prefix_caching: bool = True) -> None:
        self.total = num_blocks
        self.block_size = block_size
        self.prefix_caching = prefix_caching
        self.free_uncached = num_blocks
        self.refs: dict[int, int] = {}  # hash -> reference count (0 = free, in lru)
        # free hashed blocks, oldest first: hashes, and runs of blocks of ended requests
        # that nobody can ever look up again (FreedRun: kept as a count)
        self.lru: OrderedDict[int | FreedRun, None] = OrderedDict()
        self.lru_blocks = 0  # blocks in lru
        self.allocated = 0
        self.hit_tokens = 0
        self.query_tokens = 0

    @property
    def free(self) -> int:
        return self.free_uncached + self.lru_blocks

    @property
    def usage(self) -> float:
        return self.allocated / self.total

    def match_prefix(self, req: KVHolder, num_tokens: int) -> int:
        """Leading prompt blocks already cached; leaves at least one token to compute."""
        hashes = req.block_hashes
        self.query_tokens += num_tokens
        if not self.prefix_caching or not hashes:
            return 0
        limit = min(len(hashes), (num_tokens - 1) // self.block_size)
        refs = self.refs
        k = 0
        while k < limit and hashes[k] in refs:
            k += 1
        self.hit_tokens += k * self.block_size
        return k

    def cached_prefix(self, hashes: Sequence[int]) -> int:
        """How many of ``hashes``, from the first, are cached now (in use or free but
        reusable): what a prefix-aware router asks. A lookup only: no counter moves."""
        if not self.prefix_caching:
            return 0
        refs = self.refs
        k = 0
        for h in hashes:
            if h not in refs:
                break
            k += 1
        return k

    def land(self, hashes: Sequence[int]) -> int:
        """Blocks computed elsewhere arrive (a disaggregated deployment's KV transfer from
        a prefill engine): each hash not cached yet takes a free uncached block and
        waits in the LRU as a free cached block, findable by :meth:`match_prefix`, until
        the request it came for is admitted (or evicted by others first). Stops at the
        first block there is no free uncached block for. Returns the blocks cached now,
        from the first."""
        if not self.prefix_caching:
            return 0
        refs = self.refs
        lru = self.lru
        k = 0
        for h in hashes:
            if h not in refs:
                if not self.free_uncached:
                    break
                self.free_uncached -= 1
                refs[h] = 0
                lru[h] = None
                self.lru_blocks += 1
            k += 1
        return k

    def allocate_new(self, req: KVHolder, hit_blocks: int, num_tokens: int) -> bool:
        """Admit ``req`` (holding nothing) with its first ``hit_blocks`` cached and
        room for ``num_tokens`` more. All or nothing."""
        bs = self.block_size
        hashes = req.block_hashes[:hit_blocks]
        refs = self.refs
        reclaimed = sum(1 for h in hashes if refs[h] == 0)
        new_private = (hit_blocks * bs + num_tokens + bs - 1) // bs - hit_blocks
        if new_private > self.free - reclaimed:
            return False
        lru = self.lru
        for h in hashes:
            r = refs[h]
            if r == 0:
                del lru[h]
                self.lru_blocks -= 1
                self.allocated += 1
            refs[h] = r + 1
        req.held = list(hashes)
        req.pub_at = 0
        req.blocks = hit_blocks
        self._take(req, new_private)
        return True

    def grow(self, req: KVHolder, need: int) -> bool:
        """Give a running request ``need`` more private blocks. All or nothing."""
        if need > self.free_uncached + self.lru_blocks:
            return False
        self._take(req, need)
        return True

    def _take(self, req: KVHolder, n: int) -> None:
        self.take(n)
        req.blocks += n

    def take(self, n: int) -> None:
        """Allocate ``n`` blocks whose holders count them themselves (lockstep.py; the
        caller checked ``n <= free``): fresh ones first, then the least recently freed
        cached ones. Which holder takes which does not matter, blocks have no ids."""
        take_fresh = min(n, self.free_uncached)
        self.free_uncached -= take_fresh
        evict = n - take_fresh
        self.lru_blocks -= evict
        self.allocated += n
        lru = self.lru
        refs = self.refs
        while evict:  # the least recently freed cached blocks
            key, _none = lru.popitem(last=False)
            if isinstance(key, FreedRun):
                if key.blocks > evict:  # partly: the rest stays oldest
                    key.blocks -= evict
                    lru[key] = None
                    lru.move_to_end(key, last=False)
                    break
                evict -= key.blocks
            else:
                del refs[key]
                evict -= 1

    def publish(self, req: KVHolder, computed_tokens: int) -> None:
        """Make the request's fully computed blocks (prompt, then generated text)
        findable by later requests, e.g. the next turn of a conversation."""
        hashes = req.block_hashes
        if not self.prefix_caching:
            req.pub_at = NEVER
            return
        held = req.held
        refs = self.refs
        bs = self.block_size
        upto = min(len(hashes), computed_tokens // bs)
        i = len(held)
        listed = upto
        if not req.preemptions and req.own_from < upto:
            listed = max(i, req.own_from)  # its own blocks from here: held, not listed
        if listed - i > 1:  # several blocks: all at once unless one is a repeat
            new = hashes[i:listed]
            fresh = dict.fromkeys(new, 1)
            if len(fresh) == len(new) and refs.keys().isdisjoint(fresh):
                refs.update(fresh)
                held.extend(new)
                i = listed
        while i < listed:
            h = hashes[i]
            if h in refs:  # computed twice concurrently: keep ours private, end the chain
                req.pub_at = NEVER
                return
            refs[h] = 1
            held.append(h)  # a private block becomes a shared one: counts unchanged
            i += 1
        if i < upto:
            held.extend(hashes[i:upto])
            i = upto
        req.pub_at = (i + 1) * bs if i < len(hashes) else NEVER

    def release(self, req: KVHolder, *, final: bool = False) -> None:
        """Free everything ``req`` holds; its hashed blocks stay reusable (LRU).

        ``final``: the request has ended (finished or aborted), so nobody will look its
        own blocks (``own_from`` on) up again: they stay in the LRU order as one
        anonymous run, not block by block."""
        refs = self.refs
        lru = self.lru
        held = req.held
        own = req.own_from
        if own < len(held):  # its own blocks, held by it alone, freed at once
            tail = held[: own - 1 if own else None : -1]  # tail blocks first: evicted first
            if final:
                if req.preemptions:  # listed (see publish)
                    deque(map(refs.__delitem__, tail), maxlen=0)
                lru[FreedRun(len(tail))] = None
            else:
                refs.update(dict.fromkeys(tail, 0))
                lru.update(dict.fromkeys(tail))
            self.lru_blocks += len(tail)
            self.allocated -= len(tail)
            held = held[:own]
        for h in reversed(held):  # tail blocks first, so they are evicted first
            r = refs[h] - 1
            refs[h] = r
            if r == 0:
                lru[h] = None
                self.lru_blocks += 1
                self.allocated -= 1
        private = req.blocks - len(req.held)
        self.free_uncached += private
        self.allocated -= private
        req.blocks = 0
        req.held = []
        req.pub_at = 0

    def reset_prefix_cache(self) -> bool:
        """Forget every cached prefix, as vLLM's ``BlockPool.reset_prefix_cache`` does:
        only when no block is in use (else False, nothing changed), so no running request
        loses a block it holds. The free hashed blocks become plain free blocks; the hit
        and query counters keep counting (Prometheus counters never go back)."""
        if self.allocated:
            return False
        self.free_uncached += self.lru_blocks
        self.lru.clear()
        self.lru_blocks = 0
        self.refs.clear()
        return True

    def check(self, holders: Iterable[KVHolder]) -> None:
        """Full consistency check (debug): conservation and reference counts."""
        assert self.allocated + self.free == self.total, (self.allocated, self.free, self.total)
        assert 0 <= self.free_uncached <= self.total
        counted: dict[int, int] = {}
        private = unlisted = 0
        for r in holders:
            for h in r.held:
                counted[h] = counted.get(h, 0) + 1
            private += r.blocks - len(r.held)
            assert r.blocks >= len(r.held)
            if not r.preemptions and r.own_from < len(r.held):
                unlisted += len(r.held) - r.own_from
                assert not any(h in self.refs for h in r.held[r.own_from :])
        for h, n in self.refs.items():
            assert n == counted.get(h, 0), (h, n, counted.get(h, 0))
            assert (n == 0) == (h in self.lru)
        hashed = sum(1 for key in self.lru if type(key) is not FreedRun)
        assert hashed == sum(1 for n in self.refs.values() if n == 0)
        runs = sum(key.blocks for key in self.lru if type(key) is FreedRun)
        assert self.lru_blocks == hashed + runs, (self.lru_blocks, hashed, runs)
        listed = sum(1 for n in self.refs.values() if n > 0)
        assert self.allocated == private + unlisted + listed
