"""A refusal said before load, in the right words: a strict server behind a field-adding gateway.

vLLM's router adds ``continue_final_message``, ``echo`` and others to every
body it forwards; a strict server behind it (one that refuses any field it
does not know, as the OpenAI API and pydantic servers do) then refuses even the
plainest request. The server here is that pair in one: it adds the gateway's
fields to every body it receives, then refuses the unknown ones, naming them as
the OpenAI API does (400, the first one) or pydantic does (422, each of them).
The session must stop before any load with one usage error that quotes the
server, and blame no field the user gave, since the request fails without it.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from odd_servers import OddServer, Request, Wire, serve_in_thread, sse_ok

from pytest_llmperf.apis.fields import RequestFields
from pytest_llmperf.client.endpoint import Endpoint, Timeouts
from pytest_llmperf.client.negotiation import UserFields
from pytest_llmperf.client.preflight import preflight
from pytest_llmperf.errors import LlmPerfUsageError, StopCause

OPENAI_CHAT = {
    *("model", "messages", "max_tokens", "max_completion_tokens", "stream", "stream_options"),
    *("temperature", "top_p", "n", "stop", "seed", "user", "presence_penalty"),
    *("frequency_penalty", "logit_bias", "logprobs", "top_logprobs", "tools", "tool_choice"),
}
GATEWAY_ADDS = {"continue_final_message": False, "echo": False}
HARMLESS = {"seed": 7}  # an OpenAI field: the strict server takes it


def strict_behind_gateway(style: str = "openai", gateway: bool = True) -> Any:
    """Refuses bodies with unknown fields; with ``gateway``, adds the router's fields first."""

    async def behaviour(req: Request, wire: Wire) -> None:
        body = {**(req.json() or {}), **(GATEWAY_ADDS if gateway else {})}
        unknown = sorted(set(body) - OPENAI_CHAT)
        if not unknown:
            await sse_ok(req, wire)
        elif style == "pydantic":
            detail = [
                {
                    "type": "extra_forbidden",
                    "loc": ["body", name],
                    "msg": "Extra inputs are not permitted",
                }
                for name in unknown
            ]
            await wire.whole(422, json.dumps({"detail": detail}).encode())
        else:
            message = f"Unrecognized request argument supplied: {unknown[0]}"
            error = {"error": {"message": message, "type": "invalid_request_error"}}
            await wire.whole(400, json.dumps(error).encode())

    return behaviour


def _preflight(url: str, extra: dict[str, Any], user: list[UserFields]) -> LlmPerfUsageError:
    endpoint = Endpoint(
        url + "/v1", timeouts=Timeouts.from_seconds(10), fields=RequestFields(extra=extra)
    )
    with pytest.raises(LlmPerfUsageError) as caught:
        asyncio.run(preflight(endpoint, user))
    return caught.value


def _posts(server: OddServer) -> list[dict[str, Any]]:
    return [r.json() for r in server.requests if r.method == "POST"]


@pytest.mark.parametrize("style", ["openai", "pydantic"])
@pytest.mark.parametrize(
    ("extra", "user"),
    [
        ({}, []),
        (HARMLESS, []),
        ({}, [UserFields("test_x.py::test_y llm_workload(extra_body=...)", HARMLESS)]),
    ],
    ids=["no-user-field", "request-extra", "extra-body"],
)
def test_the_plainest_request_refused_stops_before_load_quoting_the_server(
    style: str, extra: dict[str, Any], user: list[UserFields]
) -> None:
    with serve_in_thread(OddServer(strict_behind_gateway(style))) as server:
        error = _preflight(server.url, extra, user)
        posts = _posts(server)
    text = str(error)
    assert error.where == "--llm-endpoint", text  # not --llm-request-extra, not the test
    assert error.cause is StopCause.SERVER_REFUSED  # no request can pass: the gate fails (1)
    assert error.server_says is not None and "continue_final_message" in error.server_says
    assert "refused even the plainest request" in text
    assert "continue_final_message" in text  # the server's own words, naming the gateway's field
    if style == "openai":
        assert "Unrecognized request argument supplied: continue_final_message" in text
    assert "seed" not in text  # the user's harmless field is not blamed
    assert "no load was sent" in text
    # only probes reached the server, and the plainest one carried no optional or user field
    assert all("Say hello." in json.dumps(body) for body in posts)
    assert any(not ({"ignore_eos", "stream_options", "seed"} & set(body)) for body in posts)


def test_a_user_field_is_blamed_when_the_request_passes_without_it() -> None:
    """The same strict server without the gateway: the plain request passes, ``top_k`` is
    refused, and that refusal is the user's field's."""
    with serve_in_thread(OddServer(strict_behind_gateway(gateway=False))) as server:
        error = _preflight(server.url, {"top_k": 5}, [])
    assert error.where == "--llm-request-extra"
    assert error.cause is StopCause.USAGE  # the user's own field: a usage error (4)
    assert "Unrecognized request argument supplied: top_k" in str(error)


SESSION = """
import pytest

@pytest.mark.llm_workload("synthetic", input_tokens=8, output_tokens=4, requests=12)
@pytest.mark.llm_load("concurrency", concurrency=3)
async def test_load(llm_loadgen):
    await llm_loadgen.run()
"""


def test_a_session_behind_the_gateway_ends_before_load_without_blaming_the_users_field(
    tmp_path: Path,
) -> None:
    (tmp_path / "test_session.py").write_text(SESSION)
    with serve_in_thread(OddServer(strict_behind_gateway())) as server:
        started = time.monotonic()
        proc = subprocess.run(
            [
                *(sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"),
                f"--llm-endpoint={server.url}",
                f"--llm-request-extra={json.dumps(HARMLESS)}",
                "--llm-timeout=5",
            ],
            cwd=tmp_path,
            capture_output=True,
            timeout=120,
        )
        elapsed = time.monotonic() - started
        posts = _posts(server)
    out = (proc.stdout + proc.stderr).decode(errors="replace")
    assert proc.returncode == 1, out  # the server refuses every request: the gate fails
    assert elapsed < 60, f"{elapsed:.1f} s"  # a few probes; Python and pytest start-up dominate
    lines = [line for line in out.splitlines() if "pytest-llmperf" in line]
    assert len(lines) == 1, out
    assert "--llm-endpoint:" in lines[0] and "--llm-request-extra" not in lines[0], lines[0]
    assert "Unrecognized request argument supplied: continue_final_message" in lines[0]
    assert "Traceback" not in out and "test_load" not in out
    assert posts and all("Say hello." in json.dumps(body) for body in posts)  # no load sent
