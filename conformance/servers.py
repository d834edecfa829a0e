"""Start and stop the real servers of the conformance tier, on 127.0.0.1 only.

vLLM's CPU build and ``transformers serve`` run from their own virtual
environments; llama.cpp's ``llama-server`` is one binary built from the
``llama-cpp-python`` sdist's vendored sources (``install_llama_server.sh``)
serving the tiny model converted to GGUF (``build_gguf.py``).

Each server is a :class:`Launch`: its
:class:`~pytest_llmperf.managed_server.ServerCommand` (argv with ``{host}``
and ``{port}``, the extra environment, the readiness URL where
``/v1/models`` is not the right one, the start deadline) and what the tier
knows of it (its name here, the model requests name, its warm-up). The
tier's fixtures start one with the plugin's own
:class:`~pytest_llmperf.managed_server.ManagedServer` (:func:`start`): a
process group of its own, output to a log file, readiness polled with the
deadline, the process tree stopped by ``stop()`` (SIGTERM, a grace period,
SIGKILL: vLLM forks an engine-core process that outlives a plain
``terminate()`` of the API server) and by the session watchdog if pytest
dies first. A server that dies or never answers raises :class:`ServerError`
with the tail of its log, which is where the reason is. The tier's inner
sessions start the same commands through ``--llm-server-cmd``
(:meth:`Launch.plugin_options`).

Everything runs offline: ``HF_HUB_OFFLINE=1`` and a private, empty
``HF_HOME`` (so nothing on the machine's Hugging Face cache leaks in and
nothing is fetched).
"""

from __future__ import annotations

import json
import os
import shlex
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from pathlib import Path

from pytest_llmperf.errors import LlmPerfUsageError
from pytest_llmperf.managed_server import ManagedServer, ServerCommand
from pytest_llmperf.managed_server.command import free_port

__all__ = [
    "Fleet",
    "Install",
    "Launch",
    "Server",
    "ServerError",
    "llama_server_launch",
    "slowed",
    "start",
    "start_llama_server",
    "start_llama_server_embeddings",
    "start_transformers",
    "start_transformers_blank",
    "start_vllm",
    "start_vllm_blank",
    "start_vllm_embeddings",
    "start_vllm_paths",
    "start_vllm_router_fleet",
    "transformers_launch",
    "vllm_embeddings_launch",
    "vllm_launch",
    "vllm_router_launch",
    "warm_up",
]

HOST = "127.0.0.1"
VLLM_START_LIMIT_S = 300.0  # ~40 s seen on 2 cores; a cold page cache can triple it
TRANSFORMERS_START_LIMIT_S = 180.0
LLAMA_SERVER_START_LIMIT_S = 60.0  # a 6 MB model: ready in about a second
LLAMA_SERVER_SLOTS = 2  # -np: the set-up; requests beyond it queue inside the server
LLAMA_SERVER_CONTEXT = 2048  # -c, shared by the slots: 1024 tokens each, as vLLM's max-model-len
# --pooling for llama-server --embeddings: the GGUF names no pooling type, and 'none' (one
# vector per token) is refused by /v1/embeddings ("Pooling type 'none' is not OAI compatible")
LLAMA_SERVER_POOLING = "mean"
STOP_GRACE_S = 10.0
# build_lora_adapters.py's adapters (served under these names) and their rank
LORA_ADAPTERS = ("tiny-lora-1", "tiny-lora-2")
LORA_RANK = 8
# vLLM builds no tool parser without --enable-auto-tool-choice, and refuses a named or
# "required" tool_choice without one; "pythonic" needs no special token in the tokenizer
# (llama3_json refuses this one: it has no <|python_tag|>) and, having no structural tag,
# decodes a named call as its function's parameters schema through the grammar engine
VLLM_TOOL_PARSER = "pythonic"


class ServerError(RuntimeError):
    """A server did not start (or died); the message carries its log tail."""


