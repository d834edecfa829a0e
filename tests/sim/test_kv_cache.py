"""KV cache: transactional allocation, prefix reuse, LRU eviction, conservation."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from pytest_llmperf.sim.kv_cache import FreedRun, KVCache, prompt_block_hashes
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


def test_an_ended_requests_own_blocks_wait_as_one_anonymous_run() -> None:
    kv = KVCache(num_blocks=12, block_size=4)
    a = Request(1, 0.0, 16, 4, (1, 2, 3, 4), own_from=1)  # block 1 shared, 2..4 its own
    assert kv.allocate_new(a, 0, 16)
    kv.publish(a, 16)
    kv.release(a, final=True)
    run, shared = kv.lru
    assert isinstance(run, FreedRun) and run.blocks == 3 and shared == 1  # tail first
    assert kv.refs == {1: 0} and kv.free == 12 and kv.lru_blocks == 4
    kv.check([])
    b = Request(2, 0.0, 40, 4)
    assert kv.allocate_new(b, 0, 40)  # 10 blocks: 8 fresh, then 2 of the run (oldest)
    assert [type(k) for k in kv.lru] == [FreedRun, int] and kv.lru_blocks == 2
    assert kv.grow(b, 1)  # the run's last block
    assert list(kv.lru) == [1] and kv.refs == {1: 0}
    kv.check([b])


def test_own_blocks_are_listed_only_once_their_request_was_preempted() -> None:
    kv = KVCache(num_blocks=12, block_size=4)
    a = Request(1, 0.0, 16, 4, (1, 2, 3, 4), own_from=1)
    assert kv.allocate_new(a, 0, 16)
    kv.publish(a, 16)
    assert a.held == [1, 2, 3, 4] and kv.refs == {1: 1}  # 2..4: held, nobody can look up
    kv.check([a])
    kv.release(a)  # preempted: its own blocks become findable, for its recompute
    a.preemptions += 1
    assert kv.refs == {1: 0, 2: 0, 3: 0, 4: 0} and list(kv.lru) == [4, 3, 2, 1]
    assert kv.match_prefix(a, 16) == 3  # the last block is recomputed
    assert kv.allocate_new(a, 3, 4)
    kv.publish(a, 16)  # block 4's old copy is still cached: ours stays private
    assert kv.refs == {1: 1, 2: 1, 3: 1, 4: 0} and a.held == [1, 2, 3]
    kv.check([a])
    kv.release(a, final=True)
    old, run, shared = kv.lru
    assert (old, shared) == (4, 1) and isinstance(run, FreedRun) and run.blocks == 2
    assert kv.refs == {1: 0, 4: 0}
    kv.check([])
