"""Sample order: seeded, with and without replacement, recorded in the workload description."""

from __future__ import annotations

import itertools

import pytest

from pytest_llmperf.errors import LlmPerfUsageError
from pytest_llmperf.loadgen.plan.sample_order import SampleOrder
from pytest_llmperf.specs.load import LoadSpec


def take(order: SampleOrder, n: int) -> list[int]:
    return list(itertools.islice(order, n))


def test_without_replacement_covers_every_sample_before_repeating() -> None:
    order = SampleOrder("without-replacement", seed=7, size=10)
    first, second = take(order, 20)[:10], take(order, 20)[10:]
    assert sorted(first) == list(range(10))
    assert sorted(second) == list(range(10))
    assert first != list(range(10))  # shuffled
    assert first != second  # reshuffled for the second pass


def test_same_seed_same_order_other_seed_other_order() -> None:
    a = take(SampleOrder("with-replacement", 1, 50), 200)
    assert a == take(SampleOrder("with-replacement", 1, 50), 200)
    assert a != take(SampleOrder("with-replacement", 2, 50), 200)


def test_with_replacement_repeats_samples() -> None:
    drawn = take(SampleOrder("with-replacement", 3, 1000), 200)
    assert len(set(drawn)) < 200
    assert all(0 <= i < 1000 for i in drawn)


def test_unbounded_workload_defaults_to_sequential() -> None:
    order = SampleOrder.for_workload(None, seed=0, size=None)
    assert order.mode == "sequential"
    assert take(order, 5) == [0, 1, 2, 3, 4]
    assert SampleOrder.for_workload(None, seed=0, size=5).mode == "without-replacement"


def test_with_replacement_on_unbounded_workload_draws_from_the_run_pool() -> None:
    order = SampleOrder.for_workload("with-replacement", seed=0, size=None, pool=20)
    assert set(take(order, 500)) <= set(range(20))
    assert order.describe() == {"mode": "with-replacement", "seed": 0, "pool": 20}


def test_bad_sample_order_is_a_usage_error_naming_it() -> None:
    with pytest.raises(LlmPerfUsageError, match="shuffled"):
        LoadSpec.parse("poisson", {"rate": 1, "sample_order": "shuffled"})
    with pytest.raises(LlmPerfUsageError, match="random"):
        SampleOrder("random", 0, None)


def test_sample_order_is_part_of_the_load_description() -> None:
    spec = LoadSpec.parse("concurrency", {"concurrency": 2, "sample_order": "with-replacement"})
    assert spec.describe()["sample_order"] == "with-replacement"
