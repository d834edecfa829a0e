"""Images in prompts (chat, Responses, Messages) and what every API sends: paths, heads, URLs."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest
from api_server import ApiServer, Reply, event, serve

from pytest_llmperf.apis.fields import RequestFields
from pytest_llmperf.apis.registry import API_PATHS, build_payload
from pytest_llmperf.apis.registry import API_PATHS as OLD_PATHS
from pytest_llmperf.client import Endpoint, RequestRecord, normalize_base_url, send_request
from pytest_llmperf.client.stream_client import StreamClient
from pytest_llmperf.errors import LlmPerfUsageError
from pytest_llmperf.workloads.base import ImageInput, Sample

PNG = ImageInput(data="iVBORw0KGgo=", media_type="image/png", width=4, height=2, nbytes=8)
JPEG = ImageInput(data="/9j/4AAQ", media_type="image/jpeg", width=8, height=8, nbytes=6)
SAMPLE = Sample(
    index=0,
    prompt="What is in these pictures?",
    input_tokens=9,
    max_tokens=3,
    history=({"role": "system", "content": "Be brief."},),
    images=(PNG, JPEG),
)


def test_chat_images_follow_the_text_of_the_last_user_turn() -> None:
    body = build_payload("chat", "m", SAMPLE, RequestFields())
    assert body["messages"] == [
        {"role": "system", "content": "Be brief."},
        {
            "role": "user",
            "content": [
                {"type": "text", "text": SAMPLE.prompt},
                {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}},
                {"type": "image_url", "image_url": {"url": "data:image/jpeg;base64,/9j/4AAQ"}},
            ],
        },
    ]


def test_responses_images_are_input_images() -> None:
    body = build_payload("responses", "m", SAMPLE, RequestFields())
    assert body["input"][-1] == {
        "role": "user",
        "content": [
            {"type": "input_text", "text": SAMPLE.prompt},
            {"type": "input_image", "image_url": "data:image/png;base64,iVBORw0KGgo="},
            {"type": "input_image", "image_url": "data:image/jpeg;base64,/9j/4AAQ"},
        ],
    }


def test_messages_images_are_base64_image_blocks() -> None:
    body = build_payload("messages", "m", SAMPLE, RequestFields())
    assert body["system"] == "Be brief."
    assert body["messages"] == [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": SAMPLE.prompt},
                {
                    "type": "image",
                    "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="},
                },
                {
                    "type": "image",
                    "source": {"type": "base64", "media_type": "image/jpeg", "data": "/9j/4AAQ"},
                },
            ],
        }
    ]


def test_without_images_the_bodies_are_as_before() -> None:
    plain = Sample(index=0, prompt="Hi", input_tokens=1, max_tokens=2)
    assert build_payload("chat", "m", plain)["messages"] == [{"role": "user", "content": "Hi"}]
    assert OLD_PATHS is API_PATHS and set(API_PATHS) == {
        "chat",
        "completions",
        "responses",
        "messages",
        "embeddings",
    }


def _chat_stream() -> Reply:
    def chunk(delta: dict[str, Any], finish: str | None = None) -> bytes:
        return event({"choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})

    usage = {"choices": [], "usage": {"prompt_tokens": 9, "completion_tokens": 1}}
    return Reply(
        [
            (0, chunk({"content": "Cats"})),
            (0, chunk({}, "stop")),
            (0, event(usage)),
            (0, b"data: [DONE]\n\n"),
        ]
    )


@pytest.mark.asyncio
@pytest.mark.parametrize(("api", "images", "nbytes"), [("chat", 2, 14), ("completions", 0, 0)])
async def test_the_record_counts_the_images_it_sent(api: str, images: int, nbytes: int) -> None:
    with serve(ApiServer(lambda _p, _b: _chat_stream())) as srv:
        endpoint = Endpoint(srv.url + "/v1", model="m", api=api)  # type: ignore[arg-type]
        record = RequestRecord(index=0, t_sched=time.monotonic_ns())
        async with StreamClient(endpoint) as http:
            record = await send_request(http, endpoint, SAMPLE, record)
        sent = json.dumps(srv.bodies[0])
    assert record.ok, record.error_detail
    assert (record.images, record.image_bytes) == (images, nbytes)
    assert ("iVBORw0KGgo=" in sent) == bool(images)  # completions carry no images


@pytest.mark.parametrize(
    "api_path",
    ["/chat/completions", "/completions", "/responses", "/messages", "/embeddings", "/models"],
)
def test_a_pasted_request_url_becomes_the_base_url(api_path: str) -> None:
    assert normalize_base_url(f"http://h:8000/v1{api_path}/") == "http://h:8000/v1"


def test_an_unknown_api_names_every_api() -> None:
    with pytest.raises(
        LlmPerfUsageError, match="chat, completions, responses, messages, embeddings, got 'rerank'"
    ):
        Endpoint("http://h:8000/v1", api="rerank")  # type: ignore[arg-type]


def test_each_api_has_its_own_head() -> None:
    key = "sk-head-secret-99"
    http = StreamClient(Endpoint("http://127.0.0.1:9/v1", model="m", api="messages", api_key=key))
    heads = {api: http.request_bytes(api, b"{}").decode("latin-1") for api in API_PATHS}
    assert heads["responses"].startswith("POST /v1/responses HTTP/1.1\r\n")
    assert heads["messages"].startswith("POST /v1/messages HTTP/1.1\r\n")
    assert "Accept: application/json\r\n" in heads["embeddings"]
    assert "Accept: text/event-stream\r\n" in heads["responses"]
    assert (
        f"x-api-key: {key}\r\n" in heads["messages"]
        and "anthropic-version: 2023-06-01" in heads["messages"]
    )
    assert "x-api-key" not in heads["chat"] and f"Authorization: Bearer {key}" in heads["chat"]
    with pytest.raises(ValueError, match=r"X-Api-Key.*sent by the client"):
        http.request_bytes("messages", b"{}", {"X-Api-Key": "other"})
    assert key not in repr(http.__dict__.get("endpoint", "")) and key not in repr(
        Endpoint("http://h/v1", api_key=key)
    )