@dataclass(frozen=True)
class Install:
    """The install folder's layout, as ``install.sh`` and ``run.sh`` make it."""

    root: Path

    @property
    def vllm_python(self) -> Path:
        return self.root / "vllm" / "bin" / "python"

    @property
    def transformers_bin(self) -> Path:
        return self.root / "transformers" / "bin" / "transformers"

    @property
    def llama_server_bin(self) -> Path:
        return self.root / "llama-server" / "llama-server"

    @property
    def vllm_router_bin(self) -> Path:
        """vLLM's router, its console script in its own venv (``install_vllm_router.sh``)."""
        return self.root / "vllm-router" / "bin" / "vllm-router"

    @property
    def model(self) -> Path:
        return self.root / "model"

    @property
    def model_blank(self) -> Path:
        """The tiny model with a designed path to blank replies (``build_blank_model.py``)."""
        return self.root / "model-blank"

    @property
    def gguf(self) -> Path:
        """The tiny model as one GGUF file (``build_gguf.py``), for llama-server."""
        return self.root / "model-gguf" / "tiny-llama.gguf"

    @property
    def lora(self) -> Path:
        """The two tiny LoRA adapters (``build_lora_adapters.py``), one folder each."""
        return self.root / "lora"

    @property
    def logs(self) -> Path:
        return self.root / "logs"

    @property
    def hf_home(self) -> Path:
        return self.root / "hf-home"

    def versions(self) -> dict[str, str]:
        """What ``install.sh`` recorded (package versions per venv), or ``{}``."""
        path = self.root / "versions.json"
        return json.loads(path.read_text()) if path.exists() else {}

    def llama_server_build(self) -> dict[str, object]:
        """``install_llama_server.sh``'s record of the build (sdist, commit, options), or ``{}``."""
        path = self.root / "llama-server" / "build-info.json"
        return json.loads(path.read_text()) if path.exists() else {}

    def pieces(self) -> dict[str, Path]:
        """Each piece of the install by name, as :data:`NEEDS` names them."""
        return {
            "vLLM venv": self.vllm_python,
            "transformers venv": self.transformers_bin,
            "model config": self.model / "config.json",
            "model tokenizer": self.model / "tokenizer.json",
            "llama-server binary": self.llama_server_bin,
            "model as GGUF": self.gguf,
            "LoRA adapters": self.lora / LORA_ADAPTERS[-1] / "adapter_model.safetensors",
            "blank model": self.model_blank / "model.safetensors",
            "vllm-router venv": self.vllm_router_bin,
        }

    def problems(self, *servers: str) -> list[str]:
        """What is missing for the tiny model and ``servers`` (names in :data:`NEEDS`) to
        run (empty when all is there); ``problems(*NEEDS)``: for the whole tier.

        Per server, so that a module of the tier runs on an install that lacks another
        server's pieces (a machine without llama-server, say): each server fixture fails
        on its own missing pieces, never skips.
        """
        names = {"model config", "model tokenizer"}
        for server in servers:
            names.update(NEEDS[server])
        return [
            f"{name}: {path} not found"
            for name, path in self.pieces().items()
            if name in names and not path.exists()
        ]


# The install's pieces each server needs beside the tiny model (Install.pieces' names).
NEEDS: dict[str, tuple[str, ...]] = {
    "vllm": ("vLLM venv",),
    "transformers": ("transformers venv",),
    "llama-server": ("llama-server binary", "model as GGUF"),
    "vllm-embeddings": ("vLLM venv",),
    "vllm-paths": ("vLLM venv", "LoRA adapters"),
    "llama-server-embeddings": ("llama-server binary", "model as GGUF"),
    "vllm-blank": ("vLLM venv", "blank model"),
    "vllm-agentic": ("vLLM venv",),
    "transformers-blank": ("transformers venv", "blank model"),
    "vllm-router-fleet": ("llama-server binary", "model as GGUF", "vllm-router venv"),
    "vllm-router-vllm-fleet": ("vLLM venv", "vllm-router venv"),
}


@dataclass(frozen=True)
class Launch:
    """How the tier starts one server: its command, and what the tier knows of it.

    ``command``: argv (``{host}`` and ``{port}`` filled at start), the
    environment added to the caller's (:func:`offline_env`), the readiness URL
    where ``GET /v1/models`` is not the right one, the start deadline and the
    stop grace; one definition for the tier's fixtures (:func:`start`) and for
    inner sessions that start the server through ``--llm-server-cmd``
    (:meth:`plugin_options`). ``name``: the tier's label ("vLLM (LoRA, tools)");
    ``model``: the model as requests name it; ``warm``: the APIs
    :func:`warm_up` sends to after start; ``model_probe``: readiness is a
    one-token chat request that succeeds (``transformers serve``: its
    ``/health`` answers before the model can).
    """

    name: str
    model: str
    command: ServerCommand
    warm: tuple[str, ...] = ("chat", "completions")
    model_probe: bool = False

    def plugin_options(self) -> list[str]:
        """The plugin's options that start this server (``--llm-server-cmd`` and its kin).

        The environment goes as ``--llm-server-env`` one variable each, but for the
        blanked proxy variables (an inner session's environment has none).
        """
        cmd = self.command
        options = [f"--llm-server-cmd={shlex.join(cmd.argv)}"]
        options += [f"--llm-server-env={k}={v}" for k, v in cmd.env.items() if v]
        if cmd.ready_url:
            options.append(f"--llm-server-ready-url={cmd.ready_url}")
        options.append(f"--llm-server-ready-timeout={cmd.ready_timeout_s:g}")
        return options


