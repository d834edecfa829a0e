"""``adapters={"name": weight}``: a seeded draw of the served model per sample."""

from __future__ import annotations

import math
from collections import Counter
from typing import Any

import pytest

from pytest_llmperf.errors import LlmPerfUsageError
from pytest_llmperf.workloads.adapters import BASE_MODEL, AdapterMix, parse_adapters


def mix(value: dict[str, Any]) -> AdapterMix:
    out = parse_adapters("synthetic", value)
    assert out is not None
    return out


def test_not_given_is_none() -> None:
    assert parse_adapters("synthetic", None) is None


def test_weights_keep_their_order_and_leave_the_rest_to_the_base_model() -> None:
    m = mix({"sim-lora-2": 0.4, "sim-lora-1": 0.4})
    assert m.weights == (("sim-lora-2", 0.4), ("sim-lora-1", 0.4))
    assert math.isclose(m.base_share, 0.2)
    assert m.describe() == {"sim-lora-2": 0.4, "sim-lora-1": 0.4, "base": 0.2}
    assert list(m.describe()) == ["sim-lora-2", "sim-lora-1", "base"]


def test_the_draw_is_a_pure_function_of_seed_and_index() -> None:
    m = mix({"a": 0.4, "b": 0.4})
    first = [m.draw(3, i) for i in range(300)]
    assert first == [m.draw(3, i) for i in range(300)]
    assert [m.draw(3, i) for i in reversed(range(300))] == first[::-1]  # order does not matter
    assert first != [m.draw(4, i) for i in range(300)]  # another seed, another draw
    assert set(first) == {"a", "b", BASE_MODEL}


def test_the_split_follows_the_weights() -> None:
    m = mix({"a": 0.4, "b": 0.4})
    n = 20_000
    counts = Counter(m.draw(0, i) for i in range(n))
    # each share within 5 standard errors of its weight (a binomial count)
    for name, weight in (("a", 0.4), ("b", 0.4), (BASE_MODEL, 0.2)):
        sd = math.sqrt(n * weight * (1 - weight))
        assert abs(counts[name] - n * weight) < 5 * sd, (name, counts)


def test_points_fall_on_the_shares_in_order() -> None:
    m = mix({"a": 0.25, "b": 0.5})
    assert [m.at(u) for u in (0.0, 0.2499, 0.25, 0.7499, 0.75, 0.9999)] == [
        "a", "a", "b", "b", BASE_MODEL, BASE_MODEL,
    ]  # fmt: skip


def test_weights_summing_to_one_never_draw_the_base_model() -> None:
    m = mix({"a": 0.7, "b": 0.2, "c": 0.1})  # they sum to 0.9999999999999999 in floats
    assert m.base_share <= 1e-9
    assert m.at(math.nextafter(1.0, 0.0)) == "c"  # the float gap is not the base model's
    drawn = Counter(m.draw(1, i) for i in range(5000))
    assert BASE_MODEL not in drawn and set(drawn) == {"a", "b", "c"}
    last_zero = mix({"a": 0.7, "b": 0.2, "c": 0.1, "z": 0.0})
    assert last_zero.at(math.nextafter(1.0, 0.0)) == "c"  # nor a zero-weight adapter's


def test_a_zero_weight_is_never_drawn() -> None:
    m = mix({"a": 0.0, "b": 0.5})
    assert "a" not in {m.draw(2, i) for i in range(2000)}
    solo = mix({"a": 1.0, "z": 0})
    assert {solo.draw(2, i) for i in range(500)} == {"a"}


@pytest.mark.parametrize(
    ("value", "named"),
    [
        (["a", "b"], r"adapters must be a dict of served model names to weights.*\['a', 'b'\]"),
        ({}, r"adapters must be a dict"),
        ({"": 0.5}, r"a model name must be a non-empty string, got ''"),
        ({" ": 0.5}, r"a model name must be a non-empty string, got ' '"),
        ({3: 0.5}, r"a model name must be a non-empty string, got 3"),
        ({"a": -0.1}, r"the weight of 'a' must be a number >= 0, got -0.1"),
        ({"a": "0.5"}, r"the weight of 'a' must be a number >= 0, got '0.5'"),
        ({"a": True}, r"the weight of 'a' must be a number >= 0, got True"),
        ({"a": float("nan")}, r"the weight of 'a' must be a number >= 0, got nan"),
        ({"a": 0.6, "b": 0.5}, r"the weights sum to 1.1; .* at most 1"),
        ({"base": 0.5}, r"'base' stands for the base model's share"),
    ],
)
def test_bad_adapters_are_usage_errors_naming_workload_and_value(value: Any, named: str) -> None:
    with pytest.raises(LlmPerfUsageError, match=r"^workload 'synthetic': .*" + named):
        parse_adapters("synthetic", value)
