"""The new profile keys: defaults off, parsing from strings, clear errors, the named profile."""

from __future__ import annotations

import subprocess
import sys

import httpx
import pytest

from pytest_llmperf.sim import ProfileError, load_profile, profile_names, start_sim_process


def test_all_off_by_default_in_every_shipped_profile() -> None:
    for name in profile_names():
        if name == "strict-reasoning":
            continue
        p = load_profile(name)
        assert p.reasoning_tokens == 0 and p.empty_delta_rate == 0
        assert not p.separate_finish_chunk and not p.strict_fields
        assert p.reject_fields == () and not p.reject_max_tokens
        assert p.reasoning_field == "reasoning_content" and p.reject_style == "detail"


def test_strict_reasoning_profile() -> None:
    p = load_profile("strict-reasoning")
    assert p.kind == "fixed" and p.model == "sim-reasoning"
    assert p.strict_fields and p.reasoning_tokens == 16 and p.separate_finish_chunk
    assert 0.25 <= p.empty_delta_rate <= 0.35


def test_values_parse_from_set_strings() -> None:
    p = load_profile(
        "tiny",
        reasoning_tokens="8",
        reasoning_field="reasoning",
        empty_delta_rate="0.25",
        separate_finish_chunk="yes",
        strict_fields="true",
        reject_fields="ignore_eos, stream_options.include_usage",
        reject_style="pydantic",
        reject_max_tokens="on",
    )
    assert p.reasoning_tokens == 8 and p.reasoning_field == "reasoning"
    assert p.empty_delta_rate == 0.25 and p.separate_finish_chunk and p.strict_fields
    assert p.reject_fields == ("ignore_eos", "stream_options.include_usage")
    assert p.reject_style == "pydantic" and p.reject_max_tokens
    assert load_profile("fixed", reject_fields="").reject_fields == ()
    assert load_profile("fixed", reject_fields=["a", "b"]).reject_fields == ("a", "b")
    assert p.replace(reasoning_tokens="0").reasoning_tokens == 0


@pytest.mark.parametrize(
    ("overrides", "words"),
    [
        ({"reasoning_tokens": "-1"}, ["reasoning_tokens", "-1", "negative"]),
        ({"reasoning_tokens": "1.5"}, ["reasoning_tokens", "1.5", "integer"]),
        ({"reasoning_field": "thinking"}, ["reasoning_field", "thinking", "reasoning_content"]),
        ({"empty_delta_rate": "1.5"}, ["empty_delta_rate", "1.5", "probability"]),
        ({"separate_finish_chunk": "maybe"}, ["separate_finish_chunk", "maybe"]),
        ({"strict_fields": "2"}, ["strict_fields", "2"]),
        ({"reject_fields": "ignore eos"}, ["reject_fields", "ignore eos", "field name"]),
        ({"reject_fields": 5}, ["reject_fields", "5"]),
        ({"reject_style": "xml"}, ["reject_style", "xml", "detail"]),
        ({"reject_max_token": "true"}, ["reject_max_token", "unknown key"]),
    ],
)
def test_errors_name_profile_key_and_value(overrides: dict, words: list[str]) -> None:
    with pytest.raises(ProfileError) as info:
        load_profile("strict-reasoning", **overrides)
    assert "strict-reasoning" in str(info.value)
    for word in words:
        assert word in str(info.value)


def test_command_line_rejects_a_bad_value_fast() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "pytest_llmperf.sim", "--set", "reasoning_field=think"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode != 0
    assert "reasoning_field" in proc.stderr and "think" in proc.stderr


def test_named_profile_in_a_child_process_with_set_overrides() -> None:
    """``sim:strict-reasoning`` as the plugin starts it, with ``--set`` overrides."""
    sim = start_sim_process(
        "strict-reasoning",
        overrides={"reasoning_tokens": "2", "reject_fields": "min_tokens", "itl_ms": "0.5"},
        seed=1,
    )
    try:
        with httpx.Client(base_url=sim.url) as c:
            assert c.get("/v1/models").json()["data"][0]["id"] == "sim-reasoning"
            base = {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 4}
            assert c.post("/v1/chat/completions", json={**base, "ignore_eos": 1}).status_code == 400
            full = c.post("/v1/chat/completions", json=base).json()
            assert full["usage"]["completion_tokens_details"] == {"reasoning_tokens": 2}
            assert c.post("/tokenize", json={"prompt": "hi"}).json()["count"] == 1
    finally:
        sim.stop()