@dataclass
class Server:
    """A running server: where to reach it and how to stop it."""

    name: str
    model: str
    process: ManagedServer
    ready_s: float = 0.0  # spawn to ready (transformers serve: to the model's first answer)
    launch: Launch | None = field(default=None, repr=False)

    @property
    def url(self) -> str:
        return str(self.process.url)

    @property
    def port(self) -> int:
        return int(urllib.parse.urlsplit(self.url).port or 0)

    @property
    def pid(self) -> int:
        return int(self.process.pid)

    @property
    def log_path(self) -> Path:
        return Path(self.process.log_path)

    def log_tail(self, lines: int = 40) -> str:
        return str(self.process.log_tail(lines))

    def stop(self) -> None:
        """SIGTERM the process tree, then SIGKILL what is left after the grace period."""
        self.process.stop()


def offline_env(install: Install, **extra: str) -> dict[str, str]:
    """The servers' extra environment: offline, a private HF home, no proxies.

    Added to the starting process's environment: its proxy variables are blanked
    (an empty value is no proxy to curl, requests and httpx alike) and ``NO_PROXY``
    covers everything.
    """
    install.hf_home.mkdir(parents=True, exist_ok=True)
    env = {k: "" for k in os.environ if "proxy" in k.lower()}
    env.update(
        HF_HUB_OFFLINE="1",
        TRANSFORMERS_OFFLINE="1",
        HF_HOME=str(install.hf_home),
        HF_HUB_DISABLE_TELEMETRY="1",
        DO_NOT_TRACK="1",
        VLLM_NO_USAGE_STATS="1",
        PYTHONUNBUFFERED="1",
        NO_PROXY="*",
    )
    env.update(extra)
    return env


def _command(
    name: str,
    argv: list[str],
    env: Mapping[str, str],
    limit_s: float,
    *,
    ready_url: str | None = None,
    port: int | None = None,
) -> ServerCommand:
    """A tier server's :class:`ServerCommand` on 127.0.0.1 (``port``: None, a free one)."""
    return ServerCommand(
        argv=tuple(argv),
        env=dict(env),
        ready_url=ready_url,
        ready_timeout_s=limit_s,
        stop_grace_s=STOP_GRACE_S,
        name=name,
        host=HOST,
        port=port,
    )


def slowed(launch: Launch, seconds: float) -> Launch:
    """``launch`` behind ``sh -c "sleep SECONDS && exec ARGV"``: the same server, started
    ``seconds`` later (same pid: ``exec``), for a deliberately slow start."""
    cmd = launch.command
    script = f"sleep {seconds:g} && exec {shlex.join(cmd.argv)}"
    return replace(launch, command=replace(cmd, argv=("sh", "-c", script)))


def http_json(
    method: str, url: str, body: object | None = None, timeout: float = 10.0
) -> tuple[int, str]:
    """One request without a proxy: ``(status, body text)``; status 0 when nothing answered."""
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, method=method)
    if data is not None:
        req.add_header("Content-Type", "application/json")
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    try:
        with opener.open(req, timeout=timeout) as resp:
            return resp.status, resp.read().decode(errors="replace")
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode(errors="replace")
    except (urllib.error.URLError, OSError):
        return 0, ""


def start(launch: Launch, install: Install) -> Server:
    """Start ``launch`` with the plugin's :class:`ManagedServer`, ready and warmed up.

    Its log goes to ``install.logs``. A server that exits before it is ready, or is
    not ready by its deadline, is stopped and raises :class:`ServerError` with the
    plugin's message (the exit status or the deadline, the log's last lines); so does
    a failed model probe or warm-up (after stopping it).
    """
    install.logs.mkdir(parents=True, exist_ok=True)
    probe_model = None if launch.model_probe or launch.command.ready_url else launch.model
    try:
        process = ManagedServer.start(launch.command, log_dir=install.logs, model=probe_model)
    except LlmPerfUsageError as exc:  # ServerStartError, or a program that cannot be run
        raise ServerError(f"{launch.name}: {exc}") from None
    server = Server(launch.name, launch.model, process, float(process.ready_s), launch)
    try:
        if launch.model_probe:
            _await_model(server, launch.command.ready_timeout_s)
        warm_up(server, launch.warm)
    except BaseException as exc:
        server.stop()
        if not isinstance(exc, ServerError):
            raise
        raise ServerError(f"{exc}\nlog {server.log_path}:\n{server.log_tail()}") from None
    return server


