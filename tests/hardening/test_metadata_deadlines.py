"""Every call outside a run is bounded: each call against each misbehaving server.

The calls are made as the plugin makes them (model discovery, the preflight's
field probe, ``--llm-tokenizer=server``'s ``/tokenize``, a ``/metrics`` read),
against a real server on 127.0.0.1 in a thread of its own that misbehaves on
that call's route only: a stream that never ends (whatever ``max_tokens``
says), a head and then nothing, a byte a second forever, a 500 once, a 503
always, a 429 with ``Retry-After``. Each call must either succeed (what a
retry or a short read can fix) or end in one usage error naming the endpoint,
the call and what the server did, within its limit plus 10 s — a bound no busy
machine's scheduling noise comes near; the point is that nothing hangs.
A whole session against a server whose every answer streams forever ends at
preflight, with exit status 1 (a broken server fails the gate), instead of hanging.
"""

from __future__ import annotations

import asyncio
import re
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from odd_servers import (
    Behaviour,
    OddServer,
    always,
    failing_first,
    metrics_ok,
    models_ok,
    routed,
    serve_in_thread,
    sse_ok,
    stalls_after_head,
    streams_forever,
    trickles,
    word_tokenize,
)

from pytest_llmperf.analysis.server_metrics import scrape_metrics
from pytest_llmperf.client.endpoint import Endpoint, Timeouts
from pytest_llmperf.client.metadata import CallFailure, MetadataCallError
from pytest_llmperf.client.models import resolve_model
from pytest_llmperf.client.preflight import preflight
from pytest_llmperf.errors import LlmPerfUsageError, StopCause
from pytest_llmperf.session_tokenizer import choose_tokenizer

LIMIT_S = 2.0
TIMEOUTS = Timeouts.from_seconds(LIMIT_S)  # every call: 2 s in all, retries included
BOUND_S = LIMIT_S + 10  # ends within --llm-timeout + 10 s: generous for a busy 2-core machine
# A call against a server that never finishes lasts its whole limit: 1 s there, not 2 (the
# head comes at once, so it is 5 times the worst stall of a busy machine, ~180 ms, and still
# under the 1.5 s of silence after which a late server "sent nothing"); the retries' tests
# keep 2 s, room for three attempts and their backoff
HANG_TIMEOUTS = Timeouts.from_seconds(1.0)
KEY = "sk-metadata-secret-Zq81"


def _endpoint(
    url: str, *, model: str | None = "odd-model", timeouts: Timeouts = TIMEOUTS
) -> Endpoint:
    return Endpoint(url + "/v1", model=model, timeouts=timeouts, api_key=KEY)


def _models(url: str, timeouts: Timeouts = TIMEOUTS) -> Any:
    return asyncio.run(resolve_model(_endpoint(url, model=None, timeouts=timeouts)))


def _probe(url: str, timeouts: Timeouts = TIMEOUTS) -> Any:
    return asyncio.run(preflight(_endpoint(url, timeouts=timeouts)))


def _tokenizer(url: str, timeouts: Timeouts = TIMEOUTS) -> Any:
    return choose_tokenizer("server", _endpoint(url, timeouts=timeouts)).tokenizer


def _metrics(url: str, timeouts: Timeouts = TIMEOUTS) -> Any:
    return asyncio.run(scrape_metrics(_endpoint(url, timeouts=timeouts)))


# the call, its name in messages, the route it misbehaves on, what that route answers when OK
CALLS: dict[str, tuple[Callable[..., Any], str, str, Behaviour]] = {
    "models": (_models, "GET /v1/models", "/v1/models", models_ok),
    "field_probe": (_probe, "field probe POST /v1/chat/completions", "/completions", sse_ok),
    "tokenize": (_tokenizer, "POST /tokenize", "/tokenize", word_tokenize),
    "metrics": (_metrics, "GET /metrics", "/metrics", metrics_ok),
}
OTHERS: dict[str, Behaviour] = {
    "/v1/models": models_ok,
    "/tokenize": word_tokenize,
    "/metrics": metrics_ok,
}


def _server(route: str, behaviour: Behaviour) -> OddServer:
    return OddServer(routed({**OTHERS, route: behaviour}), models=False)


def _timed(call: Callable[[str], Any], url: str) -> tuple[Any, BaseException | None, float]:
    started = time.monotonic()
    try:
        result, error = call(url), None
    except LlmPerfUsageError as exc:
        result, error = None, exc
    return result, error, time.monotonic() - started


