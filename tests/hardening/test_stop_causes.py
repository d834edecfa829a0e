"""Whose a stop before load is, decided where the preflight raises it.

A server that answers but lets no request pass (5xx or 429 after the retries, a 502
HTML page, a stall before any head, a connection closed before any answer) is broken:
the gate fails, exit status 1 (``StopCause.SERVER_REFUSED``, the server's words kept
in ``server_says``). An address where nothing answers HTTP is the user's to fix
(``UNREACHABLE``), and so are refused credentials and an API or model the server does
not serve (``USAGE``): exit status 4. Each case is the real preflight against a real
server on 127.0.0.1 misbehaving on every request (``faults.py``, ``odd_servers.py``);
the exit status each cause gives a session is walked in tests/plugin/test_gate_states.py.
"""

from __future__ import annotations

import asyncio
import socket

import faults
import pytest
from odd_servers import Behaviour, OddServer, always, serve_in_thread

from pytest_llmperf.client.endpoint import Endpoint, Timeouts
from pytest_llmperf.client.preflight import preflight
from pytest_llmperf.errors import LlmPerfUsageError, StopCause
from pytest_llmperf.gate_states import GateState, stop_state

TIMEOUTS = Timeouts.from_seconds(2.0)  # each call: 2 s in all, retries included

CASES: dict[str, tuple[Behaviour, bool, StopCause, str | None]] = {
    # the behaviour, whether the server answers GET /v1/models itself, the cause, and
    # how the server's words begin (None: nothing answered)
    "500": (faults.status_500_openai_body, True, StopCause.SERVER_REFUSED, "HTTP 500: The"),
    "429": (faults.status_429_retry_after, True, StopCause.SERVER_REFUSED, "HTTP 429: Rate"),
    "502-html": (faults.status_502_html, True, StopCause.SERVER_REFUSED, "HTTP 502: <html>"),
    "503-empty": (faults.status_503_empty, True, StopCause.SERVER_REFUSED, "HTTP 503"),
    "no-head": (faults.stall_before_headers, True, StopCause.SERVER_REFUSED, "never answered"),
    "hang-up": (faults.hang_up_at_once, True, StopCause.SERVER_REFUSED, "closed the connection"),
    "401": (always(401, "invalid api key"), False, StopCause.USAGE, "HTTP 401: invalid api key"),
    "404-unserved": (faults.status_404_plain, True, StopCause.USAGE, "HTTP 404: Not Found"),
    "not-http": (faults.not_http, False, StopCause.UNREACHABLE, None),
}


def _stop(url: str) -> LlmPerfUsageError:
    endpoint = Endpoint(url + "/v1", model="m", timeouts=TIMEOUTS)
    with pytest.raises(LlmPerfUsageError) as caught:
        asyncio.run(preflight(endpoint))
    return caught.value


@pytest.mark.parametrize("case", list(CASES))
def test_each_stop_says_whose_it_is_and_keeps_the_servers_words(case: str) -> None:
    behaviour, models, cause, says = CASES[case]
    with serve_in_thread(OddServer(behaviour, models=models)) as server:
        error = _stop(server.url)
    assert error.cause is cause, str(error)
    if says is None:
        assert error.server_says is None
    else:
        assert error.server_says is not None and error.server_says.startswith(says), error
    expected = 1 if cause is StopCause.SERVER_REFUSED else 4
    assert stop_state(error.cause).exit_status == expected


def test_nothing_listening_is_unreachable() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    error = _stop(f"http://127.0.0.1:{port}")
    assert error.cause is StopCause.UNREACHABLE and error.server_says is None
    assert stop_state(error.cause) is GateState.STOPPED_UNREACHABLE


def test_a_located_error_keeps_its_cause() -> None:
    error = LlmPerfUsageError("boom", cause=StopCause.SERVER_REFUSED, server_says="HTTP 500")
    moved = error.located("--llm-endpoint")
    assert (moved.cause, moved.server_says, str(moved)) == (
        StopCause.SERVER_REFUSED,
        "HTTP 500",
        "--llm-endpoint: boom",
    )