def _await_model(server: Server, limit_s: float) -> None:
    """Until a one-token chat request succeeds (the model answers), within ``limit_s`` of
    the spawn; ``server.ready_s`` is then spawn to that answer."""
    probe = {
        "model": server.model,
        "messages": [{"role": "user", "content": "Hi"}],
        "max_tokens": 1,
    }
    url = f"{server.url}/v1/chat/completions"
    spawn_ns = int(server.process.spawn_ns)
    while True:
        status, text = http_json("POST", url, probe, timeout=30.0)
        elapsed = (time.monotonic_ns() - spawn_ns) / 1e9
        if status == 200:
            server.ready_s = elapsed
            return
        exit_ = server.process.poll()
        if exit_ is not None:
            raise ServerError(f"{server.name}: {exit_.describe()} before its model answered")
        if elapsed > limit_s:
            raise ServerError(
                f"{server.name}: its model did not answer within {limit_s:g} s "
                f"(last: HTTP {status} {text[:200]})"
            )
        time.sleep(1.0)


def warm_up(server: Server, apis: tuple[str, ...] = ("chat", "completions")) -> None:
    """A few requests before any test: a server's first ones are not like the rest.

    Seen on vLLM CPU: the first streamed request after start comes back in
    one burst 200 ms late (first forward passes), which would land in the
    first test's percentiles. One request per API, then four at once.
    ``apis``: any of chat, completions, responses, messages, embeddings (a
    pooling server answers embeddings only, a generating vLLM no embeddings).
    """
    prompt = "The harbour town woke before the sun. " * 8
    bodies: dict[str, dict[str, object]] = {
        "chat": {"messages": [{"role": "user", "content": prompt}], "max_tokens": 32},
        "completions": {"prompt": prompt, "max_tokens": 32},
        "responses": {"input": prompt, "max_output_tokens": 32},
        "messages": {"messages": [{"role": "user", "content": prompt}], "max_tokens": 32},
        "embeddings": {"input": [prompt, prompt[:40]], "encoding_format": "float"},
    }
    paths = {
        "chat": "/v1/chat/completions",
        "completions": "/v1/completions",
        "responses": "/v1/responses",
        "messages": "/v1/messages",
        "embeddings": "/v1/embeddings",
    }

    def one(api: str) -> None:
        body = {"model": server.model, **bodies[api]}
        if api != "embeddings":
            body["temperature"] = 0.0
        status, text = http_json("POST", server.url + paths[api], body, timeout=60.0)
        if status != 200:
            raise ServerError(f"{server.name} warm-up {api}: HTTP {status}: {text[:500]}")

    for api in apis:
        one(api)
    with ThreadPoolExecutor(4) as pool:
        list(pool.map(one, [apis[i % len(apis)] for i in range(4)]))


# Bucket bounds (s) for vLLM's request_latency family on the conformance tier's tiny model.
REQUEST_LATENCY_BUCKETS_S = [0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10, 60]


