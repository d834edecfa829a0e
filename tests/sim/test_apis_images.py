"""Images in chat, Responses and Messages prompts: size read from the PNG/JPEG header,
charged ceil(W/28)*ceil(H/28) prompt tokens each, larger images -> longer TTFT."""

from __future__ import annotations

import asyncio
import base64
import io
import json
from typing import Any

import httpx
import pytest

from pytest_llmperf.sim import SimServer
from pytest_llmperf.sim.images import ImageError, decode_base64_image, image_size, image_tokens
from pytest_llmperf.tokens import count_tokens

Image = pytest.importorskip("PIL.Image")

TEXT = "What is in these pictures?"


def make_image(width: int, height: int, fmt: str = "PNG", **save: Any) -> str:
    """A real image from Pillow, as base64."""
    img = Image.new("RGB", (width, height), (width % 256, height % 256, 77))
    buf = io.BytesIO()
    img.save(buf, format=fmt, **save)
    return base64.b64encode(buf.getvalue()).decode()


def data_url(b64: str, media: str = "image/png") -> str:
    return f"data:{media};base64,{b64}"


@pytest.mark.parametrize(
    ("width", "height", "expected"),
    [(28, 28, 1), (29, 28, 2), (512, 512, 361), (1024, 768, 37 * 28), (1, 1, 1)],
)
def test_image_token_formula(width: int, height: int, expected: int) -> None:
    assert image_tokens(width, height) == expected
    assert image_tokens(width, height, 14) == -(-width // 14) * -(-height // 14)


@pytest.mark.parametrize(
    ("fmt", "save"),
    [
        ("PNG", {}),
        ("JPEG", {}),
        ("JPEG", {"progressive": True}),
        ("JPEG", {"exif": b"Exif\0\0" + b"x" * 300}),
    ],
)
@pytest.mark.parametrize(("width", "height"), [(640, 480), (3, 1001)])
def test_header_size_matches_pillow(
    fmt: str, save: dict[str, Any], width: int, height: int
) -> None:
    raw = base64.b64decode(make_image(width, height, fmt, **save))
    assert image_size(raw) == (fmt.lower(), width, height)


def test_bad_images_say_why() -> None:
    png = make_image(10, 10)
    cases = {
        "not valid base64": "!!!notbase64",
        "neither PNG nor JPEG": make_image(10, 10, "GIF"),
        "truncated": base64.b64encode(base64.b64decode(png)[:20]).decode(),
    }
    for why, data in cases.items():
        with pytest.raises(ImageError, match=why):
            decode_base64_image(data)
    with pytest.raises(ImageError, match="does not match its data, which is PNG"):
        decode_base64_image(png, "image/jpeg")
    assert decode_base64_image(png, "image/png").width == 10


pytestmark_async = pytest.mark.asyncio


def chat_body(urls: list[str], max_tokens: int = 2) -> dict[str, Any]:
    parts: list[dict[str, Any]] = [{"type": "text", "text": TEXT}]
    parts += [{"type": "image_url", "image_url": {"url": u}} for u in urls]
    return {
        "messages": [{"role": "user", "content": parts}],
        "max_tokens": max_tokens,
        "stream": True,
        "stream_options": {"include_usage": True},
    }


async def chat_usage(c: httpx.AsyncClient, body: dict[str, Any]) -> dict[str, Any]:
    async with c.stream("POST", "/v1/chat/completions", json=body) as resp:
        assert resp.status_code == 200, await resp.aread()
        lines = [line async for line in resp.aiter_lines() if line.startswith("data: {")]
    usage: dict[str, Any] = json.loads(lines[-1][6:])["usage"]
    return usage


@pytestmark_async
async def test_chat_with_two_512_images_charges_722_tokens() -> None:
    urls = [data_url(make_image(512, 512)), data_url(make_image(512, 512, "JPEG"), "image/jpeg")]
    async with (
        SimServer("fixed", ttft_ms=1, itl_ms=0.5) as sim,
        httpx.AsyncClient(base_url=sim.url) as c,
    ):
        usage = await chat_usage(c, chat_body(urls))
        text_only = await chat_usage(c, chat_body([]))
    assert text_only["prompt_tokens"] == count_tokens(TEXT)
    assert usage["prompt_tokens"] == count_tokens(TEXT) + 2 * 361


@pytestmark_async
async def test_responses_and_messages_charge_images_too() -> None:
    b64 = make_image(300, 200, "JPEG")
    n_image = image_tokens(300, 200)  # 11 * 8
    responses = {
        "input": [
            {
                "role": "user",
                "content": [
                    {"type": "input_text", "text": TEXT},
                    {"type": "input_image", "image_url": data_url(b64, "image/jpeg")},
                ],
            }
        ],
        "max_output_tokens": 2,
    }
    messages = {
        "messages": [
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": TEXT},
                    {
                        "type": "image",
                        "source": {"type": "base64", "media_type": "image/jpeg", "data": b64},
                    },
                ],
            }
        ],
        "max_tokens": 2,
    }
    async with SimServer("fixed", ttft_ms=1) as sim, httpx.AsyncClient(base_url=sim.url) as c:
        r = await c.post("/v1/responses", json=responses)
        m = await c.post("/v1/messages", json=messages)
    assert r.json()["usage"]["input_tokens"] == count_tokens(TEXT) + n_image == 6 + 88
    assert m.json()["usage"]["input_tokens"] == count_tokens(TEXT) + n_image


