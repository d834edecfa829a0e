"""``startup.first_token_s``: spawn to the first token of a first request.

One streamed request of one output token, sent right after the server is ready,
through the project's own client (:func:`pytest_llmperf.client.request.send_request`,
the path every measured request takes); for the embeddings API, the first answer.
It carries the API's own fields only (no ``ignore_eos``, no ``stream_options``: nothing
is negotiated before it, and strict servers refuse both).
It runs on an event loop of its own in a thread of its own, so a caller inside a
running loop is no problem, and it is bounded by :data:`FIRST_TOKEN_TIMEOUT_S`.
"""

from __future__ import annotations

import asyncio
import threading
import time

__all__ = ["FIRST_TOKEN_TIMEOUT_S", "first_token_ns"]

FIRST_TOKEN_TIMEOUT_S = 120.0
_PROMPT = "Say hello."
_NOTE_MAX = 300


def first_token_ns(
    url: str,
    *,
    model: str | None,
    api: str,
    api_key: str | None,
    secrets: list[str],
    timeout_s: float = FIRST_TOKEN_TIMEOUT_S,
) -> tuple[int | None, str | None]:
    """``time.monotonic_ns()`` of the first token of one request to the server at ``url``
    (``http://host:port``), or None and why."""
    box: list[tuple[int | None, str | None]] = []

    def run() -> None:
        try:
            box.append(asyncio.run(_first_token(url, model, api, api_key, timeout_s)))
        except Exception as exc:
            box.append((None, f"first request failed: {type(exc).__name__}: {exc}"))

    thread = threading.Thread(target=run, name="llmperf-first-token", daemon=True)
    thread.start()
    thread.join(timeout_s + 5.0)
    if not box:
        return None, f"no first token within {timeout_s:g} s"
    at_ns, note = box[0]
    if not note:
        return at_ns, None
    from pytest_llmperf.redaction import scrub

    line = " ".join(scrub(note, *secrets).split())
    return at_ns, line if len(line) <= _NOTE_MAX else line[: _NOTE_MAX - 1] + "…"


async def _first_token(
    url: str, model: str | None, api: str, api_key: str | None, timeout_s: float
) -> tuple[int | None, str | None]:
    from pytest_llmperf.client import RequestFields
    from pytest_llmperf.client.endpoint import Endpoint, Timeouts, normalize_base_url
    from pytest_llmperf.client.models import resolve_model
    from pytest_llmperf.client.records import RequestRecord
    from pytest_llmperf.client.request import send_request
    from pytest_llmperf.client.stream_client import StreamClient
    from pytest_llmperf.workloads.base import Sample

    timeouts = Timeouts(
        connect=min(10.0, timeout_s), first_token=timeout_s, stall=timeout_s, total=timeout_s
    )
    endpoint = Endpoint(
        base_url=normalize_base_url(url),
        model=model,
        api=api,
        timeouts=timeouts,
        api_key=api_key,
        # the API's own fields only: nothing negotiated yet, and a strict server
        # (transformers serve) answers 422 to ignore_eos or stream_options
        fields=RequestFields(ignore_eos=False, include_usage=False),
    )
    endpoint = await resolve_model(endpoint)
    embeddings = not endpoint.format.streams_tokens
    sample = Sample(
        index=0,
        prompt=_PROMPT,
        input_tokens=3,
        max_tokens=1,
        inputs=(_PROMPT,) if embeddings else (),
    )
    record = RequestRecord(index=0, t_sched=time.monotonic_ns())
    async with StreamClient(endpoint, max_connections=1) as http:
        await send_request(http, endpoint, sample, record)
    if record.error is not None:
        return None, f"first request failed: {record.error}: {record.error_detail}"
    at_ns = record.t_last if embeddings else record.t_first
    if not at_ns:
        return None, "first request answered without a token"
    return at_ns, None