def vllm_launch(
    install: Install,
    port: int | None = None,
    *,
    max_model_len: int = 1024,
    paths: bool = False,
    blank: bool = False,
    agentic: bool = False,
) -> Launch:
    """vLLM's OpenAI server on the tiny model (CPU, float32, eager, 1024-token context).

    ``VLLM_CPU_KVCACHE_SPACE=1`` (GiB) keeps it near 2 GB; ready when
    ``GET /v1/models`` answers 200 (the plugin's default readiness), which vLLM
    only does once the engine is up. ``VLLM_SERVER_DEV_MODE=1`` mounts its
    development routes (``POST /reset_prefix_cache``, which
    ``--llm-reset-cache`` uses) and ``--enable-per-request-metrics`` adds each
    request's server timings to its response (the TTFT split);
    ``max_model_len`` makes a second configuration for the comparability check.

    ``paths``: also serve the request paths of issue 28 (:func:`start_vllm_paths`);
    ``blank``: serve the blank model instead (:func:`start_vllm_blank`);
    ``agentic``: each usage also says the prompt's cached tokens (:func:`start_vllm_agentic`).
    """
    model = install.model_blank if blank else install.model
    argv = [
        str(install.vllm_python),
        "-m",
        "vllm.entrypoints.openai.api_server",
        "--model",
        str(model),
        "--dtype",
        "float32",
        "--enforce-eager",
        "--max-model-len",
        str(max_model_len),
        "--enable-per-request-metrics",
        # vLLM's queue/prefill/decode/e2e buckets start at 0.3 s; a tiny model's are ms
        "--custom-histogram-buckets",
        json.dumps({"request_latency": REQUEST_LATENCY_BUCKETS_S}),
        "--host",
        "{host}",
        "--port",
        "{port}",
    ]
    if paths:
        argv += vllm_paths_args(install)
    if agentic:
        argv.append("--enable-prompt-tokens-details")
    env = offline_env(install, VLLM_CPU_KVCACHE_SPACE="1", VLLM_SERVER_DEV_MODE="1")
    log_name = (
        "vllm-paths" if paths else "vllm-blank" if blank else "vllm-agentic" if agentic else "vllm"
    )
    name = (
        "vLLM (LoRA, tools)"
        if paths
        else "vLLM (blank model)"
        if blank
        else "vLLM (cached-token usage)"
        if agentic
        else "vLLM"
    )
    command = _command(log_name, argv, env, VLLM_START_LIMIT_S, port=port)
    return Launch(name, str(model), command)


def start_vllm(
    install: Install,
    port: int | None = None,
    *,
    max_model_len: int = 1024,
    paths: bool = False,
    blank: bool = False,
    agentic: bool = False,
) -> Server:
    """:func:`vllm_launch`, started and warmed up."""
    launch = vllm_launch(
        install, port, max_model_len=max_model_len, paths=paths, blank=blank, agentic=agentic
    )
    return start(launch, install)


def vllm_paths_args(install: Install) -> list[str]:
    """vLLM's flags for LoRA adapters and named tool calls (see :func:`start_vllm_paths`)."""
    modules = [f"{name}={install.lora / name}" for name in LORA_ADAPTERS]
    return [
        "--enable-lora",
        "--max-loras",
        str(len(LORA_ADAPTERS)),
        "--max-lora-rank",
        str(LORA_RANK),
        "--lora-modules",
        *modules,
        "--enable-auto-tool-choice",
        "--tool-call-parser",
        VLLM_TOOL_PARSER,
    ]


def start_vllm_paths(install: Install, port: int | None = None) -> Server:
    """:func:`start_vllm` with LoRA and tool calls: ``--enable-lora --max-loras 2
    --max-lora-rank 8 --lora-modules tiny-lora-1=… tiny-lora-2=…`` and
    ``--enable-auto-tool-choice --tool-call-parser pythonic``.

    A server of its own because the tool parser changes plain chat streams: with a
    parser, vLLM drops the empty ``content`` deltas of a request without tools (its
    ``tool_choice`` defaults to ``"none"``), so a 32-token reply streams 16 content
    chunks instead of 32 (seen), which the other vLLM modules' one-event-per-token
    checks would see. Both adapters fit the ``--max-loras 2`` slots: none is swapped
    out while a run mixes them. Ready, like :func:`start_vllm`, when ``GET
    /v1/models`` answers 200; it lists the base model and both adapters.
    """
    return start_vllm(install, port, paths=True)


def start_vllm_blank(install: Install, port: int | None = None) -> Server:
    """:func:`start_vllm` serving the blank model (``build_blank_model.py``), whose replies
    to some prompts are blank: every token ``<|start_header_id|>``, streamed as ``""``
    deltas and counted in the usage. Same flags and readiness as :func:`start_vllm`."""
    return start_vllm(install, port, blank=True)


def start_vllm_agentic(install: Install, port: int | None = None) -> Server:
    """:func:`start_vllm` with ``--enable-prompt-tokens-details``: every usage carries
    ``prompt_tokens_details.cached_tokens``, the prompt's tokens the prefix cache served,
    per request (an agentic replay's cache hits by turn). A server of its own: the other
    vLLM modules read usage chunks without it."""
    return start_vllm(install, port, agentic=True)


