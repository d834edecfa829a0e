"""``session_fingerprint`` of the live simulator and of stub servers shaped like vLLM,
llama.cpp's server, SGLang and TGI; ``fingerprint_diff`` across two configurations;
bounded against a server that hangs, one that is down, one that serves garbage."""

from __future__ import annotations

import hashlib
import json
import re
import socket
import time
from collections.abc import Iterator
from typing import Any

import pytest
from aiohttp import web
from fingerprint_stubs import (
    LLAMA_TEMPLATE,
    Calls,
    Serve,
    cache_config_metrics,
    llamacpp_app,
    vllm_app,
)

from pytest_llmperf.client.endpoint import Endpoint, normalize_base_url
from pytest_llmperf.errors import LlmPerfUsageError
from pytest_llmperf.server_metrics.fingerprint import (
    RECORD_ONLY,
    comparability,
    comparability_text,
    fingerprint_diff,
    prefix_caching,
    session_fingerprint,
)
from pytest_llmperf.sim import start_sim_process
from pytest_llmperf.sim.process import SimProcess

SECRET = "sk-fingerprint-secret-0123456789"


def endpoint(root: str, **kwargs: Any) -> Endpoint:
    return Endpoint(normalize_base_url(root), **kwargs)


@pytest.fixture(scope="module")
def tiny() -> Iterator[SimProcess]:
    with start_sim_process("tiny") as sim:
        yield sim


def test_the_simulators_fingerprint(tiny: SimProcess) -> None:
    fp = session_fingerprint(endpoint(tiny.url))
    assert fp["notes"] == [] and fp["fingerprint_version"] == 1
    assert fp["server"]["family"] == "sim"
    assert fp["server"]["version"].startswith("pytest-llmperf-sim")
    assert fp["model"] == {
        "id": "sim-tiny",
        "max_model_len": 2048,
        "owned_by": "pytest-llmperf-sim",
        "root": "sim-tiny",
    }
    # the base model and the LoRA adapters it serves (profile key lora_adapters), sorted
    assert fp["models"] == ["sim-lora-1", "sim-lora-2", "sim-tiny"]
    assert fp["engine"] == {"profile": "tiny"}
    assert re.fullmatch(r"[0-9a-f]{16}", fp["chat_template"]["sha256"])
    assert fp["chat_template"]["from"].startswith("POST /tokenize")
    client = fp["client"]
    assert {"os", "machine", "cpu_count", "python", "implementation"} <= set(client)
    assert client["cpu_count"] >= 1 and re.fullmatch(r"\d+\.\d+", client["python"])
    hostname = socket.gethostname()
    assert client["hostname_sha256"] == hashlib.sha256(hostname.encode()).hexdigest()[:16]
    if len(hostname) >= 6:  # the raw name is never stored
        assert hostname not in json.dumps(fp)
    assert "pid" not in client
    assert json.loads(json.dumps(fp)) == fp  # plain JSON, for baselines and history


def test_the_same_simulator_twice_is_the_same_and_another_max_model_len_differs(
    tiny: SimProcess,
) -> None:
    first = session_fingerprint(endpoint(tiny.url))
    with (
        start_sim_process("tiny") as same,
        start_sim_process("tiny", overrides={"max_model_len": 1024}) as shorter,
    ):
        again = session_fingerprint(endpoint(same.url))
        other = session_fingerprint(endpoint(shorter.url))
    assert fingerprint_diff(first, again) == []  # another process, another time: equal
    assert fingerprint_diff(first, other) == ["model.max_model_len: 2048 -> 1024"]


def test_a_vllm_server_its_cache_config_and_rendered_template(serve: Serve) -> None:
    calls = Calls("uvicorn")
    fp = session_fingerprint(endpoint(serve(vllm_app(calls))))
    assert fp["notes"] == []
    assert fp["server"] == {"family": "vllm", "version": "0.32.0", "software": "uvicorn"}
    assert fp["model"]["max_model_len"] == 2048 and fp["model"]["owned_by"] == "vllm"
    config = fp["engine"]["cache_config"]
    assert config["block_size"] == "16" and config["enable_prefix_caching"] == "True"
    assert "engine" not in config and "_block_size_resolved" not in config
    assert fp["engine"]["engines"] == 1
    assert fp["chat_template"]["from"].startswith("POST /tokenize")
    assert calls.seen == ["GET /v1/models", "GET /version", "GET /metrics", "POST /tokenize"]


