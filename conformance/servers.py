"""Start and stop the real servers of the conformance tier, on 127.0.0.1 only.

vLLM's CPU build and ``transformers serve`` run from their own virtual
environments; llama.cpp's ``llama-server`` is one binary built from the
``llama-cpp-python`` sdist's vendored sources (``install_llama_server.sh``)
serving the tiny model converted to GGUF (``build_gguf.py``).

Each server runs from its own virtual environment under the install folder
(``conformance/install.sh``) in a new process group, so teardown can kill
the whole group: vLLM forks an engine-core process that outlives a plain
``terminate()`` of the API server. Readiness is polled with a bounded
timeout; a server that dies or never answers raises :class:`ServerError`
with the tail of its log, which is where the reason is.

Everything runs offline: ``HF_HUB_OFFLINE=1`` and a private, empty
``HF_HOME`` (so nothing on the machine's Hugging Face cache leaks in and
nothing is fetched).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "Install",
    "Server",
    "ServerError",
    "free_port",
    "start_llama_server",
    "start_llama_server_embeddings",
    "start_transformers",
    "start_transformers_blank",
    "start_vllm",
    "start_vllm_blank",
    "start_vllm_embeddings",
    "start_vllm_paths",
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

    @property
    def pid_file(self) -> Path:
        """Process groups of servers still running; ``run.sh`` kills what is left at exit."""
        return self.root / "running.pids"

    def remember(self, pgid: int) -> None:
        with self.pid_file.open("a") as f:
            f.write(f"{pgid}\n")

    def forget(self, pgid: int) -> None:
        if self.pid_file.exists():
            kept = [ln for ln in self.pid_file.read_text().split() if ln != str(pgid)]
            self.pid_file.write_text("".join(f"{ln}\n" for ln in kept))

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
    "transformers-blank": ("transformers venv", "blank model"),
}


@dataclass
class Server:
    """A running server: where to reach it and how to stop it."""

    name: str
    port: int
    model: str
    proc: subprocess.Popen[bytes]
    log_path: Path
    install: Install
    started_s: float = 0.0  # seconds from launch to ready

    @property
    def url(self) -> str:
        return f"http://{HOST}:{self.port}"

    def log_tail(self, lines: int = 40) -> str:
        return log_tail(self.log_path, lines)

    def stop(self) -> None:
        """SIGTERM the process group, then SIGKILL it after a grace period."""
        stop_group(self.proc)
        self.install.forget(self.proc.pid)


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((HOST, 0))
        return int(s.getsockname()[1])


def log_tail(path: Path, lines: int = 40) -> str:
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return "(no log)"
    return "\n".join(text.splitlines()[-lines:])


def stop_group(proc: subprocess.Popen[bytes]) -> None:
    """End ``proc``'s whole process group; never raises, never waits unbounded."""
    if proc.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=STOP_GRACE_S)
    # children (vLLM's engine core) may outlive the leader: kill what is left
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=STOP_GRACE_S)


def offline_env(install: Install, **extra: str) -> dict[str, str]:
    """The servers' environment: offline, a private HF home, no proxies."""
    env = {k: v for k, v in os.environ.items() if "proxy" not in k.lower()}
    install.hf_home.mkdir(parents=True, exist_ok=True)
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


def launch(
    name: str, argv: list[str], env: dict[str, str], install: Install
) -> tuple[subprocess.Popen[bytes], Path]:
    """Start ``argv`` in a new session (its own process group), output to a log file."""
    install.logs.mkdir(parents=True, exist_ok=True)
    log_path = install.logs / f"{name}-{int(time.time())}.log"
    with log_path.open("wb") as log:
        log.write(("$ " + " ".join(argv) + "\n").encode())
        log.flush()
        proc = subprocess.Popen(
            argv,
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env=env,
            start_new_session=True,
        )
    install.remember(proc.pid)  # its own session: pgid == pid
    return proc, log_path


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