def vllm_embeddings_launch(install: Install, port: int | None = None) -> Launch:
    """vLLM as an embeddings server: the tier's Llama with ``--runner pooling --convert embed``.

    A vLLM instance runs one runner, so embeddings need their own server (a
    generating one answers ``/v1/embeddings`` 404, a pooling one has no chat
    or completions routes). ``--convert embed`` wraps the causal model in
    vLLM's embedding adapter: last-token pooling, L2-normalised, 256
    dimensions (the hidden size), no Matryoshka ``dimensions``. No model of
    its own to build: the tier's Llama is the "tiny pooling model". Same
    CPU settings as :func:`start_vllm`; ready, like it, when ``GET
    /v1/models`` answers 200 (about 20 s on a quiet machine, 2.9 GB RSS).
    """
    argv = [
        str(install.vllm_python),
        "-m",
        "vllm.entrypoints.openai.api_server",
        "--model",
        str(install.model),
        "--runner",
        "pooling",
        "--convert",
        "embed",
        "--dtype",
        "float32",
        "--enforce-eager",
        "--max-model-len",
        "1024",
        "--host",
        "{host}",
        "--port",
        "{port}",
    ]
    env = offline_env(install, VLLM_CPU_KVCACHE_SPACE="1")
    command = _command("vllm-embeddings", argv, env, VLLM_START_LIMIT_S, port=port)
    return Launch("vLLM (embeddings)", str(install.model), command, warm=("embeddings",))


def start_vllm_embeddings(install: Install, port: int | None = None) -> Server:
    """:func:`vllm_embeddings_launch`, started and warmed up (embeddings only)."""
    return start(vllm_embeddings_launch(install, port), install)


def transformers_launch(
    install: Install, port: int | None = None, *, blank: bool = False
) -> Launch:
    """``transformers serve`` pinned to the tiny model (its FORCE_MODEL argument), on the CPU.

    ``GET /v1/models`` lists only the hub cache (a 500 with the tier's empty
    ``HF_HOME``), so the readiness URL is ``/health``, which answers as soon as
    uvicorn runs; :func:`start` then waits for a one-token chat request to
    succeed (``model_probe``). ``blank``: pinned to the blank model instead
    (:func:`start_transformers_blank`).
    """
    model = str(install.model_blank if blank else install.model)
    argv = [
        str(install.transformers_bin),
        "serve",
        model,
        "--host",
        "{host}",
        "--port",
        "{port}",
        "--device",
        "cpu",
        "--dtype",
        "float32",
        "--log-level",
        "info",
    ]
    log_name = "transformers-serve-blank" if blank else "transformers-serve"
    name = "transformers serve (blank model)" if blank else "transformers serve"
    command = _command(
        log_name,
        argv,
        offline_env(install),
        TRANSFORMERS_START_LIMIT_S,
        ready_url="http://{host}:{port}/health",
        port=port,
    )
    return Launch(name, model, command, model_probe=True)


def start_transformers(install: Install, port: int | None = None, *, blank: bool = False) -> Server:
    """:func:`transformers_launch`, started, its model answering, and warmed up."""
    return start(transformers_launch(install, port, blank=blank), install)


def start_transformers_blank(install: Install, port: int | None = None) -> Server:
    """:func:`start_transformers` pinned to the blank model (``build_blank_model.py``): a
    blank reply streams the role chunk and the finish chunk alone, its usage counting
    every token."""
    return start_transformers(install, port, blank=True)


def llama_server_launch(
    install: Install,
    port: int | None = None,
    slots: int = LLAMA_SERVER_SLOTS,
    *,
    embeddings: bool = False,
) -> Launch:
    """llama.cpp's ``llama-server`` on the tiny model's GGUF: ``-np 2``, CPU, metrics on.

    ``-c 2048`` is shared by the slots (1024 tokens each); ``-t 1`` because
    the model is tiny and the load generator needs the other core (ggml's
    worker threads spin while they wait); ``--jinja`` renders the GGUF's own
    chat template (the same Jinja as ``tokenizer_config.json``; it is also
    this version's default, said explicitly so a newer default cannot
    change the prompt); ``--metrics`` turns on ``GET /metrics`` (Prometheus
    ``llamacpp:`` metrics); ``--no-ui`` although this build has no UI assets.
    ``/v1/models`` names the model by the path given to ``--model``, and any
    model name in a request is answered by it. ``GET /health`` is 503 while
    the model loads, 200 once ready (about a second): the readiness URL.

    ``embeddings``: also ``--embeddings --pooling mean``, so that the same
    server answers ``/v1/embeddings`` beside generation (it then caps
    ``--batch-size`` at the 512-token micro-batch: each input must fit in
    one). The chat-only tier runs without, as before.
    """
    argv = [
        str(install.llama_server_bin),
        "--model",
        str(install.gguf),
        "--host",
        "{host}",
        "--port",
        "{port}",
        "--parallel",
        str(slots),
        "--ctx-size",
        str(LLAMA_SERVER_CONTEXT),
        "--threads",
        "1",
        "--threads-batch",
        "1",
        "--jinja",
        "--metrics",
        "--no-ui",
    ]
    if embeddings:
        argv += ["--embeddings", "--pooling", LLAMA_SERVER_POOLING]
    command = _command(
        "llama-server",
        argv,
        offline_env(install),
        LLAMA_SERVER_START_LIMIT_S,
        ready_url="http://{host}:{port}/health",
        port=port,
    )
    warm = ("chat", "completions", "embeddings") if embeddings else ("chat", "completions")
    return Launch("llama-server", str(install.gguf), command, warm=warm)


