import gc

from pytest_llmperf.loadgen.issue import gc_pauses


def test_full_collections_are_deferred_inside_and_restored_after() -> None:
    before = gc.get_threshold()
    with gc_pauses.full_collections_deferred():
        young, middle, old = gc.get_threshold()
        assert (young, middle) == before[:2] and old > 10**6
        assert gc.get_freeze_count() > 0
    assert gc.get_threshold() == before
    assert gc.get_freeze_count() == 0


def test_the_generator_collects_itself_on_schedule(monkeypatch) -> None:
    calls: list[int] = []
    monkeypatch.setattr(gc_pauses.gc, "collect", lambda *a: calls.append(1) or 0)
    every = gc_pauses.FULL_COLLECTION_EVERY
    for issued in range(1, 3 * every + 1):
        gc_pauses.collect_if_due(issued)
    assert len(calls) == 3


def test_cyclic_garbage_made_inside_is_reclaimed_on_exit() -> None:
    class Node:
        pass

    with gc_pauses.full_collections_deferred():
        for _ in range(1000):
            a, b = Node(), Node()
            a.other, b.other = b, a  # a cycle only a collection can free
        del a, b
    assert not any(isinstance(o, Node) for o in gc.get_objects())


def test_held_young_collections_come_back_when_the_block_ends() -> None:
    before = gc.get_threshold()
    with gc_pauses.young_collections_held():
        assert gc.get_threshold()[0] > 1_000_000  # none runs by itself
        assert gc.get_threshold()[1:] == before[1:]
    assert gc.get_threshold() == before


def test_the_pacer_takes_young_collections_when_it_has_time_or_they_are_long_overdue() -> None:
    collections = gc_pauses.YoungCollections(threshold=50)
    with gc_pauses.young_collections_held():
        gc.collect(0)
        garbage = [[i] for i in range(100)]  # 100 allocations: past 50, short of 500
        collections.collect(spare=False)
        assert collections.taken == 0  # no time to spare, not long overdue
        collections.collect(spare=True)
        assert collections.taken == 1 and gc.get_count()[0] < 50
        garbage += [[i] for i in range(600)]  # past ten times the threshold
        collections.collect(spare=False)
        assert collections.taken == 2
    del garbage
