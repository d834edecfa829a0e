"""Profiles: shipped names, overrides, and clear errors."""

from __future__ import annotations

import pytest

from pytest_llmperf.sim import ProfileError, load_profile, profile_names


def test_shipped_profiles() -> None:
    assert {"fixed", "llama-3.1-8b-h100", "tiny"} <= set(profile_names())
    fixed = load_profile("fixed")
    assert fixed.kind == "fixed" and fixed.ttft_ms == 20 and fixed.itl_ms == 5
    h100 = load_profile("llama-3.1-8b-h100")
    assert h100.block_size == 16 and 28_000 <= h100.num_blocks <= 30_000
    assert h100.beta0_us == 6500 and h100.beta1_us == 20
    assert load_profile("tiny").num_blocks < 1000


def test_overrides_are_parsed_from_strings() -> None:
    p = load_profile(
        "fixed", ttft_ms="50", itl_ms=10, enable_prefix_caching="false", error_codes="429,503"
    )
    assert (p.ttft_ms, p.itl_ms, p.enable_prefix_caching, p.error_codes) == (
        50.0,
        10.0,
        False,
        (429, 503),
    )
    assert p.replace(max_num_seqs="8").max_num_seqs == 8


@pytest.mark.parametrize(
    ("name", "overrides", "words"),
    [
        ("nope", {}, ["nope", "known profiles"]),
        ("fixed", {"itl_msec": "3"}, ["fixed", "itl_msec", "3"]),
        ("tiny", {"ttft_ms": "fast"}, ["tiny", "ttft_ms", "fast"]),
        ("tiny", {"error_rate": "1.5"}, ["tiny", "error_rate", "1.5"]),
        ("tiny", {"scheduling_policy": "lifo"}, ["tiny", "scheduling_policy", "lifo"]),
        ("tiny", {"error_codes": "418"}, ["tiny", "error_codes", "418"]),
        ("tiny", {"max_num_seqs": "2.5"}, ["tiny", "max_num_seqs", "2.5"]),
    ],
)
def test_errors_name_profile_key_and_value(name: str, overrides: dict, words: list[str]) -> None:
    with pytest.raises(ProfileError) as info:
        load_profile(name, **overrides)
    for word in words:
        assert word in str(info.value)


def test_each_profile_serves_a_model_named_for_what_it_is() -> None:
    """``sim:fixed`` once served ``sim-llama-3.1-8b``, a model it does not imitate, and the
    session line read "sim:fixed sim-llama-3.1-8b"."""
    models = {name: load_profile(name).model for name in profile_names()}
    assert models["fixed"] == "sim-fixed"
    assert models["llama-3.1-8b-h100"] == "sim-llama-3.1-8b"
    assert models["tiny"] == "sim-tiny"
    assert models["strict-reasoning"] == "sim-reasoning"
    assert models["replicas-2-session"] == models["replicas-2-round-robin"] == "sim-llama-3.1-8b-x2"
    assert {models[f"replicas-4-{k}"] for k in ("least-loaded", "prefix-aware", "slow-one")} == {
        "sim-llama-3.1-8b-x4"
    }
    assert models["disaggregated-1p1d"] == models["disaggregated-2p2d"] == "sim-llama-3.1-8b-pd"
    assert models["gpu-2"] == "sim-llama-3.1-8b-tp2"
    assert [name for name, model in models.items() if model == "sim-llama-3.1-8b"] == [
        "llama-3.1-8b-h100"
    ]
    assert load_profile("fixed", model="my-model").model == "my-model"  # still overridable


def test_a_profile_without_a_model_serves_one_named_after_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from pytest_llmperf.sim import profiles

    shipped = profiles._raw_profiles()
    mine = {**shipped, "profiles": {**shipped["profiles"], "bare": {"kind": "fixed"}}}
    monkeypatch.setattr(profiles, "_raw_profiles", lambda: mine)
    assert load_profile("bare").model == "sim-bare"
    assert load_profile("tiny").model == "sim-tiny"