def start_llama_server(
    install: Install,
    port: int | None = None,
    slots: int = LLAMA_SERVER_SLOTS,
    *,
    embeddings: bool = False,
) -> Server:
    """:func:`llama_server_launch`, started and warmed up."""
    return start(llama_server_launch(install, port, slots, embeddings=embeddings), install)


def start_llama_server_embeddings(install: Install, port: int | None = None) -> Server:
    """:func:`start_llama_server` with ``--embeddings --pooling mean``."""
    return start_llama_server(install, port, embeddings=True)


VLLM_ROUTER_START_LIMIT_S = 60.0  # ready in under a second once its workers answer /health
VLLM_ROUTER_POLICY = "round_robin"  # both replicas get requests, whatever the prompts
FLEET_REPLICAS = 2


def vllm_router_launch(
    install: Install,
    workers: list[str],
    metrics_port: int,
    port: int | None = None,
    policy: str = VLLM_ROUTER_POLICY,
    model: str = "",
    *,
    prefill: int = 0,
) -> Launch:
    """vLLM's router (``vllm-router``) in front of ``workers`` (base URLs), on 127.0.0.1.

    ``--worker-urls`` takes the URLs after one flag. Its own Prometheus page is served on
    a second port, ``--prometheus-port`` (``metrics_port``: its default 29000 would clash
    between runs); the serving port's ``/metrics`` is NOT it: an unknown path is proxied
    to one worker picked by the policy (docs/fleets.md, "Routers"). Its retries stay on (its
    default): llama-server closes a connection after each streamed reply although it
    says keep-alive, and the router's pooled client then and again sends the next request
    on that closed connection ("error sending request"); retried, it reaches a worker
    once. Without retries about one streamed request in twelve failed with a 500 (seen on
    2 cores). The health checker's interval is long: its ``/health`` probes are no
    requests, but the tier keeps the logs quiet. Ready once ``GET /readiness`` answers 200
    (it waits for every worker's ``/health`` first).

    ``prefill``: that many of ``workers`` (the first) are a prefill pool and the rest a
    decode pool (``--vllm-pd-disaggregation``, one ``--prefill``/``--decode`` per worker):
    the router sends each request to a prefill worker, then to a decode worker. Behind
    llama-servers no KV cache moves (they have no KV connector): the decode worker
    computes the prompt again, so both pools count its tokens.
    """
    argv = [
        str(install.vllm_router_bin),
        "--host",
        "{host}",
        "--port",
        "{port}",
        *_worker_args(workers, prefill),
        "--policy",
        policy,
        "--prometheus-host",
        HOST,
        "--prometheus-port",
        str(metrics_port),
        "--health-check-interval-secs",
        "300",
        "--log-level",
        "warning",
    ]
    command = _command(
        "vllm-router",
        argv,
        offline_env(install),
        VLLM_ROUTER_START_LIMIT_S,
        ready_url="http://{host}:{port}/readiness",
        port=port,
    )
    return Launch("vllm-router", model, command, warm=("chat",))


def _worker_args(workers: list[str], prefill: int) -> list[str]:
    """``--worker-urls W...``, or with ``prefill`` > 0 the prefill/decode form."""
    if not prefill:
        return ["--worker-urls", *workers]
    args = ["--vllm-pd-disaggregation"]
    for i, url in enumerate(workers):
        args += ["--prefill" if i < prefill else "--decode", url]
    return args