def _one_message(error: BaseException | None, name: str, url: str) -> str:
    assert isinstance(error, MetadataCallError), error
    text = str(error)
    assert text.startswith(f"--llm-endpoint: {name} at {url}/v1 "), text
    assert KEY not in text
    return text


HANGS = {
    "streams_forever": (streams_forever, "without ending"),
    "stalls_after_head": (stalls_after_head, "sent the head (HTTP 200), then nothing for"),
    "trickles": (trickles, "without ending"),
}


@pytest.mark.parametrize("call_id", list(CALLS))
@pytest.mark.parametrize("fault_id", list(HANGS))
def test_a_server_that_never_finishes_ends_the_call_in_time(call_id: str, fault_id: str) -> None:
    call, name, route, _ = CALLS[call_id]
    fault, said = HANGS[fault_id]
    with serve_in_thread(_server(route, fault)) as server:
        url = server.url
        result, error, elapsed = _timed(lambda u: call(u, HANG_TIMEOUTS), url)
    assert elapsed < BOUND_S, f"{elapsed:.1f} s"
    if call_id == "field_probe" and fault_id == "streams_forever":
        # a probe needs the head and the first event: it reads one, closes, and is done
        assert error is None and result.model == "odd-model", error
        return
    text = _one_message(error, name, url)
    assert said in text and "from --llm-timeout" in text, text
    assert error.failure is CallFailure.OUT_OF_TIME  # type: ignore[union-attr]
    # a server answered (the connection, the head) and is broken: the gate fails (exit 1)
    assert error.cause is StopCause.SERVER_REFUSED  # type: ignore[union-attr]


@pytest.mark.parametrize("call_id", list(CALLS))
def test_one_transient_500_is_retried_and_the_call_succeeds(call_id: str) -> None:
    call, _, route, ok = CALLS[call_id]
    seen: list[float] = []
    behaviour = failing_first(1, always(500, "The engine is restarting"), ok, seen)
    with serve_in_thread(_server(route, behaviour)) as server:
        result, error, elapsed = _timed(call, server.url)
    assert error is None, error
    assert result is not None and len(seen) >= 2  # the 500, then the answer that settled it
    assert elapsed < BOUND_S


@pytest.mark.parametrize("call_id", list(CALLS))
def test_a_server_that_always_answers_503_is_one_message_listing_each_answer(
    call_id: str,
) -> None:
    call, name, route, _ = CALLS[call_id]
    seen: list[float] = []
    behaviour = failing_first(99, always(503, "Loading model"), sse_ok, seen)
    with serve_in_thread(_server(route, behaviour)) as server:
        url = server.url
        _, error, elapsed = _timed(call, url)
    text = _one_message(error, name, url)
    # three attempts fit the call's limit on a quiet machine; on a loaded one the backoff
    # can leave no time for the third, and the message then says so: both list each answer
    assert re.search(r"answered HTTP 503 (three times|twice), each: Loading model", text), text
    assert "three times" in text or "no time was left to retry" in text, text
    assert len(seen) == 3 and elapsed < BOUND_S
    assert error.failure is CallFailure.GAVE_UP  # type: ignore[union-attr]
    assert error.cause is StopCause.SERVER_REFUSED  # type: ignore[union-attr]
    assert error.server_says.startswith("HTTP 503: Loading model")  # type: ignore[union-attr]


@pytest.mark.parametrize("call_id", list(CALLS))
def test_a_short_retry_after_is_honoured(call_id: str) -> None:
    call, _, route, ok = CALLS[call_id]
    seen: list[float] = []
    limited = always(429, "Rate limit reached", {"Retry-After": "1"})
    with serve_in_thread(_server(route, failing_first(1, limited, ok, seen))) as server:
        result, error, elapsed = _timed(call, server.url)
    assert error is None and result is not None, error
    assert seen[1] - seen[0] >= 0.9  # waited as asked (a lower bound: sleeping is never early)
    assert elapsed < BOUND_S