def test_prefix_caching_is_read_from_the_engine_config(serve: Serve) -> None:
    """Whether a cache reset that failed is worth a warning: vLLM's cache_config says."""
    on = session_fingerprint(endpoint(serve(vllm_app(Calls("uvicorn")))))
    off = session_fingerprint(
        endpoint(serve(vllm_app(Calls("uvicorn"), enable_prefix_caching="False")))
    )
    assert prefix_caching(on) is True and prefix_caching(off) is False
    sglang = {"engine": {"disable_radix_cache": True}}
    assert prefix_caching(sglang) is False
    assert prefix_caching({"engine": {"disable_radix_cache": False}}) is True
    # the simulator, llama.cpp, nothing read: not said
    assert prefix_caching({"engine": {"profile": "fixed"}}) is None
    assert prefix_caching(None) is None


def test_metrics_the_caller_has_are_not_fetched_again(serve: Serve) -> None:
    calls = Calls("uvicorn")
    root = serve(vllm_app(calls))
    given = cache_config_metrics(block_size="32")
    fp = session_fingerprint(endpoint(root), metrics_text=given)
    assert fp["engine"]["cache_config"]["block_size"] == "32"  # read from the given page
    assert "GET /metrics" not in calls.seen
    calls.seen.clear()
    skipped = session_fingerprint(endpoint(root), metrics_text="")  # "": do not read
    assert "cache_config" not in skipped["engine"] and "GET /metrics" not in calls.seen


def test_two_vllm_configurations_differ_by_what_differs(serve: Serve) -> None:
    a = session_fingerprint(endpoint(serve(vllm_app(Calls("uvicorn")))))
    b = session_fingerprint(
        endpoint(
            serve(
                vllm_app(
                    Calls("uvicorn"),
                    max_model_len=1024,
                    enable_prefix_caching="False",
                    num_gpu_blocks="1004",  # memory profiling's jitter: not a difference
                )
            )
        )
    )
    assert fingerprint_diff(a, b) == [
        "engine.cache_config.enable_prefix_caching: True -> False",
        "model.max_model_len: 2048 -> 1024",
    ]
    c = session_fingerprint(
        endpoint(
            serve(
                vllm_app(
                    Calls("uvicorn"),
                    version="0.33.0",
                    template="[INST]{}[/INST]",
                    num_gpu_blocks="1200",
                )
            )
        )
    )
    differs = fingerprint_diff(a, c)
    assert differs[0].startswith("chat_template.sha256: ")
    assert differs[1:] == [
        "engine.cache_config.num_gpu_blocks: 1000 -> 1200",
        "server.version: 0.32.0 -> 0.33.0",
    ]


def test_llama_cpp_its_props_and_template(serve: Serve) -> None:
    calls = Calls("llama.cpp")
    fp = session_fingerprint(endpoint(serve(llamacpp_app(calls))))
    assert fp["server"] == {"family": "llama.cpp", "version": "b1-0c1e570", "software": "llama.cpp"}
    assert fp["engine"] == {"total_slots": 2, "n_ctx": 1024}
    assert fp["model"]["id"] == "tiny.gguf" and fp["model"]["meta"]["n_ctx_train"] == 2048
    template_hash = hashlib.sha256(LLAMA_TEMPLATE.encode()).hexdigest()[:16]
    assert fp["chat_template"] == {"sha256": template_hash, "from": "GET /props chat_template"}
    # no /version of its own (a 404, noted), no /metrics read (it has no info metric)
    assert calls.seen == ["GET /v1/models", "GET /version", "GET /props"]
    assert fp["notes"] == ["GET /version: HTTP 404: 404: Not Found"]
    other = session_fingerprint(
        endpoint(serve(llamacpp_app(Calls("llama.cpp"), n_ctx=512, template="{{ x }}")))
    )
    differs = fingerprint_diff(fp, other)
    assert differs[0].startswith("chat_template.sha256: ")
    assert differs[1:] == ["engine.n_ctx: 1024 -> 512", "model.meta.n_ctx: 1024 -> 512"]


