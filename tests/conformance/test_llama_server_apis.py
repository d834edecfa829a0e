"""pytest-llmperf against llama.cpp's ``llama-server``: Anthropic Messages, the Responses API
and ``/v1/embeddings`` (issue 26).

One server of this module does all three: ``--embeddings --pooling mean``
beside generation (``conformance/servers.py``; the GGUF names no pooling type
and ``/v1/embeddings`` refuses ``none``). The chat and completions tier
(``test_llama_server.py``) keeps its own server without ``--embeddings``.

What this llama.cpp (``0c1e570``) does that these cases pin (docs/servers.md has
the bytes):

- both typed streams hold back partial UTF-8 as chat does (several tokens in one
  delta, no empty deltas): fewer token events than ``usage`` tokens; neither ends
  with ``[DONE]``; Responses ends with ``response.completed``, status
  ``"completed"`` even at ``max_output_tokens``; Messages with ``message_delta``
  (usage ``output_tokens`` only) and ``message_stop``;
- when a reply's first token is a partial character, the stream's opening is
  lost: Messages sends **no** ``message_start`` (so no prompt usage for that
  request) and Responses repeats ``response.created`` and
  ``response.in_progress`` before every later delta (its "created" flag is set
  only on the first token's chunk, which was never sent). Such requests still
  complete: lifecycle events are not tokens, and the output usage is in
  ``message_delta``;
- ``ignore_eos`` is forwarded on Responses (the body is copied) and dropped on
  Messages (only named fields are converted); this model never stops early;
- embeddings: ``{"model", "object": "list", "usage": {"prompt_tokens",
  "total_tokens"}, "data": [{"index", "object": "embedding", "embedding"}]}``,
  256 L2-normalised floats, BOS counted once per input, as vLLM counts.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from conformance_checks import (
    EMBED_TEST,
    EMBED_TTFT_TEST,
    INPUT_TOKENS,
    OUTPUT_TOKENS,
    REQUESTS,
    Session,
    api_rounds_test,
    check_embeddings_run,
    check_events_against_usage,
    check_no_traceback,
    check_run_complete,
    check_timing_order,
    check_ttft_slo_refused,
    run_records,
    run_session,
    runs_by_test,
    token_lengths,
    within,
)

APIS = ("messages", "responses")
DIMENSIONS = 256  # the tiny Llama's n_embd


@pytest.fixture(scope="module")
def streams(
    llama_server_embeddings: Any, tmp_path_factory: pytest.TempPathFactory
) -> dict[str, dict[str, Any]]:
    """One session: a Messages run and a Responses run, 40 requests at concurrency 4."""
    workdir = tmp_path_factory.mktemp("llama-apis")
    s = run_session(
        workdir,
        llama_server_embeddings.url,
        f"--llm-events={workdir / 'events'}",
        test_source=api_rounds_test(APIS, 1),
    )
    check_no_traceback(s)
    assert s.returncode == 0, s.explain()
    runs = runs_by_test(s)
    assert sorted(runs) == [f"test_{a}_0" for a in sorted(APIS)], s.explain()
    return {api: runs[f"test_{api}_0"] for api in APIS}


@pytest.mark.parametrize("api", APIS)
def test_every_request_completes_with_the_requested_output_tokens(
    streams: dict[str, dict[str, Any]], api: str
) -> None:
    """Issue 26, done when (Messages; Responses as well): 40 requests complete, 32 output
    tokens each by the server's usage (``message_delta.usage.output_tokens``,
    ``response.completed``'s ``usage.output_tokens``)."""
    run = check_run_complete(streams[api], REQUESTS, api)
    check_timing_order(run["metrics"], one_read_replies_ok=True)
    lengths = token_lengths(run)
    assert lengths["output_server_mean"] == OUTPUT_TOKENS, lengths


@pytest.mark.parametrize("api", APIS)
def test_events_against_usage_one_gap_per_event(
    streams: dict[str, dict[str, Any]], api: str
) -> None:
    """Partial characters are held back: fewer delta events than tokens, never more, one
    ITL gap per event after the first (as on chat: test_llama_server.py)."""
    lengths = check_events_against_usage(streams[api], OUTPUT_TOKENS, api, fewer=True)
    print(f"{api}: {lengths['output_events_mean']} events per {OUTPUT_TOKENS} tokens")


def test_prompt_usage_where_the_server_sent_it(streams: dict[str, dict[str, Any]]) -> None:
    """Responses: every request's prompt usage, within 5% of the requested 128. Messages:
    ``message_start`` carries it (``input_tokens`` + ``cache_read_input_tokens``) unless the
    reply began with a partial character (then the server sends no ``message_start``);
    where it came, it is what Responses counted for the same prompt."""
    responses = {r.index: r.usage_prompt_tokens for r in run_records(streams["responses"])}
    assert all(n is not None for n in responses.values()), responses
    assert within(token_lengths(streams["responses"])["input_server_mean"], INPUT_TOKENS, 0.05)
    messages = {r.index: r.usage_prompt_tokens for r in run_records(streams["messages"])}
    missing = sorted(i for i, n in messages.items() if n is None)
    print(f"messages without message_start (no prompt usage): {len(missing)} of {len(messages)}")
    assert len(missing) < len(messages), messages
    for i, n in messages.items():
        if n is not None:
            assert n == responses[i], (i, n, responses[i])


@pytest.fixture(scope="module")
def embeddings(llama_server_embeddings: Any, tmp_path_factory: pytest.TempPathFactory) -> Session:
    workdir = tmp_path_factory.mktemp("llama-embeddings")
    return run_session(
        workdir, llama_server_embeddings.url, api="embeddings", test_source=EMBED_TEST
    )


def test_200_requests_of_8_inputs_complete_with_the_servers_token_counts(
    embeddings: Session,
) -> None:
    run = check_embeddings_run(embeddings, DIMENSIONS)
    print(run["metrics"]["e2e"], run["metrics"].get("embedding_inputs_per_s"))


def test_a_ttft_slo_on_an_embeddings_test_is_a_usage_error_naming_it(
    llama_server_embeddings: Any, tmp_path: Path
) -> None:
    s = run_session(
        tmp_path, llama_server_embeddings.url, api="embeddings", test_source=EMBED_TTFT_TEST
    )
    check_ttft_slo_refused(s)
