"""Strict request validation on real sockets: statuses and bodies as strict servers send them."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from pytest_llmperf.sim import SimServer
from pytest_llmperf.sim.validation import CHAT_FIELDS, COMPLETIONS_FIELDS

pytestmark = pytest.mark.asyncio

MODEL = "sim-fixed"
FAST = {"ttft_ms": 1, "itl_ms": 0.2}
CHAT = {"model": MODEL, "messages": [{"role": "user", "content": "Hello there."}], "max_tokens": 3}
COMPLETION = {"model": MODEL, "prompt": "Hello there.", "max_tokens": 3}


async def _post(sim: SimServer, path: str, body: dict[str, Any]) -> httpx.Response:
    async with httpx.AsyncClient(base_url=sim.url) as c:
        return await c.post(path, json=body)


@pytest.mark.parametrize(
    ("path", "body"),
    [("/v1/chat/completions", CHAT), ("/v1/completions", COMPLETION)],
)
async def test_strict_fields_refuses_an_unknown_field_as_openai(
    path: str, body: dict[str, Any]
) -> None:
    async with SimServer("fixed", strict_fields=True, **FAST) as sim:
        resp = await _post(sim, path, {**body, "ignore_eos": True})
        assert resp.status_code == 400
        assert resp.json() == {
            "error": {
                "message": "Unrecognized request argument supplied: ignore_eos",
                "type": "invalid_request_error",
                "param": "ignore_eos",
                "code": None,
            }
        }
        ok = await _post(sim, path, body)
        assert ok.status_code == 200


async def test_strict_fields_lists_every_unknown_field() -> None:
    async with SimServer("fixed", strict_fields=True, **FAST) as sim:
        body = {**CHAT, "ignore_eos": True, "min_tokens": 2, "top_k": 5}
        err = (await _post(sim, "/v1/chat/completions", body)).json()["error"]
    assert err["message"] == (
        "Unrecognized request arguments supplied: ignore_eos, min_tokens, top_k"
    )
    assert err["param"] == "ignore_eos"


async def test_strict_fields_checks_inside_stream_options() -> None:
    async with SimServer("fixed", strict_fields=True, **FAST) as sim:
        body = {**CHAT, "stream": True, "stream_options": {"include_usage": True, "x": 1}}
        resp = await _post(sim, "/v1/chat/completions", body)
        assert resp.status_code == 400
        assert resp.json()["error"]["message"] == (
            "Unrecognized request argument supplied: stream_options.x"
        )
        body["stream_options"] = {"include_usage": True, "include_obfuscation": False}
        assert (await _post(sim, "/v1/chat/completions", body)).status_code == 200


async def test_strict_fields_accepts_the_openai_fields() -> None:
    """A request carrying every standard field passes (null where the value does not
    matter: the simulator ignores those fields)."""
    async with SimServer("fixed", strict_fields=True, **FAST) as sim:
        for path, base, fields in (
            ("/v1/chat/completions", CHAT, CHAT_FIELDS),
            ("/v1/completions", COMPLETION, COMPLETIONS_FIELDS),
        ):
            body: dict[str, Any] = dict.fromkeys(fields)
            body.update(base, n=1, stream=False)
            resp = await _post(sim, path, body)
            assert resp.status_code == 200, (path, resp.text)
    assert {"stream_options", "max_completion_tokens", "reasoning_effort"} <= CHAT_FIELDS
    assert "ignore_eos" not in CHAT_FIELDS | COMPLETIONS_FIELDS
    assert "priority" not in CHAT_FIELDS | COMPLETIONS_FIELDS


@pytest.mark.parametrize(
    ("path", "body"),
    [("/v1/chat/completions", CHAT), ("/v1/completions", COMPLETION)],
)
async def test_reject_fields_answers_as_transformers_serve(path: str, body: dict[str, Any]) -> None:
    async with SimServer("fixed", reject_fields="ignore_eos,min_tokens", **FAST) as sim:
        resp = await _post(sim, path, {**body, "ignore_eos": False})
        assert resp.status_code == 422
        assert resp.json() == {"detail": "Unexpected fields in the request: {'ignore_eos'}"}
        both = await _post(sim, path, {**body, "min_tokens": 1, "ignore_eos": True})
        assert both.json() == {
            "detail": "Unexpected fields in the request: {'ignore_eos', 'min_tokens'}"
        }
        # anything else is still accepted, as vLLM does
        assert (await _post(sim, path, {**body, "top_k": 3})).status_code == 200


async def test_reject_fields_pydantic_style() -> None:
    async with SimServer(
        "fixed", reject_fields=["ignore_eos"], reject_style="pydantic", **FAST
    ) as sim:
        resp = await _post(sim, "/v1/chat/completions", {**CHAT, "ignore_eos": True})
    assert resp.status_code == 422
    assert resp.json() == {
        "detail": [
            {
                "type": "extra_forbidden",
                "loc": ["body", "ignore_eos"],
                "msg": "Extra inputs are not permitted",
                "input": True,
            }
        ]
    }


async def test_reject_fields_names_a_nested_field() -> None:
    async with SimServer(
        "fixed", reject_fields="stream_options.include_usage", reject_style="pydantic", **FAST
    ) as sim:
        body = {**CHAT, "stream": True, "stream_options": {"include_usage": True}}
        resp = await _post(sim, "/v1/chat/completions", body)
        assert resp.status_code == 422
        assert resp.json()["detail"][0]["loc"] == ["body", "stream_options", "include_usage"]
        body["stream_options"] = {}
        assert (await _post(sim, "/v1/chat/completions", body)).status_code == 200
    async with SimServer("fixed", reject_fields="stream_options", **FAST) as sim:
        body = {**CHAT, "stream": True, "stream_options": {"include_usage": True}}
        resp = await _post(sim, "/v1/chat/completions", body)
        assert resp.status_code == 422
        assert resp.json() == {"detail": "Unexpected fields in the request: {'stream_options'}"}


async def test_reject_max_tokens_on_chat_only() -> None:
    async with SimServer("fixed", reject_max_tokens=True, **FAST) as sim:
        resp = await _post(sim, "/v1/chat/completions", CHAT)
        assert resp.status_code == 400
        assert resp.json() == {
            "error": {
                "message": "Unsupported parameter: 'max_tokens' is not supported with this "
                "model. Use 'max_completion_tokens' instead.",
                "type": "invalid_request_error",
                "param": "max_tokens",
                "code": "unsupported_parameter",
            }
        }
        body = {k: v for k, v in CHAT.items() if k != "max_tokens"}
        full = (
            await _post(sim, "/v1/chat/completions", {**body, "max_completion_tokens": 4})
        ).json()
        assert full["usage"]["completion_tokens"] == 4
        assert full["choices"][0]["finish_reason"] == "length"
        # the legacy completions API keeps max_tokens
        assert (await _post(sim, "/v1/completions", COMPLETION)).status_code == 200


async def test_max_completion_tokens_is_always_honoured() -> None:
    async with SimServer("fixed", **FAST) as sim:
        body = {**CHAT, "max_tokens": 9, "max_completion_tokens": 2}
        full = (await _post(sim, "/v1/chat/completions", body)).json()
    assert full["usage"]["completion_tokens"] == 2  # it wins over max_tokens, as on vLLM


async def test_strictness_is_off_by_default() -> None:
    async with SimServer("fixed", **FAST) as sim:
        body = {**CHAT, "ignore_eos": True, "min_tokens": 1, "top_k": 5, "priority": 0}
        assert (await _post(sim, "/v1/chat/completions", body)).status_code == 200
        assert sim.sim is not None and sim.sim.policy is None


async def test_refused_requests_do_not_shift_the_seeded_plan() -> None:
    """A preflight probe that is refused takes no request index: the requests after it get
    the same seeded faults and deltas as without the probe."""

    async def contents(probe: bool) -> list[str]:
        async with (
            SimServer("strict-reasoning", seed=3, **FAST) as sim,
            httpx.AsyncClient(base_url=sim.url) as c,
        ):
            if probe:
                resp = await c.post("/v1/chat/completions", json={**CHAT, "ignore_eos": True})
                assert resp.status_code == 400
            body = {**CHAT, "model": "sim-reasoning", "max_tokens": 30}
            full = (await c.post("/v1/chat/completions", json=body)).json()
            return [full["choices"][0]["message"]["content"]]

    assert await contents(True) == await contents(False)


async def test_errors_are_counted_in_metrics() -> None:
    async with SimServer("fixed", strict_fields=True, **FAST) as sim:
        await _post(sim, "/v1/chat/completions", {**CHAT, "ignore_eos": True})
        assert sim.sim is not None and sim.sim.counters.errors == 1