def wait_ready(server: Server, ready: Callable[[], bool], limit_s: float, t0: float) -> None:
    """Poll ``ready`` until it holds; stop the server and raise with its log if it never does."""
    deadline = t0 + limit_s
    while True:
        if server.proc.poll() is not None:
            tail = server.log_tail()
            server.stop()
            raise ServerError(
                f"{server.name} exited with status {server.proc.returncode} before it was "
                f"ready; log {server.log_path}:\n{tail}"
            )
        if ready():
            server.started_s = time.monotonic() - t0
            return
        if time.monotonic() > deadline:
            tail = server.log_tail()
            server.stop()
            raise ServerError(
                f"{server.name} not ready within {limit_s:g} s; log {server.log_path}:\n{tail}"
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


def _warm(server: Server, apis: tuple[str, ...] = ("chat", "completions")) -> None:
    """:func:`warm_up`, stopping the server if it fails (the caller gets only the error)."""
    try:
        warm_up(server, apis)
    except ServerError as exc:
        server.stop()
        raise ServerError(f"{exc}\nlog {server.log_path}:\n{server.log_tail()}") from None


# Bucket bounds (s) for vLLM's request_latency family on the conformance tier's tiny model.
REQUEST_LATENCY_BUCKETS_S = [0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10, 60]


def start_vllm(
    install: Install,
    port: int | None = None,
    *,
    max_model_len: int = 1024,
    paths: bool = False,
    blank: bool = False,
) -> Server:
    """vLLM's OpenAI server on the tiny model (CPU, float32, eager, 1024-token context).

    ``VLLM_CPU_KVCACHE_SPACE=1`` (GiB) keeps it near 2 GB; ready when
    ``GET /v1/models`` answers 200, which vLLM only does once the engine is up.
    ``VLLM_SERVER_DEV_MODE=1`` mounts its development routes (``POST
    /reset_prefix_cache``, which ``--llm-reset-cache`` uses) and
    ``--enable-per-request-metrics`` adds each request's server timings to its
    response (the TTFT split); ``max_model_len`` makes a second configuration
    for the comparability check.

    ``paths``: also serve the request paths of issue 28 (:func:`start_vllm_paths`);
    ``blank``: serve the blank model instead (:func:`start_vllm_blank`).
    """
    port = port or free_port()
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
        HOST,
        "--port",
        str(port),
    ]
    if paths:
        argv += vllm_paths_args(install)
    env = offline_env(install, VLLM_CPU_KVCACHE_SPACE="1", VLLM_SERVER_DEV_MODE="1")
    t0 = time.monotonic()
    log_name = "vllm-paths" if paths else "vllm-blank" if blank else "vllm"
    proc, log_path = launch(log_name, argv, env, install)
    name = "vLLM (LoRA, tools)" if paths else "vLLM (blank model)" if blank else "vLLM"
    server = Server(name, port, str(model), proc, log_path, install)
    url = f"{server.url}/v1/models"
    wait_ready(server, lambda: http_json("GET", url, timeout=5.0)[0] == 200, VLLM_START_LIMIT_S, t0)
    _warm(server)
    return server


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


def start_vllm_embeddings(install: Install, port: int | None = None) -> Server:
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
    port = port or free_port()
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
        HOST,
        "--port",
        str(port),
    ]
    env = offline_env(install, VLLM_CPU_KVCACHE_SPACE="1")
    t0 = time.monotonic()
    proc, log_path = launch("vllm-embeddings", argv, env, install)
    server = Server("vLLM (embeddings)", port, str(install.model), proc, log_path, install)
    url = f"{server.url}/v1/models"
    wait_ready(server, lambda: http_json("GET", url, timeout=5.0)[0] == 200, VLLM_START_LIMIT_S, t0)
    _warm(server, ("embeddings",))
    return server