@pytestmark_async
async def test_bad_images_are_400_in_each_apis_shape() -> None:
    gif = make_image(8, 8, "GIF")
    png = make_image(8, 8)
    async with SimServer("fixed", ttft_ms=1) as sim, httpx.AsyncClient(base_url=sim.url) as c:
        chat = await c.post("/v1/chat/completions", json=chat_body([data_url(gif, "image/gif")]))
        remote = await c.post(
            "/v1/chat/completions", json=chat_body(["https://example.com/cat.png"])
        )
        resp = await c.post(
            "/v1/responses",
            json={
                "input": [
                    {
                        "role": "user",
                        "content": [
                            {"type": "input_image", "image_url": "data:image/png;base64,@@"}
                        ],
                    }
                ]
            },
        )
        msg = await c.post(
            "/v1/messages",
            json={
                "max_tokens": 2,
                "messages": [
                    {
                        "role": "user",
                        "content": [
                            {
                                "type": "image",
                                "source": {
                                    "type": "base64",
                                    "media_type": "image/jpeg",
                                    "data": png,
                                },
                            }
                        ],
                    }
                ],
            },
        )
    assert chat.status_code == 400
    assert "neither PNG nor JPEG" in chat.json()["error"]["message"]
    assert remote.status_code == 400
    assert "fetches no images" in remote.json()["error"]["message"]
    assert resp.status_code == 400
    assert resp.json()["error"]["param"] == "input"
    assert "not valid base64" in resp.json()["error"]["message"]
    assert msg.status_code == 400
    assert msg.json()["type"] == "error"
    assert msg.json()["error"]["type"] == "invalid_request_error"
    assert "'image/jpeg' does not match its data, which is PNG" in msg.json()["error"]["message"]


async def _ttft(c: httpx.AsyncClient, body: dict[str, Any]) -> float:
    loop = asyncio.get_running_loop()
    t0 = loop.time()
    async with c.stream("POST", "/v1/chat/completions", json=body) as resp:
        async for line in resp.aiter_lines():
            if (
                line.startswith("data: {")
                and '"content": "' in line
                and '"content": ""' not in line
            ):
                return loop.time() - t0
    raise AssertionError("no token")


@pytestmark_async
async def test_larger_images_raise_ttft_through_prefill() -> None:
    """Engine profile: 1344 x 1344 px = 48 * 48 = 2,304 image tokens of prefill at
    β1 = 20 µs (plus β0 per 8,192-token step) ≈ 53 ms more than a 56 x 56 image's 4."""
    small = chat_body([data_url(make_image(56, 56))], max_tokens=1)
    large = chat_body([data_url(make_image(1344, 1344))], max_tokens=1)
    async with SimServer("llama-3.1-8b-h100") as sim, httpx.AsyncClient(base_url=sim.url) as c:
        await _ttft(c, chat_body([], max_tokens=1))  # warm up the connection
        t_small = await _ttft(c, small)
        t_large = await _ttft(c, large)
        usage = await chat_usage(c, large)
    assert usage["prompt_tokens"] == count_tokens(TEXT) + 2304
    # a lower bound (noise only adds): one step of β0 + β1 * its 2,304 image tokens at least
    assert t_large >= (6500e-6 + 2304 * 20e-6) * 0.95, (t_small, t_large)


@pytestmark_async
async def test_fixed_profile_adds_ttft_per_image_token() -> None:
    small = chat_body([data_url(make_image(28, 28))], max_tokens=1)
    large = chat_body([data_url(make_image(1120, 1120))], max_tokens=1)  # 40 * 40 = 1600
    async with (
        SimServer("fixed", ttft_ms=10, ttft_per_image_token_ms=0.05) as sim,
        httpx.AsyncClient(base_url=sim.url) as c,
    ):
        await _ttft(c, chat_body([], max_tokens=1))
        t_small = await _ttft(c, small)
        t_large = await _ttft(c, large)
    # lower bounds: the server's waits (noise only adds to them)
    assert t_small >= 0.010 + 1 * 0.05e-3
    assert t_large >= 0.010 + 1600 * 0.05e-3


@pytestmark_async
async def test_the_same_image_hits_the_prefix_cache() -> None:
    url = data_url(make_image(448, 448))  # 256 tokens: 16 blocks
    other = data_url(make_image(448, 449))
    async with SimServer("tiny") as sim, httpx.AsyncClient(base_url=sim.url) as c:
        first = await chat_usage(c, chat_body([url]))
        again = await chat_usage(c, chat_body([url]))
        changed = await chat_usage(c, chat_body([other]))
    assert first["prompt_tokens_details"]["cached_tokens"] == 0
    assert again["prompt_tokens_details"]["cached_tokens"] >= 256
    assert changed["prompt_tokens_details"]["cached_tokens"] < 16
