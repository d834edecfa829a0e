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
