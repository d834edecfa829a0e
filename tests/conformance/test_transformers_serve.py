"""pytest-llmperf against ``transformers serve``: a strict server.

What it does that these cases pin (docs/servers.md has the bytes): any field
outside the OpenAI schema is a 422 (``ignore_eos`` and ``min_tokens``
included), ``stream_options`` is accepted but ignored and usage comes on the
finish chunk anyway, there is no ``data: [DONE]``, partial UTF-8 is held
back so a chunk may carry several tokens (events < usage), errors are
FastAPI's ``{"detail": ...}``, and ``GET /v1/models`` lists only the hub
cache (500 when there is none), never the local model it serves, so the
model name and the tokenizer are given as options here.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from conformance_checks import (
    OUTPUT_TOKENS,
    Session,
    check_completed,
    check_no_traceback,
    check_prompt_lengths,
    run_session,
    token_lengths,
)


def _options(model_dir: str) -> list[str]:
    return [f"--llm-model={model_dir}", f"--llm-tokenizer={model_dir}"]


@pytest.fixture(scope="module")
def chat(
    transformers_serve: Any, model_dir: str, tmp_path_factory: pytest.TempPathFactory
) -> Session:
    workdir = tmp_path_factory.mktemp("tfs-chat")
    return run_session(workdir, transformers_serve.url, *_options(model_dir), api="chat")


@pytest.fixture(scope="module")
def completions(
    transformers_serve: Any, model_dir: str, tmp_path_factory: pytest.TempPathFactory
) -> Session:
    workdir = tmp_path_factory.mktemp("tfs-cmpl")
    return run_session(workdir, transformers_serve.url, *_options(model_dir), api="completions")


@pytest.fixture(params=["chat", "completions"])
def session(request: pytest.FixtureRequest) -> Session:
    return request.getfixturevalue(request.param)


def test_all_requests_complete(session: Session) -> None:
    check_completed(session)


def test_ignore_eos_is_dropped_and_reported(session: Session) -> None:
    """The plugin's own optional field is negotiated away, not sent 40 times into a 422."""
    check_completed(session)
    fields = session.request_fields
    refused = fields.get("refused") or {}
    assert "ignore_eos" in refused, fields
    assert "Unexpected fields" in refused["ignore_eos"], fields
    notes = " ".join(fields.get("notes") or [])
    assert "ignore_eos" in notes, fields
    assert "stream_options" not in refused, fields  # accepted (and ignored) by this server


def test_token_events_are_consistent_with_usage(session: Session) -> None:
    """Usage always comes; events may be fewer (several tokens per chunk), never more."""
    lengths = token_lengths(check_completed(session))
    # the tiny model never picks end-of-text, so even without ignore_eos replies run full
    assert lengths["output_server_mean"] == OUTPUT_TOKENS, lengths
    assert 0 < lengths["output_events_mean"] <= lengths["output_server_mean"], lengths


def test_no_connection_is_retried(session: Session) -> None:
    """transformers serve keeps connections alive as it says: nothing to resend (issue 22)."""
    counts = check_completed(session)["counts"]
    assert counts.get("connection_retries") == 0, counts


def test_completions_prompt_lengths_match_the_model_tokenizer(
    completions: Session, model_dir: str
) -> None:
    check_prompt_lengths(token_lengths(check_completed(completions)), model_dir)


def test_chat_prompt_lengths_include_the_chat_template(chat: Session, model_dir: str) -> None:
    check_prompt_lengths(token_lengths(check_completed(chat)), model_dir)


def test_an_unknown_user_field_stops_the_session_with_the_servers_message(
    transformers_serve: Any, model_dir: str, tmp_path: Path
) -> None:
    s = run_session(
        tmp_path,
        transformers_serve.url,
        *_options(model_dir),
        '--llm-request-extra={"bogus_field": 1}',
    )
    assert s.returncode not in (0, -1), s.explain()
    check_no_traceback(s)
    assert "Unexpected fields in the request" in s.output and "bogus_field" in s.output, s.explain()
    if s.report is not None:
        issued = sum(r["counts"]["issued"] for t in s.report["tests"] for r in t["runs"])
        assert issued == 0, s.explain()


def test_without_a_model_name_the_session_says_what_to_do(
    transformers_serve: Any, model_dir: str, tmp_path: Path
) -> None:
    """``GET /v1/models`` is a 500 here: the plugin must not crash on it.

    Either it runs anyway (the server is pinned to one model and accepts
    requests without ``model``) or it stops once, telling the user to pass
    ``--llm-model``.
    """
    s = run_session(tmp_path, transformers_serve.url, f"--llm-tokenizer={model_dir}")
    check_no_traceback(s)
    if s.returncode != 0:
        assert "--llm-model" in s.output, s.explain()
    else:
        check_completed(s)