def start_transformers(install: Install, port: int | None = None, *, blank: bool = False) -> Server:
    """``transformers serve`` pinned to the tiny model (its FORCE_MODEL argument), on the CPU.

    ``/health`` answers as soon as uvicorn runs, before the model is loaded,
    so readiness is a one-token chat request that succeeds. ``blank``: pinned
    to the blank model instead (:func:`start_transformers_blank`).
    """
    port = port or free_port()
    model = str(install.model_blank if blank else install.model)
    argv = [
        str(install.transformers_bin),
        "serve",
        model,
        "--host",
        HOST,
        "--port",
        str(port),
        "--device",
        "cpu",
        "--dtype",
        "float32",
        "--log-level",
        "info",
    ]
    t0 = time.monotonic()
    log_name = "transformers-serve-blank" if blank else "transformers-serve"
    proc, log_path = launch(log_name, argv, offline_env(install), install)
    name = "transformers serve (blank model)" if blank else "transformers serve"
    server = Server(name, port, model, proc, log_path, install)
    probe = {"model": model, "messages": [{"role": "user", "content": "Hi"}], "max_tokens": 1}
    url = f"{server.url}/v1/chat/completions"
    wait_ready(
        server,
        lambda: http_json("POST", url, probe, timeout=30.0)[0] == 200,
        TRANSFORMERS_START_LIMIT_S,
        t0,
    )
    _warm(server)
    return server


def start_transformers_blank(install: Install, port: int | None = None) -> Server:
    """:func:`start_transformers` pinned to the blank model (``build_blank_model.py``): a
    blank reply streams the role chunk and the finish chunk alone, its usage counting
    every token."""
    return start_transformers(install, port, blank=True)


def start_llama_server(
    install: Install,
    port: int | None = None,
    slots: int = LLAMA_SERVER_SLOTS,
    *,
    embeddings: bool = False,
) -> Server:
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
    the model loads, 200 once ready (about a second).

    ``embeddings``: also ``--embeddings --pooling mean``, so that the same
    server answers ``/v1/embeddings`` beside generation (it then caps
    ``--batch-size`` at the 512-token micro-batch: each input must fit in
    one). The chat-only tier runs without, as before.
    """
    port = port or free_port()
    argv = [
        str(install.llama_server_bin),
        "--model",
        str(install.gguf),
        "--host",
        HOST,
        "--port",
        str(port),
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
    t0 = time.monotonic()
    proc, log_path = launch("llama-server", argv, offline_env(install), install)
    server = Server("llama-server", port, str(install.gguf), proc, log_path, install)
    url = f"{server.url}/health"
    wait_ready(
        server, lambda: http_json("GET", url, timeout=5.0)[0] == 200, LLAMA_SERVER_START_LIMIT_S, t0
    )
    _warm(server, ("chat", "completions", "embeddings") if embeddings else ("chat", "completions"))
    return server


def start_llama_server_embeddings(install: Install, port: int | None = None) -> Server:
    """:func:`start_llama_server` with ``--embeddings --pooling mean``."""
    return start_llama_server(install, port, embeddings=True)


STARTERS: dict[str, Callable[..., Server]] = {
    "vllm": start_vllm,
    "transformers": start_transformers,
    "llama-server": start_llama_server,
    "vllm-embeddings": start_vllm_embeddings,
    "vllm-paths": start_vllm_paths,
    "llama-server-embeddings": start_llama_server_embeddings,
    "vllm-blank": start_vllm_blank,
    "transformers-blank": start_transformers_blank,
}


def main() -> None:
    """``python conformance/servers.py DIR SERVER``: serve until Enter or Ctrl-C.

    SERVER is ``vllm``, ``transformers``, ``llama-server``, ``vllm-embeddings``
    (a pooling vLLM), ``vllm-paths`` (LoRA adapters and tool calls),
    ``llama-server-embeddings`` (with ``--embeddings``), ``vllm-blank`` or
    ``transformers-blank`` (the blank model). For looking at a
    server by hand (curl, the plugin) with the tier's exact settings.
    """
    import argparse

    parser = argparse.ArgumentParser(description=main.__doc__)
    parser.add_argument("install", type=Path)
    parser.add_argument("server", choices=sorted(STARTERS))
    parser.add_argument("--port", type=int, default=None)
    args = parser.parse_args()
    server = STARTERS[args.server](Install(args.install.resolve()), args.port)
    print(f"{server.name} ready at {server.url} in {server.started_s:.1f} s (model {server.model})")
    print(f"log: {server.log_path}; press Enter or Ctrl-C to stop", flush=True)
    try:
        input()
    except (KeyboardInterrupt, EOFError):
        pass
    finally:
        server.stop()


if __name__ == "__main__":
    main()
