"""How the session picks its tokenizer: the option, else the model's own offline, else a warning."""

from __future__ import annotations

import os
import pickle
import shutil
import warnings
from pathlib import Path

import pytest
from tokenize_server import ReferenceCounter, TokenizeServer

from pytest_llmperf.apis import Api as ApiKind
from pytest_llmperf.client.endpoint import Endpoint
from pytest_llmperf.errors import LlmPerfUsageError
from pytest_llmperf.session_tokenizer import (
    TokenizerFallbackWarning,
    choose_tokenizer,
    session_tokenizer,
)
from pytest_llmperf.workloads import build_workload
from pytest_llmperf.workloads.hf_tokenizer import HuggingFaceTokenizer
from pytest_llmperf.workloads.server_tokenizer import ServerTokenizer
from pytest_llmperf.workloads.tokenizer import ApproximateTokenizer, framing_tokens


@pytest.fixture(autouse=True)
def empty_hf_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty hub cache, whatever this machine has downloaded."""
    hub = tmp_path / "hub"
    hub.mkdir()
    monkeypatch.setenv("HF_HUB_CACHE", str(hub))
    return hub


def test_default_uses_the_local_folder_v1_models_names_as_root(llama_dir: Path) -> None:
    with TokenizeServer(llama_dir, model="served-name", root=str(llama_dir)) as srv:
        choice = choose_tokenizer(None, srv.endpoint())
    assert choice.source == "model-root" and choice.warning is None
    assert isinstance(choice.tokenizer, HuggingFaceTokenizer)
    assert str(llama_dir) in choice.tokenizer.label and "chat template" in choice.tokenizer.label
    assert not any(c.startswith("POST") for c in srv.calls)  # nothing asked of /tokenize


def test_default_finds_the_model_in_the_hugging_face_cache_offline(
    llama_dir: Path, empty_hf_cache: Path
) -> None:
    repo = empty_hf_cache / "models--tiny-org--tiny-llama"
    snap = repo / "snapshots" / "0123abcd"
    blobs = repo / "blobs"
    blobs.mkdir(parents=True)
    snap.mkdir(parents=True)
    for name in ("tokenizer.json", "tokenizer_config.json"):  # as the hub stores them: links
        shutil.copy(llama_dir / name, blobs / name)
        os.symlink(blobs / name, snap / name)
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text("0123abcd")
    # a server without a root and without /tokenize: only the cache can help
    with TokenizeServer(llama_dir, root=None, tokenize=False) as srv:
        choice = choose_tokenizer(None, srv.endpoint())
    assert choice.source == "hf-cache", choice
    assert "snapshots/0123abcd" in choice.tokenizer.label
    assert framing_tokens(choice.tokenizer, ("user",)) > 0  # the config beside the link was found


def test_default_falls_back_to_the_servers_tokenize(tokenize_server: TokenizeServer) -> None:
    choice = choose_tokenizer(None, tokenize_server.endpoint())
    assert choice.source == "server" and choice.warning is None
    assert isinstance(choice.tokenizer, ServerTokenizer)
    assert "/tokenize" in choice.tokenizer.label


def test_no_source_means_the_approximation_with_a_warning_naming_why(llama_dir: Path) -> None:
    server = TokenizeServer(llama_dir, root="/no/such/model", tokenize=False)
    with server as srv, pytest.warns(TokenizerFallbackWarning) as caught:
        tok = session_tokenizer(None, srv.endpoint())
    assert isinstance(tok, ApproximateTokenizer)
    message = str(caught[0].message)
    assert "tiny-org/tiny-llama" in message
    assert "/no/such/model" in message  # why the root did not help
    assert "Hugging Face cache" in message
    assert "POST /tokenize answered HTTP 404" in message
    assert "--llm-tokenizer" in message
    assert "not available offline" in tok.label


def test_the_simulator_is_sized_with_its_own_tokenizer_without_a_warning() -> None:
    endpoint = Endpoint("http://127.0.0.1:9/v1", model="sim", sim_profile="fixed")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        tok = session_tokenizer(None, endpoint)  # no HTTP: port 9 would refuse
    assert isinstance(tok, ApproximateTokenizer) and "simulator" in tok.label


@pytest.mark.parametrize("token_strs", [True, False], ids=["token-strs", "word-by-word"])
@pytest.mark.parametrize("api", ["chat", "completions"])
def test_server_mode_sizes_prompts_exactly_without_calls_at_sample_time(
    llama_dir: Path, api: ApiKind, token_strs: bool
) -> None:
    reference = ReferenceCounter(llama_dir)
    with TokenizeServer(llama_dir, token_strs=token_strs) as srv:
        tok = choose_tokenizer("server", srv.endpoint(api)).tokenizer
        workloads = [
            build_workload("synthetic-uniform", seed=2, tokenizer=tok),
            build_workload("long-context", seed=2, tokenizer=tok, context_tokens=[400, 900]),
            build_workload("shared-prefix", seed=2, tokenizer=tok, prefix_tokens=(64, 200)),
        ]
        for w in workloads:
            w.sample(0)  # what the load generator does before its clock starts
        calls = len(srv.calls)
        samples = [w.sample(i) for w in workloads for i in range(1, 80)]
        assert len(srv.calls) == calls, srv.calls[calls:]
    assert tok.window_error == 0  # type: ignore[attr-defined]
    for s in samples:
        assert reference.prompt_tokens(s, api) == s.input_tokens


def test_server_tokenizer_pickles_without_its_connection(tokenize_server: TokenizeServer) -> None:
    tok = choose_tokenizer("server", tokenize_server.endpoint()).tokenizer
    w = build_workload("synthetic", input_tokens=(50, 150), tokenizer=tok)
    expected = [w.sample(i) for i in range(20)]
    calls = len(tokenize_server.calls)
    again = pickle.loads(pickle.dumps(w))  # as --llm-workers ships it
    assert [again.sample(i) for i in range(20)] == expected
    assert again.describe()["tokenizer"] == w.describe()["tokenizer"]
    assert len(tokenize_server.calls) == calls


def test_detokenize_round_trips(tokenize_server: TokenizeServer) -> None:
    tok = choose_tokenizer("server", tokenize_server.endpoint()).tokenizer
    ids = tok.token_ids("The harbour town")  # type: ignore[attr-defined]
    assert tok.detokenize(ids) == "The harbour town"  # type: ignore[attr-defined]


def test_explicit_server_without_tokenize_is_a_usage_error(llama_dir: Path) -> None:
    server = TokenizeServer(llama_dir, tokenize=False)
    with server as srv, pytest.raises(LlmPerfUsageError) as err:
        choose_tokenizer("server", srv.endpoint())
    assert err.value.where == "--llm-tokenizer"
    assert "POST /tokenize answered HTTP 404" in str(err.value)


def test_an_explicit_folder_wins_over_the_default(llama_dir: Path, chatml_dir: Path) -> None:
    with TokenizeServer(llama_dir, root=str(llama_dir)) as srv:
        choice = choose_tokenizer(str(chatml_dir), srv.endpoint("completions"))
    assert choice.source == "option" and str(chatml_dir) in choice.tokenizer.label
    assert framing_tokens(choice.tokenizer, ()) == 0  # ChatML tokenizer: no BOS


def test_approximate_on_request_needs_no_server() -> None:
    endpoint = Endpoint("http://127.0.0.1:9/v1", model="m")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        choice = choose_tokenizer("approximate", endpoint)
    assert isinstance(choice.tokenizer, ApproximateTokenizer) and choice.warning is None


def test_a_broken_model_folder_is_passed_over_not_fatal(llama_dir: Path, tmp_path: Path) -> None:
    broken = tmp_path / "model"
    broken.mkdir()
    (broken / "tokenizer.json").write_text("{not json")
    with TokenizeServer(llama_dir, root=str(broken)) as srv:
        choice = choose_tokenizer(None, srv.endpoint())
    assert choice.source == "server"  # the next source in the order