@dataclass
class Fleet:
    """vLLM's router in front of replicas: where to reach each, and how to stop them all."""

    router: Server
    metrics_url: str  # the router's own Prometheus page (its second port)
    replicas: list[Server]
    prefill: int = 0  # the first replicas that are a prefill pool (0: none, all replicas)

    @property
    def url(self) -> str:
        return self.router.url

    def page_list(self, interval_s: float | None = None) -> str:
        """``--llm-server-metrics``'s list of pages for this fleet: the router's own page and
        each replica's, a replica named by its URL's ``host:port`` (the default name)."""
        items = [f"router={self.metrics_url}"]
        for i, server in enumerate(self.replicas):
            role = "replica" if not self.prefill else "prefill" if i < self.prefill else "decode"
            items.append(f"{role}={server.url}/metrics")
        if interval_s is not None:
            items.append(f"{interval_s:g}")
        return ",".join(items)

    def stop(self) -> None:
        """The router first (no request finds a replica gone), then the replicas."""
        for server in (self.router, *self.replicas):
            server.stop()


def start_vllm_router_fleet(
    install: Install,
    replicas: int = FLEET_REPLICAS,
    policy: str = VLLM_ROUTER_POLICY,
    *,
    prefill: int = 0,
    replica: str = "llama-server",
) -> Fleet:
    """``replicas`` servers of kind ``replica`` (``llama-server`` or ``vllm``: one of
    :data:`STARTERS`, started one at a time) and vLLM's router in front of them
    (:func:`vllm_router_launch`; ``prefill``: its prefill/decode mode), each started and
    warmed up; what started is stopped again when a later one fails (:class:`ServerError`)."""
    started: list[Server] = []
    try:
        for _ in range(replicas):
            started.append(STARTERS[replica](install))
        metrics_port = free_port(HOST)
        launch = vllm_router_launch(
            install,
            [r.url for r in started],
            metrics_port,
            policy=policy,
            model=started[0].model,
            prefill=prefill,
        )
        router = start(launch, install)
    except BaseException:
        for server in started:
            server.stop()
        raise
    return Fleet(router, f"http://{HOST}:{metrics_port}/metrics", started, prefill)


STARTERS: dict[str, Callable[..., Server]] = {
    "vllm": start_vllm,
    "transformers": start_transformers,
    "llama-server": start_llama_server,
    "vllm-embeddings": start_vllm_embeddings,
    "vllm-paths": start_vllm_paths,
    "llama-server-embeddings": start_llama_server_embeddings,
    "vllm-blank": start_vllm_blank,
    "vllm-agentic": start_vllm_agentic,
    "transformers-blank": start_transformers_blank,
}


def main() -> None:
    """``python conformance/servers.py DIR SERVER``: serve until Enter or Ctrl-C.

    SERVER is ``vllm``, ``transformers``, ``llama-server``, ``vllm-embeddings``
    (a pooling vLLM), ``vllm-paths`` (LoRA adapters and tool calls),
    ``llama-server-embeddings`` (with ``--embeddings``), ``vllm-agentic`` (cached
    tokens in each usage), ``vllm-blank`` or
    ``transformers-blank`` (the blank model), ``vllm-router-fleet`` (vLLM's router in
    front of two llama-servers; it prints the ``--llm-server-metrics`` list of pages).
    For looking at a server by hand (curl, the plugin) with the tier's exact settings. Run it with
    the Python that has pytest-llmperf installed (the servers' own venvs lack it):
    the server is started by the plugin's ``ManagedServer``, its log in ``DIR/logs``.
    """
    import argparse

    parser = argparse.ArgumentParser(description=main.__doc__)
    parser.add_argument("install", type=Path)
    parser.add_argument("server", choices=sorted([*STARTERS, "vllm-router-fleet"]))
    parser.add_argument("--port", type=int, default=None)
    args = parser.parse_args()
    if args.server == "vllm-router-fleet":
        fleet = start_vllm_router_fleet(Install(args.install.resolve()))
        print(f"vllm-router at {fleet.url}, its page {fleet.metrics_url}")
        print(f"--llm-server-metrics={fleet.page_list()}", flush=True)
        try:
            input()
        except (KeyboardInterrupt, EOFError):
            pass
        finally:
            fleet.stop()
        return
    server = STARTERS[args.server](Install(args.install.resolve()), args.port)
    print(f"{server.name} ready at {server.url} in {server.ready_s:.1f} s (model {server.model})")
    print(f"log: {server.log_path}; press Enter or Ctrl-C to stop", flush=True)
    try:
        input()
    except (KeyboardInterrupt, EOFError):
        pass
    finally:
        server.stop()


if __name__ == "__main__":
    main()
