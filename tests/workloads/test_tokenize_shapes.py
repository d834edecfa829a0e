"""The server tokenizer speaks vLLM's ``/tokenize`` and llama.cpp's, and knows an empty answer.

Real HTTP servers on 127.0.0.1 (``tokenize_server.py``) counting with a real
tokenizer: one in vLLM's shape, one in llama-server's (``{"content"}`` in,
``{"tokens"}`` out, ``{"tokens": []}`` for vLLM's ``{"prompt"}``, its chat
template through ``/apply-template``), one that answers ``{"tokens": []}``
to everything. Prompts sized through either real shape are exactly as long as
the server counts them; the empty one is never taken for "zero tokens".
"""

from __future__ import annotations

import pickle
import warnings
from pathlib import Path

import pytest
from tokenize_server import ReferenceCounter, TokenizeServer

from pytest_llmperf.apis import Api as ApiKind
from pytest_llmperf.errors import LlmPerfUsageError
from pytest_llmperf.session_tokenizer import (
    TokenizerFallbackWarning,
    choose_tokenizer,
    session_tokenizer,
)
from pytest_llmperf.workloads import build_workload
from pytest_llmperf.workloads.server_tokenizer import ServerTokenizer, TokenizeShape
from pytest_llmperf.workloads.tokenizer import ApproximateTokenizer


@pytest.fixture(autouse=True)
def empty_hf_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An empty hub cache, whatever this machine has downloaded."""
    (tmp_path / "hub").mkdir()
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))


def _server_tokenizer(srv: TokenizeServer, api: ApiKind = "chat") -> ServerTokenizer:
    tok = choose_tokenizer("server", srv.endpoint(api)).tokenizer
    assert isinstance(tok, ServerTokenizer)
    return tok


@pytest.mark.parametrize("pieces", [True, False], ids=["with-pieces", "word-by-word"])
@pytest.mark.parametrize("api", ["chat", "completions"])
def test_llama_cpp_prompts_are_exactly_as_long_as_the_server_counts(
    llama_dir: Path, api: ApiKind, pieces: bool
) -> None:
    reference = ReferenceCounter(llama_dir)
    with TokenizeServer(llama_dir, shape="llama.cpp", token_strs=pieces) as srv:
        tok = _server_tokenizer(srv, api)
        workloads = [
            build_workload("synthetic-uniform", seed=4, tokenizer=tok),
            build_workload("long-context", seed=4, tokenizer=tok, context_tokens=[300, 700]),
        ]
        samples = [w.sample(i) for w in workloads for i in range(40)]
        calls = list(srv.calls)
        first = srv.bodies[0]
    assert tok.shape is TokenizeShape.LLAMA_CPP
    assert "llama.cpp" in tok.label
    # vLLM's shape was asked first and answered {"tokens": []}: "not this shape", not zero
    assert "prompt" in first and "content" not in first
    if api == "chat":
        assert "POST /apply-template" in calls  # the chat framing, as llama-server's chat route
    assert tok.window_error == 0
    for s in samples:
        assert reference.prompt_tokens(s, api) == s.input_tokens


def test_llama_cpp_is_found_by_the_default_discovery(llama_dir: Path) -> None:
    with TokenizeServer(llama_dir, shape="llama.cpp") as srv:
        choice = choose_tokenizer(None, srv.endpoint())
    assert choice.source == "server" and choice.warning is None
    assert isinstance(choice.tokenizer, ServerTokenizer)
    assert choice.tokenizer.shape is TokenizeShape.LLAMA_CPP


def test_llama_cpp_detokenize_round_trips_and_survives_a_pickle(llama_dir: Path) -> None:
    with TokenizeServer(llama_dir, shape="llama.cpp") as srv:
        tok = _server_tokenizer(srv)
        ids = tok.token_ids("The harbour town")
        assert tok.detokenize(ids) == "The harbour town"
        w = build_workload("synthetic", input_tokens=(40, 90), tokenizer=tok)
        expected = [w.sample(i) for i in range(10)]
        calls = len(srv.calls)
        again = pickle.loads(pickle.dumps(w))  # as --llm-workers ships it
        assert [again.sample(i) for i in range(10)] == expected
        assert len(srv.calls) == calls  # measured before: the copy calls nothing
        copy = pickle.loads(pickle.dumps(tok))  # its routes open their own loop when asked
        assert copy.count("The harbour town") == len(ids)


def test_vllm_shape_is_recognised_first(llama_dir: Path) -> None:
    with TokenizeServer(llama_dir) as srv:
        tok = _server_tokenizer(srv)
        bodies = list(srv.bodies)
    assert tok.shape is TokenizeShape.VLLM
    assert "llama.cpp" not in tok.label
    assert not any("content" in b for b in bodies)  # never asked in llama.cpp's shape


def test_an_empty_token_list_is_not_a_tokenizer_when_asked_for(llama_dir: Path) -> None:
    with TokenizeServer(llama_dir, shape="empty") as srv, pytest.raises(LlmPerfUsageError) as err:
        choose_tokenizer("server", srv.endpoint())
    text = str(err.value)
    assert err.value.where == "--llm-tokenizer"
    assert text.count('no tokens for a non-empty text ({"tokens": []})') == 2, text
    assert "vLLM's shape" in text and "llama.cpp's shape" in text


def test_an_empty_token_list_falls_back_with_a_clear_warning_not_empty_prompts(
    llama_dir: Path,
) -> None:
    with (
        TokenizeServer(llama_dir, shape="empty") as srv,
        pytest.warns(TokenizerFallbackWarning) as caught,
    ):
        tok = session_tokenizer(None, srv.endpoint())
    assert isinstance(tok, ApproximateTokenizer)
    [message] = [str(w.message) for w in caught if w.category is TokenizerFallbackWarning]
    assert 'POST /tokenize answered no tokens for a non-empty text ({"tokens": []})' in message
    w = build_workload("synthetic", input_tokens=64, tokenizer=tok)
    for i in range(5):
        sample = w.sample(i)
        assert sample.input_tokens == 64 and len(sample.prompt.split()) > 20


def test_tokenize_is_asked_at_the_server_root_beside_v1(llama_dir: Path) -> None:
    """The base URL ends in /v1; llama-server (like vLLM) serves /tokenize at the root."""
    with TokenizeServer(llama_dir, shape="llama.cpp") as srv:
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            _server_tokenizer(srv)
        posts = [c for c in srv.calls if c.startswith("POST")]
    assert posts and all(not c.startswith("POST /v1/") for c in posts), posts
