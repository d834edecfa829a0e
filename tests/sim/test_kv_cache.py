"""KV cache: transactional allocation, prefix reuse, LRU eviction, conservation."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from pytest_llmperf.sim.kv_cache import KVCache, prompt_block_hashes
from pytest_llmperf.sim.request import Request


def req(rid: int, prompt: int, hashes: tuple[int, ...] = ()) -> Request:
    return Request(rid, 0.0, prompt, 10, hashes)


def test_chained_hashes_identify_whole_prefixes() -> None:
    a = prompt_block_hashes([str(i) for i in range(40)], 16)
    b = prompt_block_hashes([str(i) for i in range(32)] + ["x"] * 8, 16)
    c = prompt_block_hashes(["y"] + [str(i) for i in range(1, 40)], 16)
    assert len(a) == 2  # only full blocks
    assert a == b  # same first 32 tokens
    assert c[0] != a[0] and c[1] != a[1]  # a different first block changes every later hash


def test_allocation_is_all_or_nothing() -> None:
    kv = KVCache(num_blocks=10, block_size=16)
    r1 = req(1, 100)
    assert kv.allocate_new(r1, 0, 100)  # 7 blocks
    assert (kv.allocated, kv.free, r1.blocks) == (7, 3, 7)
    r2 = req(2, 100)
    assert not kv.allocate_new(r2, 0, 100)  # needs 7, only 3 free: nothing taken
    assert (kv.allocated, kv.free, r2.blocks) == (7, 3, 0)
    assert not kv.grow(r1, 4)
    assert kv.grow(r1, 3) and kv.free == 0
    kv.release(r1)
    assert (kv.allocated, kv.free) == (0, 10)
    kv.check([])


def test_prefix_reuse_and_lru_eviction_order() -> None:
    kv = KVCache(num_blocks=8, block_size=4)
    ha = (11, 12, 13)
    a = req(1, 13, ha)
    assert kv.match_prefix(a, 13) == 0
    assert kv.allocate_new(a, 0, 13)  # 4 blocks
    kv.publish(a, 13)  # three full prompt blocks become shared
    assert a.held == [11, 12, 13]
    b = req(2, 13, ha)
    hit = kv.match_prefix(b, 13)
    assert hit == 3
    assert kv.allocate_new(b, hit, 13 - 12)  # one more private block
    assert kv.refs[11] == 2 and kv.allocated == 5
    kv.check([a, b])
    kv.release(a)
    kv.release(b)
    assert kv.allocated == 0 and list(kv.lru) == [13, 12, 11]  # tail blocks evicted first
    c = req(3, 30)
    assert kv.allocate_new(c, 0, 30)  # 8 blocks: evicts all three cached blocks
    assert not kv.lru and not kv.refs
    kv.check([c])


def test_fully_cached_prompt_still_computes_one_token() -> None:
    kv = KVCache(num_blocks=8, block_size=4)
    a = req(1, 8, (1, 2))
    kv.allocate_new(a, 0, 8)
    kv.publish(a, 8)
    b = req(2, 8, (1, 2))
    assert kv.match_prefix(b, 8) == 1  # the last block is recomputed


@settings(max_examples=150, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.sampled_from(["new", "grow", "release"]),
            st.integers(0, 7),
            st.integers(1, 60),
            st.integers(0, 3),
        ),
        max_size=60,
    )
)
def test_random_operations_keep_conservation(ops: list[tuple[str, int, int, int]]) -> None:
    kv = KVCache(num_blocks=20, block_size=4)
    live: dict[int, Request] = {}
    for op, slot, tokens, family in ops:
        r = live.get(slot)
        if op == "new" and r is None:
            hashes = tuple(range(family * 100, family * 100 + tokens // 4))
            r = req(slot, tokens, hashes)
            hit = kv.match_prefix(r, tokens)
            if kv.allocate_new(r, hit, tokens - hit * 4):
                kv.publish(r, tokens)
                live[slot] = r
            else:
                assert r.blocks == 0 and r.held == []
        elif op == "grow" and r is not None:
            before = r.blocks
            if not kv.grow(r, tokens // 8 + 1):
                assert r.blocks == before
        elif op == "release" and r is not None:
            kv.release(r)
            del live[slot]
        kv.check(list(live.values()))
        assert kv.allocated + kv.free == kv.total
    for r in live.values():
        kv.release(r)
    assert kv.allocated == 0 and kv.free == kv.total