def test_sglang_and_tgi_are_told_by_their_own_endpoints(serve: Serve) -> None:
    sglang = Calls("uvicorn")

    async def sglang_models(_r: web.Request) -> web.Response:
        card = {"id": "qwen", "owned_by": "sglang", "root": "qwen", "max_model_len": 4096}
        return web.json_response({"object": "list", "data": [card]})

    async def sglang_info(_r: web.Request) -> web.Response:  # an older SGLang's name
        args = {"version": "0.5.2", "chunked_prefill_size": 8192, "tp_size": 1}
        return web.json_response({**args, "internal_states": [{"load": 3}], "model_path": "q"})

    app = web.Application(middlewares=[sglang.record])
    app.add_routes([web.get("/v1/models", sglang_models), web.get("/get_server_info", sglang_info)])
    fp = session_fingerprint(endpoint(serve(app)))
    assert fp["server"]["family"] == "sglang" and fp["server"]["version"] == "0.5.2"
    assert fp["engine"] == {"chunked_prefill_size": 8192, "tp_size": 1}  # args, no states
    assert sglang.seen[-2:] == ["GET /server_info", "GET /get_server_info"]

    async def tgi_models(_r: web.Request) -> web.Response:
        card = {"id": "tgi-model", "object": "model", "owned_by": "tgi-model"}
        return web.json_response({"object": "list", "data": [card]})

    async def tgi_info(_r: web.Request) -> web.Response:
        info = {"model_id": "tgi-model", "version": "3.0.1", "max_total_tokens": 4096}
        return web.json_response({**info, "docker_label": None})

    tgi = web.Application()
    tgi.add_routes([web.get("/v1/models", tgi_models), web.get("/info", tgi_info)])
    fp = session_fingerprint(endpoint(serve(tgi)))
    assert fp["server"]["family"] == "tgi" and fp["server"]["version"] == "3.0.1"
    assert fp["engine"] == {"model_id": "tgi-model", "max_total_tokens": 4096}


def test_garbage_metrics_are_noted_and_the_rest_stands(serve: Serve) -> None:
    garbage = "<html>this { is not Prometheus text\n"
    fp = session_fingerprint(endpoint(serve(vllm_app(Calls("uvicorn"), metrics=garbage))))
    assert fp["server"]["family"] == "vllm" and fp["model"]["max_model_len"] == 2048
    assert "cache_config" not in fp["engine"]
    assert [n for n in fp["notes"] if n.startswith("/metrics: not Prometheus text")]


def test_a_hanging_server_is_bounded_and_probed_once(serve: Serve) -> None:
    calls = Calls("hang")

    async def hang(_r: web.Request) -> web.Response:
        import asyncio

        await asyncio.sleep(60)
        return web.Response()

    app = web.Application(middlewares=[calls.record])
    app.router.add_route("*", "/{tail:.*}", hang)
    started = time.monotonic()
    fp = session_fingerprint(endpoint(serve(app)), timeout=0.5, total=2.0)
    assert time.monotonic() - started < 8.0  # its limit, plus a busy machine's: never 60 s
    assert fp["server"]["family"] == "unknown" and calls.seen == ["GET /v1/models"]
    assert "never answered" in fp["notes"][0]
    assert fp["client"]["cpu_count"] >= 1  # the machine is known all the same


def test_a_server_that_is_down_gives_the_client_part_only() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    fp = session_fingerprint(endpoint(f"http://127.0.0.1:{port}", model="m"))
    assert fp["server"]["family"] == "unknown" and fp["model"] == {"id": "m"}
    assert len(fp["notes"]) == 1 and fp["client"]["os"]