@pytest.mark.parametrize("call_id", list(CALLS))
def test_a_long_retry_after_gives_up_at_once_saying_so(call_id: str) -> None:
    call, name, route, _ = CALLS[call_id]
    limited = always(429, "Rate limit reached", {"Retry-After": "60"})
    with serve_in_thread(_server(route, limited)) as server:
        url = server.url
        _, error, elapsed = _timed(call, url)
    text = _one_message(error, name, url)
    assert "answered HTTP 429: Rate limit reached" in text
    assert "asked to retry after 60 s (Retry-After)" in text, text
    assert elapsed < BOUND_S


def test_a_retry_after_past_the_deadline_is_not_waited_for() -> None:
    """``Retry-After: 5`` is short, but the call has 2 s in all: it ends now, saying why."""
    limited = always(429, "Rate limit reached", {"Retry-After": "5"})
    with serve_in_thread(_server("/v1/models", limited)) as server:
        url = server.url
        _, error, elapsed = _timed(_models, url)
    text = _one_message(error, "GET /v1/models", url)
    assert "asked to retry after 5 s (Retry-After), past the call's 2 s limit" in text, text
    assert elapsed < BOUND_S


def test_default_discovery_falls_back_with_a_warning_naming_the_call() -> None:
    """Unasked, ``/tokenize`` is one source among others: a server that streams it forever
    is passed over (the warning says how), in bounded time, and the session goes on."""
    with serve_in_thread(_server("/tokenize", streams_forever)) as server:
        started = time.monotonic()
        choice = choose_tokenizer(None, _endpoint(server.url))
        elapsed = time.monotonic() - started
    assert choice.source == "approximation" and elapsed < BOUND_S
    assert choice.warning is not None
    assert "POST /tokenize" in choice.warning and "without ending" in choice.warning


def test_a_reset_connection_is_retried_not_reported() -> None:
    """A connection the server drops before answering (the kept-alive race) is sent again."""

    async def hang_up(req: Any, wire: Any) -> None:
        wire.cut()

    with serve_in_thread(_server("/v1/models", failing_first(1, hang_up, models_ok))) as server:
        endpoint = _models(server.url)
    assert endpoint.model == "odd-model"


def test_a_body_past_its_cap_is_refused_not_buffered() -> None:
    async def huge(req: Any, wire: Any) -> None:
        await wire.head(headers={"Content-Type": "text/plain"})
        block = b"x" * 65536
        for _ in range(200):  # 12.5 MiB: past the 8 MiB cap of a whole body
            await wire.body_chunk(block)
        await wire.end()

    with serve_in_thread(_server("/metrics", huge)) as server:
        url = server.url
        _, error, _ = _timed(_metrics, url)
    text = _one_message(error, "GET /metrics", url)
    assert "answered HTTP 200 with more than 8 MiB" in text
    assert error.failure is CallFailure.TOO_LARGE  # type: ignore[union-attr]


SESSION = """
import pytest

@pytest.mark.llm_workload("synthetic", input_tokens=8, output_tokens=4, requests=8)
@pytest.mark.llm_load("concurrency", concurrency=2)
async def test_load(llm_loadgen):
    await llm_loadgen.run()
"""


def test_a_session_against_a_server_that_streams_forever_ends_at_preflight(
    tmp_path: Path,
) -> None:
    """Every route streams forever, ``GET /v1/models`` included: the session stops at its
    first call with one message, no test run and no hang; the server answers but is
    broken, so the gate fails (exit status 1, not a usage error)."""
    (tmp_path / "test_session.py").write_text(SESSION)
    with serve_in_thread(OddServer(streams_forever, models=False)) as server:
        started = time.monotonic()
        proc = subprocess.run(
            [
                *(sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"),
                f"--llm-endpoint={server.url}",
                "--llm-timeout=5",
            ],
            cwd=tmp_path,
            capture_output=True,
            timeout=120,
        )
        elapsed = time.monotonic() - started
        posts = [r for r in server.requests if r.method == "POST"]
    out = (proc.stdout + proc.stderr).decode(errors="replace")
    assert proc.returncode == 1, out
    # the call's 5 s + 10 s, and up to 15 s more to start Python and pytest on a busy machine
    assert elapsed < 5 + 10 + 15, f"{elapsed:.1f} s"
    lines = [line for line in out.splitlines() if "pytest-llmperf" in line]
    assert len(lines) == 1, out
    assert "GET /v1/models" in lines[0] and "without ending" in lines[0], lines[0]
    assert "Traceback" not in out and "test_load" not in out
    assert posts == []  # no probe, no load: it ended at the first call
