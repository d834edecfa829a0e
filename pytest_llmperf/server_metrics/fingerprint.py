"""A session's comparability fingerprint: which server, configured how, measured from where.

A baseline saved against one server configuration says nothing about another:
the same vLLM with ``--max-model-len 1024`` instead of 2048 has half the KV
capacity per request, another version a different scheduler, another client
machine another load generator. :func:`session_fingerprint` records, best
effort and bounded, what the server tells about itself:

- **server** ``family`` (``vllm``, ``sglang``, ``llama.cpp``, ``tgi``, ``sim``,
  ``unknown``) and ``version`` (vLLM ``GET /version``; llama.cpp ``GET /props``
  ``build_info``; SGLang ``GET /server_info`` (older: ``/get_server_info``)
  ``version``; TGI ``GET /info`` ``version``; the simulator ``GET /version``),
  ``software`` (the ``Server`` header);
- **model**: the model in use and its ``GET /v1/models`` card (``max_model_len``,
  ``owned_by``, ``root``, ``parent``; llama.cpp's ``meta``: ``n_ctx``,
  ``n_params``, …), and every served id (``models``: adapters included);
- **engine** configuration where the server exports it: vLLM's
  ``vllm:cache_config_info`` labels from ``/metrics`` (block size, prefix
  caching, KV blocks, cache dtype, …; ``engines`` = how many engines export
  it), llama.cpp's ``total_slots`` and per-slot ``n_ctx`` (``/props``),
  SGLang's server arguments that shape performance, TGI's token limits, the
  simulator's profile name;
- **chat_template** ``sha256``: llama.cpp's template text (``/props``
  ``chat_template``). vLLM has no endpoint that returns its template, but its
  ``POST /tokenize`` renders a chat (``messages``) through it: the hash of the
  token strings of a fixed three-message chat changes when the template or the
  tokenizer does (so does the simulator's, which has no template);
- **client**: the machine that measured: OS, architecture, usable CPUs,
  Python ``major.minor`` and implementation are compared; the full platform
  string, full Python version, CPU model, pytest-llmperf version and a hash of
  the hostname are kept for the record but never compared (CI runners change
  hostname and kernel every job). The hostname is stored hashed (SHA-256, 16
  hex digits): a baseline file is often committed to a repository, and the
  machine's name is not the repository's business; the hash still tells
  "same machine" (a guessable name stays guessable: it is a pseudonym, not a
  secret). No pid, no user name, no path.

Every probe is a metadata call (:mod:`pytest_llmperf.client.metadata`) without
retries, each bounded by ``timeout`` (3 s) and all by ``total`` (10 s); the
first that does not answer in time or cannot connect ends the probing. What
the preflight already asked (``GET /v1/models``, ``/version``, ``/metrics``: a
:class:`~pytest_llmperf.client.preflight_result.PreflightResult`) is read from
its answers instead of asked again. What could not be read is listed in
``notes``; nothing here raises.

:func:`fingerprint_diff` names what differs (``model.max_model_len: 2048 ->
1024``) among the fields both sides know (a field one side could not read is
unknown, not different), ignoring the record-only fields and ``collected_at``;
KV capacity derived from memory profiling (``num_gpu_blocks`` and what follows
from it) is equal within 1%. :func:`comparability` turns that into the
``comparable`` / ``differs`` of a baseline or history comparison.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import platform
import socket
import sys
import threading
import time
from collections.abc import Iterable, Iterator, Mapping
from datetime import UTC, datetime
from typing import Any

from pytest_llmperf.client.endpoint import Endpoint
from pytest_llmperf.client.metadata import (
    Answer,
    CallFailure,
    CallLimits,
    MetadataCallError,
    MetadataClient,
)
from pytest_llmperf.client.preflight_result import (
    METRICS,
    MODELS,
    VERSION,
    Outcome,
    PreflightResult,
)
from pytest_llmperf.errors import LlmPerfUsageError
from pytest_llmperf.redaction import scrub
from pytest_llmperf.server_metrics.summary import ServerFamily

__all__ = [
    "FINGERPRINT_VERSION",
    "RECORD_ONLY",
    "client_fingerprint",
    "comparability",
    "comparability_text",
    "fingerprint_diff",
    "prefix_caching",
    "session_fingerprint",
]

FINGERPRINT_VERSION = 1
CALL_TIMEOUT_S = 3.0
TOTAL_TIMEOUT_S = 10.0
_BODY_LIMIT = 4 << 20  # /metrics of a big vLLM deployment, /props with its template
# Kept for the record, never compared (paths into the flattened fingerprint; a prefix
# covers what is under it).
RECORD_ONLY = (
    "fingerprint_version",
    "collected_at",
    "notes",
    "chat_template.from",
    "client.platform",
    "client.python_full",
    "client.cpu_model",
    "client.llmperf",
    "client.hostname_sha256",
    "client.pid",
)
# Derived from memory profiling, which moves by a few blocks between two starts of the
# same server: equal within this relative tolerance.
_NEAR = {
    "engine.cache_config.num_gpu_blocks": 0.01,
    "engine.cache_config.num_cpu_blocks": 0.01,
    "engine.cache_config.kv_cache_size_tokens": 0.01,
    "engine.cache_config.kv_cache_max_concurrency": 0.01,
}
# SGLang's server arguments that shape performance (GET /server_info).
_SGLANG_ARGS = (
    "context_length",
    "dtype",
    "kv_cache_dtype",
    "quantization",
    "mem_fraction_static",
    "max_running_requests",
    "max_total_tokens",
    "max_prefill_tokens",
    "chunked_prefill_size",
    "schedule_policy",
    "schedule_conservativeness",
    "page_size",
    "tp_size",
    "dp_size",
    "pp_size",
    "ep_size",
    "attention_backend",
    "sampling_backend",
    "disable_radix_cache",
    "enable_mixed_chunk",
    "disable_cuda_graph",
    "cuda_graph_max_bs",
    "speculative_algorithm",
    "speculative_num_steps",
    "speculative_num_draft_tokens",
    "max_total_num_tokens",
    "max_req_input_len",
)
_TGI_INFO = (
    "model_id",
    "model_sha",
    "model_dtype",
    "max_concurrent_requests",
    "max_best_of",
    "max_stop_sequences",
    "max_input_tokens",
    "max_input_length",
    "max_total_tokens",
    "max_batch_total_tokens",
    "max_batch_prefill_tokens",
    "max_waiting_tokens",
    "max_batch_size",
    "validation_workers",
)
_CARD_KEYS = ("max_model_len", "owned_by", "root", "parent")
# The fixed chat rendered by vLLM's /tokenize: user/assistant/user, no system turn (some
# templates refuse one).
_PROBE_CHAT = (
    {"role": "user", "content": "Which server is this?"},
    {"role": "assistant", "content": "A fingerprint."},
    {"role": "user", "content": "Thank you."},
)
_OWNERS = {
    "vllm": ServerFamily.VLLM,
    "sglang": ServerFamily.SGLANG,
    "llamacpp": ServerFamily.LLAMACPP,
    "pytest-llmperf-sim": ServerFamily.SIM,
}
_METRIC_PREFIXES = (
    ("vllm:", ServerFamily.VLLM),
    ("sglang:", ServerFamily.SGLANG),
    ("llamacpp:", ServerFamily.LLAMACPP),
    ("tgi_", ServerFamily.TGI),
)


def _sha(text: str | bytes, digits: int = 16) -> str:
    data = text.encode("utf-8") if isinstance(text, str) else text
    return hashlib.sha256(data).hexdigest()[:digits]


def client_fingerprint() -> dict[str, Any]:
    """The measuring machine (see the module's doc for what is compared)."""
    try:
        cpus = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cpus = os.cpu_count() or 0
    try:
        from importlib.metadata import version

        llmperf = version("pytest-llmperf")
    except Exception:
        llmperf = "unknown"
    return {
        "os": platform.system(),
        "machine": platform.machine(),
        "cpu_count": cpus,
        "python": f"{sys.version_info.major}.{sys.version_info.minor}",
        "implementation": platform.python_implementation(),
        "platform": platform.platform(),
        "python_full": platform.python_version(),
        "cpu_model": _cpu_model(),
        "llmperf": llmperf,
        "hostname_sha256": _sha(socket.gethostname()),
    }


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                if line.lower().startswith(("model name", "hardware", "cpu model")):
                    return line.split(":", 1)[1].strip()[:100]
    except OSError:
        pass
    return platform.processor()[:100]


# -- probing the server ------------------------------------------------------------------


class _Prober:
    """The probes of one fingerprint, each bounded; the first that cannot connect or
    runs out of time ends them (``dead``)."""

    def __init__(
        self,
        meta: MetadataClient,
        deadline: float,
        call_s: float,
        answered: Mapping[str, Outcome] | None = None,
    ) -> None:
        self.meta = meta
        self.answered = dict(answered or {})  # the preflight's answers, by call name
        self.limits = meta.limits
        self.deadline = deadline
        self.call_s = call_s
        self.notes: list[str] = []
        self.dead = False
        self.software: str | None = None

    async def get(self, url: str, name: str, *, body: Any = None) -> Any:
        """The JSON (or text, for ``/metrics``) of a 200 answer; None otherwise (noted).
        What the preflight asked (``answered``) is read from its answer, not asked again."""
        if self.dead:
            return None
        known = self.answered.get(name)
        try:
            if isinstance(known, MetadataCallError):
                raise known
            answer = known if known is not None else await self._ask(url, name, body)
        except MetadataCallError as exc:
            self.notes.append(f"{name}: {exc.message}")
            if exc.failure in (CallFailure.UNREACHABLE, CallFailure.OUT_OF_TIME):
                self.dead = True
            return None
        if answer is None:
            return None
        self._headers(answer)
        if answer.status != 200:
            said = f": {answer.message[:120]}" if answer.message else ""
            self.notes.append(f"{name}: HTTP {answer.status}{said}")
            return None
        if name == METRICS:
            return answer.body.decode("utf-8", "replace")
        try:
            return answer.json()
        except ValueError:
            self.notes.append(f"{name}: not JSON")
            return None

    async def _ask(self, url: str, name: str, body: Any) -> Answer | None:
        """One call within what is left of the fingerprint's time (None: none left)."""
        left = self.deadline - time.monotonic()
        if left <= 0.05:
            self.notes.append(f"{name}: not asked (the fingerprint's time was up)")
            self.dead = True
            return None
        self.meta.limits = self.limits.within(min(self.call_s, left))
        method = "POST" if body is not None else "GET"
        return await self.meta.call(method, url, json=body, retry=False, max_bytes=_BODY_LIMIT)

    def _headers(self, answer: Answer) -> None:
        server = answer.headers.get("server")
        if server and not self.software:
            self.software = server[:200]


def session_fingerprint(
    endpoint: Endpoint,
    *,
    metrics_text: str | None = None,
    timeout: float = CALL_TIMEOUT_S,
    total: float = TOTAL_TIMEOUT_S,
    preflight: PreflightResult | None = None,
) -> dict[str, Any]:
    """The fingerprint of ``endpoint``'s server and of this machine (see the module's doc).

    ``metrics_text``: the server's ``/metrics`` page if the caller already has it (a
    scrape); None: fetched here where it can tell something (vLLM, an unknown family);
    ``""``: not read. ``preflight``: what the server answered at preflight
    (``GET /v1/models``, ``/version``, ``/metrics``): read from there, not asked again
    (a failed answer is noted as a failed probe would be). Synchronous, on a private
    event loop in a thread of its own (safe inside another loop's thread); never raises.
    """
    box: list[dict[str, Any]] = []
    answered = preflight.answered() if preflight is not None else {}

    def run() -> None:
        try:
            taking = _fingerprint(endpoint, metrics_text, timeout, total, answered)
            box.append(asyncio.run(taking))
        except BaseException as exc:  # best effort: never a reason to fail the session
            text = scrub(f"{type(exc).__name__}: {exc}", *endpoint.secrets)[:300]
            box.append(_empty(endpoint, [f"the fingerprint could not be taken ({text})"]))

    thread = threading.Thread(target=run, name="llmperf-fingerprint", daemon=True)
    thread.start()
    thread.join(total + 5.0)
    if box:
        return box[0]
    return _empty(endpoint, [f"the server's probes did not end within {total:g} s"])


def _empty(endpoint: Endpoint, notes: list[str]) -> dict[str, Any]:
    return {
        "fingerprint_version": FINGERPRINT_VERSION,
        "collected_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "server": {"family": ServerFamily.UNKNOWN.value, "version": None, "software": None},
        "model": {"id": endpoint.model},
        "models": [],
        "engine": {},
        "chat_template": None,
        "client": client_fingerprint(),
        "notes": notes,
    }


async def _fingerprint(
    endpoint: Endpoint,
    metrics_text: str | None,
    timeout: float,
    total: float,
    answered: Mapping[str, Outcome],
) -> dict[str, Any]:
    out = _empty(endpoint, [])
    limits = CallLimits.of(endpoint.timeouts).within(timeout)
    async with MetadataClient(endpoint, limits=limits) as meta:
        probe = _Prober(meta, time.monotonic() + total, timeout, answered)
        await _probe(probe, endpoint, out, metrics_text)
        out["server"]["software"] = probe.software
        out["notes"] = [scrub(n, *endpoint.secrets) for n in probe.notes]
    return out


async def _probe(
    probe: _Prober, endpoint: Endpoint, out: dict[str, Any], metrics_text: str | None
) -> None:
    meta = probe.meta
    server, engine = out["server"], out["engine"]
    listing = await probe.get(meta.url("/models"), MODELS)
    card = _read_models(listing, endpoint.model, out)
    version = await probe.get(meta.root_url("/version"), VERSION)
    if isinstance(version, dict) and isinstance(version.get("version"), (str, int, float)):
        server["version"] = str(version["version"])[:100]
        if isinstance(version.get("profile"), str):
            engine["profile"] = version["profile"][:100]  # the simulator's profile name
    family = _family(card, server["version"], probe.software, metrics_text)
    if family in (ServerFamily.LLAMACPP, ServerFamily.UNKNOWN) and not server["version"]:
        props = await probe.get(meta.root_url("/props"), "GET /props")
        if isinstance(props, dict) and "build_info" in props:
            family = ServerFamily.LLAMACPP
            _read_props(props, out)
    if family is ServerFamily.SGLANG:
        info = await probe.get(meta.root_url("/server_info"), "GET /server_info")
        if not isinstance(info, dict):
            info = await probe.get(meta.root_url("/get_server_info"), "GET /get_server_info")
        if isinstance(info, dict):
            _read_sglang(info, out)
    if family is ServerFamily.UNKNOWN and not server["version"]:
        info = await probe.get(meta.root_url("/info"), "GET /info")
        if isinstance(info, dict) and "model_id" in info and "version" in info:
            family = ServerFamily.TGI
            server["version"] = str(info["version"])[:100]
            engine.update({k: info[k] for k in _TGI_INFO if info.get(k) is not None})
    if metrics_text is None and family in (ServerFamily.VLLM, ServerFamily.UNKNOWN):
        text = await probe.get(meta.root_url("/metrics"), METRICS)
        metrics_text = text if isinstance(text, str) else ""
    if metrics_text:
        found = _read_metrics(metrics_text, out, probe.notes)
        if family is ServerFamily.UNKNOWN and found is not None:
            family = found
    if family in (ServerFamily.VLLM, ServerFamily.SIM) and out["model"].get("id"):
        await _rendered_template(probe, out)
    server["family"] = family.value


def _read_models(listing: Any, model: str | None, out: dict[str, Any]) -> dict[str, Any]:
    """The card of the model in use (``model``, else the first), and every served id."""
    data = listing.get("data") if isinstance(listing, dict) else None
    if not isinstance(data, list):
        return {}
    cards = [c for c in data if isinstance(c, dict) and isinstance(c.get("id"), str)]
    out["models"] = sorted({str(c["id"])[:200] for c in cards})
    card = next((c for c in cards if c["id"] == model), cards[0] if cards else {})
    if not card:
        return {}
    found: dict[str, Any] = {"id": str(card["id"])[:200]}
    for key in _CARD_KEYS:
        if card.get(key) is not None:
            found[key] = card[key] if isinstance(card[key], (int, float)) else str(card[key])
    meta = card.get("meta")
    if isinstance(meta, dict):  # llama.cpp: n_ctx, n_ctx_train, n_params, size, ftype, …
        found["meta"] = {k: v for k, v in meta.items() if isinstance(v, (str, int, float))}
    out["model"] = found
    return card


def _family(
    card: Mapping[str, Any], version: str | None, software: str | None, metrics: str | None
) -> ServerFamily:
    if version and version.startswith("pytest-llmperf-sim"):
        return ServerFamily.SIM
    owner = card.get("owned_by")
    if isinstance(owner, str) and owner in _OWNERS:
        return _OWNERS[owner]
    if software and "llama.cpp" in software.lower():
        return ServerFamily.LLAMACPP
    if metrics:
        for prefix, family in _METRIC_PREFIXES:
            if f"\n{prefix}" in f"\n{metrics}":
                return family
    return ServerFamily.UNKNOWN


def _read_props(props: Mapping[str, Any], out: dict[str, Any]) -> None:
    """llama.cpp's ``/props``: ``build_info`` as the version, slots and per-slot context as
    the engine, the chat template's hash."""
    out["server"]["version"] = str(props["build_info"])[:100]
    engine = out["engine"]
    if isinstance(props.get("total_slots"), int):
        engine["total_slots"] = props["total_slots"]
    settings = props.get("default_generation_settings")
    if isinstance(settings, dict) and isinstance(settings.get("n_ctx"), int):
        engine["n_ctx"] = settings["n_ctx"]
    template = props.get("chat_template")
    if isinstance(template, str) and template:
        out["chat_template"] = {"sha256": _sha(template), "from": "GET /props chat_template"}


def _read_sglang(info: Mapping[str, Any], out: dict[str, Any]) -> None:
    if info.get("version") is not None:
        out["server"]["version"] = str(info["version"])[:100]
    for key in _SGLANG_ARGS:
        value = info.get(key)
        if isinstance(value, (str, int, float, bool)):
            out["engine"][key] = value


def _read_metrics(text: str, out: dict[str, Any], notes: list[str]) -> ServerFamily | None:
    """vLLM's ``vllm:cache_config_info`` labels into ``engine.cache_config``; the family
    the metric names say (None: none known)."""
    from prometheus_client.parser import text_string_to_metric_families

    found: ServerFamily | None = None
    configs: list[dict[str, str]] = []
    try:
        for metric in text_string_to_metric_families(text):
            if found is None:
                found = next((f for p, f in _METRIC_PREFIXES if metric.name.startswith(p)), None)
            if metric.name == "vllm:cache_config_info":
                configs += [dict(s.labels) for s in metric.samples]
    except Exception as exc:  # garbage: what was read so far stands
        notes.append(f"/metrics: not Prometheus text ({str(exc)[:120]})")
    if configs:
        first = {k: v for k, v in configs[0].items() if k != "engine" and not k.startswith("_")}
        out["engine"]["cache_config"] = dict(sorted(first.items()))
        out["engine"]["engines"] = len(configs)
    return found


async def _rendered_template(probe: _Prober, out: dict[str, Any]) -> None:
    """vLLM (and the simulator): the hash of a fixed chat as ``POST /tokenize`` renders it
    through the server's chat template and tokenizer."""
    body = {
        "model": out["model"]["id"],
        "messages": list(_PROBE_CHAT),
        "add_generation_prompt": True,
        "return_token_strs": True,
    }
    got = await probe.get(probe.meta.root_url("/tokenize"), "POST /tokenize", body=body)
    if not isinstance(got, dict):
        return
    pieces = got.get("token_strs") or got.get("tokens")
    if isinstance(pieces, list) and pieces:
        out["chat_template"] = {
            "sha256": _sha(json.dumps(pieces, ensure_ascii=False)),
            "from": "POST /tokenize of a fixed 3-message chat (template and tokenizer)",
        }


# -- comparing ---------------------------------------------------------------------------


def prefix_caching(fingerprint: Mapping[str, Any] | None) -> bool | None:
    """Whether the server's engine configuration says prefix caching is on: vLLM's
    ``engine.cache_config.enable_prefix_caching`` (a label: ``"True"``/``"False"``),
    SGLang's ``engine.disable_radix_cache`` (its prefix cache is the radix cache); None
    where the fingerprint does not say (llama.cpp, TGI, the simulator, nothing read)."""
    engine = (fingerprint or {}).get("engine")
    if not isinstance(engine, Mapping):
        return None
    config = engine.get("cache_config")
    if isinstance(config, Mapping) and "enable_prefix_caching" in config:
        return str(config["enable_prefix_caching"]).strip().lower() == "true"
    disabled = engine.get("disable_radix_cache")
    if isinstance(disabled, bool):
        return not disabled
    return None


def _flatten(value: Any, path: str = "") -> Iterator[tuple[str, Any]]:
    if isinstance(value, Mapping):
        for key in value:
            yield from _flatten(value[key], f"{path}.{key}" if path else str(key))
    else:
        yield path, value


def _record_only(path: str, ignore: Iterable[str]) -> bool:
    return any(path == p or path.startswith(p + ".") for p in (*RECORD_ONLY, *ignore))


def _near(path: str, a: Any, b: Any) -> bool:
    tolerance = _NEAR.get(path)
    if tolerance is None:
        return False
    try:
        x, y = float(a), float(b)
    except (TypeError, ValueError):
        return False
    return abs(x - y) <= tolerance * max(abs(x), abs(y))


def _shown(value: Any) -> str:
    if isinstance(value, str):
        return value if len(value) <= 60 else value[:57] + "..."
    text = json.dumps(value, sort_keys=True, default=str)
    return text if len(text) <= 60 else text[:57] + "..."


def fingerprint_diff(
    a: Mapping[str, Any], b: Mapping[str, Any], *, ignore: Iterable[str] = ()
) -> list[str]:
    """What differs from ``a`` (the baseline's) to ``b`` (this session's), one line per
    field: ``model.max_model_len: 2048 -> 1024``. Fields that only one side knows (absent
    or null on the other) are not differences; record-only fields (:data:`RECORD_ONLY`)
    and the paths in ``ignore`` (prefixes, e.g. ``"server"`` for an A/B pair) are never
    compared; KV capacity from memory profiling is equal within 1%."""
    ignored = tuple(ignore)
    left = {k: v for k, v in _flatten(a) if v is not None and not _record_only(k, ignored)}
    right = {k: v for k, v in _flatten(b) if v is not None and not _record_only(k, ignored)}
    out: list[str] = []
    for path in sorted(left.keys() & right.keys()):
        x, y = left[path], right[path]
        if x == y or _near(path, x, y):
            continue
        if isinstance(x, list) and isinstance(y, list):
            gone = [v for v in x if v not in y]
            new = [v for v in y if v not in x]
            if gone or new:
                parts = ([f"-{_shown(v)}" for v in gone] + [f"+{_shown(v)}" for v in new])[:6]
                out.append(f"{path}: {', '.join(parts)}")
                continue
        out.append(f"{path}: {_shown(x)} -> {_shown(y)}")
    return out


def comparability(
    stored: Mapping[str, Any] | None,
    current: Mapping[str, Any] | None,
    *,
    strict: bool = False,
    source: str = "the baseline",
    ignore: Iterable[str] = (),
) -> dict[str, Any]:
    """``{"comparable": bool | None, "differs": [...], "note": str}`` of a comparison of a
    run measured under ``current`` (this session's fingerprint) with one measured under
    ``stored``: None when either is unknown (``note`` says which: an older baseline has
    no fingerprint, never an error). ``strict`` (``--llm-baseline-strict``): a difference
    is a :class:`~pytest_llmperf.errors.LlmPerfUsageError` naming ``source`` and what
    differs."""
    if not stored:
        return {"comparable": None, "differs": [], "note": f"no fingerprint stored in {source}"}
    if not current:
        return {"comparable": None, "differs": [], "note": "no fingerprint of this session"}
    differs = fingerprint_diff(stored, current, ignore=ignore)
    if not differs:
        return {"comparable": True, "differs": [], "note": "same server fingerprint"}
    if strict:
        raise LlmPerfUsageError(
            f"measured on a different server or machine: {'; '.join(differs)} "
            "(--llm-baseline-strict; without it the comparison is made and flagged "
            "comparable: false)",
            where=source,
        )
    return {
        "comparable": False,
        "differs": differs,
        "note": "the server's fingerprint differs from the baseline's",
    }


def comparability_text(result: Mapping[str, Any] | None) -> str:
    """For a failure message: ``NOT COMPARABLE, the server differs: model.max_model_len:
    2048 -> 1024``; empty unless ``comparable`` is false."""
    if not result or result.get("comparable") is not False:
        return ""
    differs = list(result.get("differs") or [])
    shown = "; ".join(differs[:5]) + (f"; +{len(differs) - 5} more" if len(differs) > 5 else "")
    return f"NOT COMPARABLE, the server or machine differs: {shown}"
