"""pytest-llmperf against vLLM CPU's ``/v1/embeddings`` (issue 26).

A vLLM instance runs one runner, so this module starts its own: the tier's
Llama with ``--runner pooling --convert embed`` (``conformance/servers.py``;
last-token pooling, L2-normalised vectors of the hidden size, 256). Its
answer: ``{"id": "embd-…", "object": "list", "created", "model", "data":
[{"index", "object": "embedding", "embedding": [256 floats]}, …], "usage":
{"prompt_tokens", "total_tokens", "completion_tokens": 0, …}}``, BOS counted
once per input; ``encoding_format: "base64"`` answers float32 bytes as base64;
``dimensions`` is a 400 (no Matryoshka support); unknown fields are ignored.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from conformance_checks import (
    EMBED_TEST,
    EMBED_TTFT_TEST,
    Session,
    check_embeddings_run,
    check_ttft_slo_refused,
    run_session,
)

DIMENSIONS = 256  # the tiny Llama's hidden size


@pytest.fixture(scope="module")
def embeddings(vllm_embeddings: Any, tmp_path_factory: pytest.TempPathFactory) -> Session:
    workdir = tmp_path_factory.mktemp("vllm-embeddings")
    return run_session(workdir, vllm_embeddings.url, api="embeddings", test_source=EMBED_TEST)


def test_200_requests_of_8_inputs_complete_with_the_servers_token_counts(
    embeddings: Session,
) -> None:
    run = check_embeddings_run(embeddings, DIMENSIONS)
    print(run["metrics"]["e2e"], run["metrics"].get("embedding_inputs_per_s"))


def test_a_ttft_slo_on_an_embeddings_test_is_a_usage_error_naming_it(
    vllm_embeddings: Any, tmp_path: Path
) -> None:
    s = run_session(tmp_path, vllm_embeddings.url, api="embeddings", test_source=EMBED_TTFT_TEST)
    check_ttft_slo_refused(s)