def test_the_api_key_never_reaches_the_fingerprint(serve: Serve) -> None:
    calls = Calls("uvicorn")

    async def echo(request: web.Request) -> web.Response:
        said = request.headers.get("Authorization", "")
        return web.json_response({"error": {"message": f"bad key {said}"}}, status=401)

    app = web.Application(middlewares=[calls.record])
    app.router.add_route("*", "/{tail:.*}", echo)
    fp = session_fingerprint(endpoint(serve(app), api_key=SECRET))
    assert fp["notes"] and SECRET not in json.dumps(fp)


def test_what_is_compared_and_what_is_not() -> None:
    base: dict[str, Any] = {
        "fingerprint_version": 1,
        "collected_at": "2026-01-01T00:00:00+00:00",
        "server": {"family": "vllm", "version": "0.32.0", "software": "uvicorn"},
        "model": {"id": "m", "max_model_len": 2048},
        "models": ["m", "lora-1"],
        "engine": {"cache_config": {"num_gpu_blocks": "1000", "block_size": "16"}},
        "chat_template": {"sha256": "a" * 16, "from": "GET /props chat_template"},
        "client": {
            "os": "Linux",
            "cpu_count": 8,
            "python": "3.11",
            "platform": "Linux-6.1",
            "python_full": "3.11.7",
            "hostname_sha256": "1" * 16,
            "pid": 1,
        },
        "notes": [],
    }
    noise = json.loads(json.dumps(base))
    noise["collected_at"] = "2027-01-01T00:00:00+00:00"
    noise["client"].update(platform="Linux-6.8", python_full="3.11.9", pid=2)
    noise["client"]["hostname_sha256"] = "2" * 16
    noise["notes"] = ["GET /props: HTTP 404"]
    noise["chat_template"]["from"] = "elsewhere"
    noise["engine"]["cache_config"]["num_gpu_blocks"] = "1009"  # within 1%
    assert fingerprint_diff(base, noise) == []
    assert {"collected_at", "notes", "client.pid", "client.hostname_sha256"} <= set(RECORD_ONLY)
    unknown = json.loads(json.dumps(base))
    unknown["model"]["max_model_len"] = None  # one side could not read it: not a difference
    del unknown["engine"]["cache_config"]
    unknown["chat_template"] = None
    assert fingerprint_diff(base, unknown) == []
    other = json.loads(json.dumps(base))
    other["models"] = ["m", "lora-2"]
    other["client"]["cpu_count"] = 4
    other["server"]["version"] = "0.33.0"
    assert fingerprint_diff(base, other) == [
        "client.cpu_count: 8 -> 4",
        "models: -lora-1, +lora-2",
        "server.version: 0.32.0 -> 0.33.0",
    ]
    assert fingerprint_diff(base, other, ignore=("server", "client")) == [
        "models: -lora-1, +lora-2"  # an A/B pair is two servers by design
    ]


def test_comparability_and_strict() -> None:
    a = {"server": {"family": "vllm"}, "model": {"max_model_len": 2048}}
    b = {"server": {"family": "vllm"}, "model": {"max_model_len": 1024}}
    assert comparability(None, b, strict=True, source="old.json") == {
        "comparable": None,
        "differs": [],
        "note": "no fingerprint stored in old.json",
    }
    assert comparability(a, None)["comparable"] is None
    assert comparability(a, dict(a), strict=True)["comparable"] is True
    found = comparability(a, b, source="b.json")
    assert found["comparable"] is False
    assert found["differs"] == ["model.max_model_len: 2048 -> 1024"]
    assert comparability_text(found) == (
        "NOT COMPARABLE, the server or machine differs: model.max_model_len: 2048 -> 1024"
    )
    assert comparability_text(comparability(a, dict(a))) == ""
    with pytest.raises(LlmPerfUsageError) as raised:
        comparability(a, b, strict=True, source="baseline b.json")
    assert raised.value.where == "baseline b.json"
    assert "model.max_model_len: 2048 -> 1024" in str(raised.value)
    assert "--llm-baseline-strict" in str(raised.value)
