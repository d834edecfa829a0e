"""pytest-llmperf against vLLM CPU's ``/v1/embeddings`` (issue 26).

A vLLM instance runs one runner, so this module starts its own: the tier's
Llama with ``--runner pooling --convert embed`` (``conformance/servers.py``;
last-token pooling, L2-normalised vectors of the hidden size, 256). Its
answer: ``{"id": "embd-…", "object": "list", "created", "model", "data":
[{"index", "object": "embedding", "embedding": [256 floats]}, …], "usage":
{"prompt_tokens", "total_tokens", "completion_tokens": 0, …}}``, BOS counted
once per input; ``encoding_format: "base64"`` answers float32 bytes as base64;
``dimensions`` is a 400 (no Matryoshka support); unknown fields are ignored.

Issue 37: the module's server is started by the session that measures it,
through ``--llm-server-cmd`` (the command of ``servers.vllm_embeddings_launch``),
and stopped at its end: the tier's vLLM start through the plugin, its
``startup.ready_s`` and log reported (no start added: the tier started this
server itself before). The session refused at collection starts none.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest
from conformance_checks import (
    EMBED_TEST,
    EMBED_TTFT_TEST,
    Session,
    check_embeddings_run,
    check_no_traceback,
    check_started_and_stopped,
    check_ttft_slo_refused,
    run_session,
)

DIMENSIONS = 256  # the tiny Llama's hidden size


@pytest.fixture(scope="module")
def launch(install: Any) -> Any:
    """The pooling vLLM's command, for a session to start (``servers.vllm_embeddings_launch``)."""
    servers = sys.modules["llmperf_conformance_servers"]  # loaded by conftest.py
    if problems := install.problems("vllm-embeddings"):
        pytest.fail(f"{install.root} is not a complete install: " + "; ".join(problems))
    return servers.vllm_embeddings_launch(install)


@pytest.fixture(scope="module")
def embeddings(launch: Any, tmp_path_factory: pytest.TempPathFactory) -> Session:
    workdir = tmp_path_factory.mktemp("vllm-embeddings")
    return run_session(workdir, launch, api="embeddings", test_source=EMBED_TEST)


def test_200_requests_of_8_inputs_complete_with_the_servers_token_counts(
    embeddings: Session,
) -> None:
    run = check_embeddings_run(embeddings, DIMENSIONS)
    print(run["metrics"]["e2e"], run["metrics"].get("embedding_inputs_per_s"))


def test_the_session_started_vllm_reported_its_start_and_stopped_it(embeddings: Session) -> None:
    """Issue 37, done when: vLLM started by the plugin (``--llm-server-cmd``), its
    ``startup.ready_s`` reported, its log kept, and no process of it after the session."""
    check_no_traceback(embeddings)
    assert embeddings.returncode == 0, embeddings.explain()
    server = check_started_and_stopped(embeddings)
    startup = embeddings.run["server_process"]["startup"]
    print({"startup": startup, "log": server["log"]})


def test_a_ttft_slo_on_an_embeddings_test_is_a_usage_error_naming_it(
    launch: Any, tmp_path: Path
) -> None:
    """Refused at collection: before any request, and before the server would start."""
    s = run_session(tmp_path, launch, api="embeddings", test_source=EMBED_TTFT_TEST)
    check_ttft_slo_refused(s)
    assert not s.leftovers, s.leftovers
