"""Send one streaming request and fill its :class:`RequestRecord`.

Every failure mode of a real server ends here as ``record.error`` with a
reason category; nothing raises out of :func:`send_request` except
cancellation. One ``monotonic_ns`` reading is taken per read from the socket
and stamped on every event that read completed: that is when the client
could first have seen those bytes.
"""

from __future__ import annotations

import asyncio
import json
import time

import httpx

from pytest_llmperf.client.endpoint import SENDING_RECORD, Endpoint
from pytest_llmperf.client.failures import classify_transport_error
from pytest_llmperf.client.openai import build_payload, error_message, parse_chunk
from pytest_llmperf.client.records import ErrorKind, RequestRecord
from pytest_llmperf.client.sse import SSEParser
from pytest_llmperf.redaction import scrub
from pytest_llmperf.workloads.base import Sample

__all__ = ["send_request"]

_ERROR_BODY_LIMIT = 64 * 1024


async def send_request(
    http: httpx.AsyncClient, endpoint: Endpoint, sample: Sample, record: RequestRecord
) -> RequestRecord:
    """Stream ``sample`` to ``endpoint``; the record says how it went."""
    if endpoint.model is None:
        raise RuntimeError("endpoint model is not resolved; call resolve_model() first")
    payload = build_payload(endpoint.api, endpoint.model, sample)
    body = json.dumps(payload).encode()
    timeouts = endpoint.timeouts
    loop = asyncio.get_running_loop()
    record.t_send = time.monotonic_ns()  # replaced by the socket write's instant (endpoint.py)
    SENDING_RECORD.set(record)
    start = loop.time()
    try:
        async with asyncio.timeout_at(start + timeouts.first_token) as deadline:
            async with http.stream(
                "POST",
                endpoint.request_url,
                content=body,
                headers={"Content-Type": "application/json", "Accept": "text/event-stream"},
            ) as response:
                record.status = response.status_code
                if response.status_code >= 300:  # redirects are not followed: a wrong URL
                    await _read_error(response, record)
                    return record
                content_type = response.headers.get("content-type", "")
                if content_type.startswith("application/json"):
                    await _read_whole(response, record)
                else:
                    await _read_stream(response, record, deadline, start + timeouts.total)
    except TimeoutError:
        kind = ErrorKind.FIRST_TOKEN_TIMEOUT if not record.t_first else ErrorKind.TOTAL_TIMEOUT
        record.fail(kind, f"no {'first token' if not record.t_first else 'end of stream'} in time")
    except Exception as exc:  # any transport failure (even unmapped aiohttp ones) is a record
        kind, detail = classify_transport_error(exc)
        record.fail(kind, detail)
    finally:
        if not record.t_end:
            record.t_end = time.monotonic_ns()
        if record.error is not None:  # failure path only: servers may echo the key back
            record.error_detail = scrub(record.error_detail, *endpoint.secrets)
    return record


async def _read_error(response: httpx.Response, record: RequestRecord) -> None:
    raw = b""
    async for piece in response.aiter_bytes():
        raw += piece
        if len(raw) > _ERROR_BODY_LIMIT:
            break
    try:
        detail = error_message(json.loads(raw))
    except ValueError:
        detail = raw[:200].decode("utf-8", "replace")
    status = response.status_code
    kind = ErrorKind.RATE_LIMITED if status == 429 else ErrorKind.HTTP
    extra = ""
    if retry_after := response.headers.get("retry-after"):
        extra = f" (Retry-After: {retry_after[:40]})"
    elif status < 400 and (location := response.headers.get("location")):
        extra = f" (redirect to {location[:200]}; redirects are not followed)"
    record.fail(kind, f"HTTP {status}: {detail}{extra}", now=time.monotonic_ns())


async def _read_whole(response: httpx.Response, record: RequestRecord) -> None:
    """A server that ignored ``stream: true``: one timestamp for the whole answer."""
    raw = await response.aread()
    now = time.monotonic_ns()
    try:
        obj = json.loads(raw)
        info = parse_chunk(json.dumps(obj))
    except (ValueError, TypeError, KeyError, AttributeError):  # not JSON, or the wrong shape
        record.fail(ErrorKind.PROTOCOL, f"response is not JSON: {raw[:80]!r}", now=now)
        return
    if info.error:
        record.fail(ErrorKind.STREAM_ERROR, info.error, now=now)
        return
    _apply_usage(record, info.usage)
    if not info.text:
        record.fail(ErrorKind.EMPTY, "response carried no generated text", now=now)
        return
    record.t_first = record.t_last = record.t_end = now
    record.content_chunks = 1
    record.finish_reason = info.finish_reason


async def _read_stream(
    response: httpx.Response,
    record: RequestRecord,
    deadline: asyncio.Timeout,
    total_deadline: float,
) -> None:
    parser = SSEParser()
    finished = False
    async for raw in response.aiter_bytes():
        now = time.monotonic_ns()
        for data in parser.feed(raw):
            finished = _on_event(data, now, record, deadline, total_deadline) or finished
            if record.error:
                return
    now = time.monotonic_ns()
    for data in parser.close():
        finished = _on_event(data, now, record, deadline, total_deadline) or finished
        if record.error:
            return
    record.t_end = now
    if not finished:
        record.fail(ErrorKind.TRUNCATED, "stream ended without finish_reason or [DONE]")
    elif not record.t_first:
        record.fail(ErrorKind.EMPTY, "stream carried no generated text")


def _on_event(
    data: str, now: int, record: RequestRecord, deadline: asyncio.Timeout, total_deadline: float
) -> bool:
    """Apply one event; returns True when it marks the end of the answer."""
    try:
        info = parse_chunk(data)
    except (ValueError, TypeError, KeyError, AttributeError) as exc:  # JSON of the wrong shape
        why = exc if isinstance(exc, ValueError) else repr(exc)
        record.fail(ErrorKind.PROTOCOL, f"malformed stream chunk: {why}", now=now)
        return False
    if info.error:
        record.fail(ErrorKind.STREAM_ERROR, info.error, now=now)
        return False
    if info.usage:
        _apply_usage(record, info.usage)
    if info.text:
        if record.t_first:
            record.gaps_ns.append(now - record.t_last)
        else:
            record.t_first = now
            deadline.reschedule(total_deadline)
        record.t_last = now
        record.content_chunks += 1
    if info.finish_reason:
        record.finish_reason = info.finish_reason
    return info.done or bool(info.finish_reason)


def _apply_usage(record: RequestRecord, usage: dict | None) -> None:
    if not usage:
        return
    if isinstance(usage.get("completion_tokens"), int):
        record.usage_completion_tokens = usage["completion_tokens"]
    if isinstance(usage.get("prompt_tokens"), int):
        record.usage_prompt_tokens = usage["prompt_tokens"]
    details = usage.get("prompt_tokens_details")
    if isinstance(details, dict) and isinstance(details.get("cached_tokens"), int):
        record.usage_cached_tokens = details["cached_tokens"]
