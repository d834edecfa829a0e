"""Tokenizer identity: descriptions that name the same tokenizer compare equal, others not.

Real parts only: the embedded simulator started as a process and reached by URL (its
``/tokenize``), a byte-level BPE trained here served by a small real ``/tokenize``
server (vLLM's shape) and read from its folder.
"""

from __future__ import annotations

import pickle
from collections.abc import Iterator
from pathlib import Path

import pytest
from tokenize_server import TokenizeServer

from pytest_llmperf.client.endpoint import Endpoint, Timeouts
from pytest_llmperf.session_tokenizer import MetadataRoutes, choose_tokenizer
from pytest_llmperf.sim.process import SimProcess, start_sim_process
from pytest_llmperf.slo.comparable_runs import comparable_workload, run_differences
from pytest_llmperf.tokens import count_tokens
from pytest_llmperf.workloads import build_workload
from pytest_llmperf.workloads.hf_tokenizer import load_hf_tokenizer
from pytest_llmperf.workloads.server_tokenizer import ServerTokenizer
from pytest_llmperf.workloads.tokenizer import ApproximateTokenizer
from pytest_llmperf.workloads.tokenizer_identity import (
    APPROXIMATE_KIND,
    approximate_identity,
    identity_of,
    same_tokenizer,
)

SIM_LABEL = "approximate (words and punctuation): the embedded simulator's own tokenizer"


@pytest.fixture(scope="module")
def sim() -> Iterator[SimProcess]:
    with start_sim_process("fixed") as process:
        yield process


def _sim_endpoint(sim: SimProcess, api: str = "chat") -> Endpoint:
    return Endpoint(sim.url + "/v1", model="sim-fixed", api=api, timeouts=Timeouts.from_seconds(10))  # type: ignore[arg-type]


@pytest.mark.parametrize("api", ["chat", "completions"])
def test_the_simulator_by_url_is_the_embedded_simulators_tokenizer(
    sim: SimProcess, api: str
) -> None:
    """The issue's case: the plugin's simulator sizes prompts with the approximation (its
    own tokenizer), the same simulator by URL with its ``/tokenize``: two labels, one
    tokenizer, and the same prompts."""
    by_url = choose_tokenizer(None, _sim_endpoint(sim, api))
    assert by_url.source == "server" and isinstance(by_url.tokenizer, ServerTokenizer)
    embedded = ApproximateTokenizer(SIM_LABEL)
    assert by_url.tokenizer.label != embedded.label  # the prose differs ...
    a, b = identity_of(embedded), identity_of(by_url.tokenizer)
    assert a is not None and b is not None
    assert a["kind"] == APPROXIMATE_KIND and b["kind"] == "server"
    assert same_tokenizer(a, b) is True  # ... the tokenizer does not
    # the workloads they size ask for the same lengths, which the server counts alike
    params = {"input_tokens": [16, 200], "output_tokens": 8}
    w_embedded = build_workload("synthetic", seed=3, tokenizer=embedded, **params)
    w_url = build_workload("synthetic", seed=3, tokenizer=by_url.tokenizer, **params)
    for i in range(8):
        a_sample, b_sample = w_embedded.sample(i), w_url.sample(i)
        assert a_sample.input_tokens == b_sample.input_tokens
        assert count_tokens(a_sample.prompt) == count_tokens(b_sample.prompt)
    d_embedded, d_url = w_embedded.describe(), w_url.describe()
    assert d_embedded["tokenizer"] != d_url["tokenizer"]
    assert comparable_workload(d_embedded) == comparable_workload(d_url)
    assert run_differences({"workload": d_embedded}, {"workload": d_url}) == []


def test_the_identity_survives_a_worker_pickle(sim: SimProcess) -> None:
    """Measured at preflight (calibrate), carried to worker processes: no /tokenize call
    is needed to describe the workload there."""
    tok = choose_tokenizer(None, _sim_endpoint(sim)).tokenizer
    copy = pickle.loads(pickle.dumps(tok))
    found = identity_of(tok)
    assert found is not None and identity_of(copy) == found


def test_a_local_tokenizer_and_the_server_serving_it_are_one(llama_dir: Path) -> None:
    """A model's tokenizer.json read locally and the server counting with it (vLLM's
    ``token_strs``) cut the probe the same way: one identity, whatever the label."""
    local = load_hf_tokenizer(llama_dir).for_api("chat")
    with TokenizeServer(llama_dir, model="served") as srv:
        routes = MetadataRoutes(srv.endpoint(model="served"))
        served = ServerTokenizer(routes, "served").calibrate().for_api("chat")
        served_identity = served.identity
    assert local.label != served.label
    assert same_tokenizer(local.identity, served_identity) is True
    assert local.identity is not None and local.identity["framing"] > 0  # its chat template


def test_different_tokenizers_and_framings_differ(llama_dir: Path) -> None:
    approx = approximate_identity()
    hf = load_hf_tokenizer(llama_dir)
    chat, plain = hf.for_api("chat").identity, hf.identity
    assert same_tokenizer(approx, plain) is False  # another tokenizer: other token strings
    assert chat is not None and plain is not None
    assert chat["tokens_sha256"] == plain["tokens_sha256"]
    assert same_tokenizer(chat, plain) is False  # same tokens, a chat template's framing
    line = run_differences(
        {"workload": {"tokenizer": "approximate", "tokenizer_identity": approx}},
        {"workload": {"tokenizer": hf.label, "tokenizer_identity": plain}},
    )
    # both labels named (a long one cut at 90 characters: the path's length is the machine's)
    [said] = line
    expected = f"workload.tokenizer: approximate -> {hf.label}"
    assert said == expected if len(hf.label) <= 90 else said.startswith(expected[:60])


def test_unknown_identities_fall_back_to_the_labels() -> None:
    """A baseline saved before identities has labels only: they are compared as before."""
    assert same_tokenizer(None, approximate_identity()) is None
    old = {"workload": {"tokenizer": "approximate (words and punctuation)"}}
    new = {
        "workload": {
            "tokenizer": "approximate (words and punctuation)",
            "tokenizer_identity": approximate_identity(),
        }
    }
    assert run_differences(old, new) == []
    other = {"workload": {"tokenizer": "tiktoken cl100k_base (vocabulary 100277)"}}
    assert run_differences(old, other) == [
        "workload.tokenizer: approximate (words and punctuation) -> "
        "tiktoken cl100k_base (vocabulary 100277)"
    ]


def test_every_differing_field_is_named_with_both_values() -> None:
    stored = {
        "model": "m1",
        "api": "chat",
        "load": {"pattern": "poisson", "rate": 50},
        "workload": {"name": "synthetic", "input_tokens": [128, 128], "requests": 200},
    }
    current = {
        "model": "m2",
        "api": "chat",
        "load": {"pattern": "poisson", "rate": 60},
        "workload": {"name": "synthetic", "input_tokens": [64, 64], "requests": 20, "seed": 1},
    }
    assert run_differences(stored, current) == [
        "model: m1 -> m2",
        "load.rate: 50 -> 60",
        "workload.input_tokens: [128, 128] -> [64, 64]",
        "workload.seed: (none) -> 1",
    ]  # requests is a size key (--llm-scale): not a difference
