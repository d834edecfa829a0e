"""The ``--llm-*`` options and their ini twins, parsed and checked in one place.

Each option can be given on the command line or as an ini key of the same
name with underscores (``llm_endpoint = sim``); the command line wins. A bad
value is a usage error naming the option and the value.
"""

from __future__ import annotations

import json
import math
import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import TYPE_CHECKING, Any, TypeVar

from pytest_llmperf.apis.registry import api_choices
from pytest_llmperf.client.affinity import NO_AFFINITY, Affinity, parse_replica_headers
from pytest_llmperf.client.endpoint import Timeouts, normalize_base_url
from pytest_llmperf.errors import LlmPerfUsageError
from pytest_llmperf.server_metrics.source import parse_option
from pytest_llmperf.session_tokenizer import check_tokenizer_option
from pytest_llmperf.specs.slo import DEFAULT_CONFIDENCE, confidence_problem
from pytest_llmperf.workloads.apis import parse_api

if TYPE_CHECKING:
    from pytest_llmperf.managed_server import ServerCommand

__all__ = [
    "DEFAULT_SIM_PROFILE",
    "INCONCLUSIVE_POLICIES",
    "OPTIONS",
    "InconclusivePolicy",
    "LlmPerfOptions",
    "OptionDef",
    "SummaryDetail",
    "WorkerBackend",
    "sim_profile_of",
]

DEFAULT_SIM_PROFILE = "fixed"


class WorkerBackend(StrEnum):
    """Where ``--llm-workers`` runs the load: local processes or Ray actors."""

    LOCAL = "local"
    RAY = "ray"


class InconclusivePolicy(StrEnum):
    """What ``--llm-inconclusive`` makes of a test whose SLOs cannot be judged (a
    ``StrEnum``: equal to, and written as, ``"fail"`` etc.)."""

    FAIL = "fail"  # the default: inconclusive is never a pass
    WARN = "warn"  # pass, with a warning
    SKIP = "skip"


INCONCLUSIVE_POLICIES: tuple[InconclusivePolicy, ...] = tuple(InconclusivePolicy)


class SummaryDetail(StrEnum):
    """``--llm-summary``: how much the terminal's llmperf section says of each test."""

    AUTO = "auto"  # brief under -q, full otherwise
    BRIEF = "brief"  # a line per passed test; every other test, and every warning, in full
    FULL = "full"  # every test's SLO lines and runs


@dataclass(frozen=True)
class OptionDef:
    flag: str
    help: str
    default: str | None = None
    switch: bool = False  # given without a value on the command line (ini: true/false)
    repeat: bool = False  # given once per value on the command line (ini: one per line)

    @property
    def dest(self) -> str:
        return self.flag.lstrip("-").replace("-", "_")


OPTIONS: tuple[OptionDef, ...] = (
    OptionDef(
        "--llm-endpoint",
        "base URL of an OpenAI-compatible server (http://host:8000 or "
        ".../v1); 'sim' or 'sim:PROFILE' for the embedded simulator (the default)",
    ),
    OptionDef("--llm-model", "model name sent in requests (default: first id of GET /v1/models)"),
    OptionDef(
        "--llm-api",
        f"API to drive: {api_choices()} (default chat)",
        "chat",
    ),
    OptionDef(
        "--llm-api-key-env",
        "environment variable holding the API key "
        "(default OPENAI_API_KEY); the key never appears in any output",
        "OPENAI_API_KEY",
    ),
    OptionDef(
        "--llm-ruleset",
        "YAML ruleset file or built-in name (e.g. "
        "mlperf-llama3.1-8b-server) of session-wide targets",
    ),
    OptionDef("--llm-html", "write an HTML report to this path"),
    OptionDef("--llm-json", "write the JSON report to this path"),
    OptionDef(
        "--llm-markdown",
        "write a GitHub-flavoured Markdown summary of the session to this path (also "
        "appended to $GITHUB_STEP_SUMMARY when that is set); 'off': no summary anywhere",
    ),
    OptionDef("--llm-events", "keep each run's event log (SQLite) in this directory"),
    OptionDef("--llm-baseline-save", "store this session's histograms as a baseline file"),
    OptionDef("--llm-baseline-compare", "fail tests that regressed against this baseline file"),
    OptionDef(
        "--llm-baseline-threshold",
        "slowdown allowed against the baseline before a significant change fails: "
        "'10%' (default) or per metric/statistic, e.g. 'ttft.p99=20%,tpot=15%,10%'; "
        "the GPUs' figures only where named, e.g. 'energy_per_output_token_j=10%'",
        "10%",
    ),
    OptionDef("--llm-scale", "multiply every request count and duration (e.g. 0.1)", "1.0"),
    OptionDef(
        "--llm-workers",
        "load-generator workers: N local processes (default 1), or 'ray:N' / 'ray:auto' "
        "Ray actors (the [ray] extra; 'auto' = one per spare CPU of the cluster)",
        "1",
    ),
    OptionDef(
        "--llm-ray-address",
        "with --llm-workers=ray:N: address of an existing Ray cluster (default: "
        "$RAY_ADDRESS, else a local Ray instance started for the session)",
    ),
    OptionDef(
        "--llm-progress",
        "live progress while load runs: auto (default: an updating line on a terminal, a "
        "line every 10 s otherwise), off, or SECONDS between plain lines",
        "auto",
    ),
    OptionDef(
        "--llm-summary",
        "the terminal's llmperf section: full (every test's SLOs and runs), brief (a line "
        "per passed test; in full every test that did not pass, and every warning), or "
        "auto (brief under -q, else full); default full",
        "full",
    ),
    OptionDef(
        "--llm-timeout",
        "per-request timeouts in seconds: S bounds first token, stall and total (connect "
        "min(S, 10)); or set each: connect=S,first_token=S,stall=S,total=S (default 120)",
        "120",
    ),
    OptionDef(
        "--llm-request-extra",
        "extra request fields sent with every request, as a JSON object "
        "(e.g. '{\"top_k\": 5}'); a field the server rejects stops the session before load",
    ),
    OptionDef(
        "--llm-affinity",
        "what a conversation's requests carry so a router keeps it on one replica, any of "
        "(comma-separated): dynamo (X-Dynamo-Session-ID headers), dynamo-session-control "
        "(nvext.session_control body field), sglang (X-SMG-Routing-Key), header:NAME (the "
        "conversation's id in header NAME), token:HEADER (a router's token from response "
        "header HEADER sent back on the conversation's next calls); default none",
    ),
    OptionDef(
        "--llm-replica-header",
        "response header(s) naming the replica that served a request (comma-separated; "
        "'none' to read none); default x-replica-id (the simulator), x-smg-worker-id "
        "(SGLang Model Gateway), x-litellm-model-id (LiteLLM)",
    ),
    OptionDef(
        "--llm-tokenizer",
        "tokenizer that sizes prompts: a Hugging Face tokenizer folder or tokenizer.json, "
        "a tiktoken encoding name, or 'server' (vLLM's /tokenize); default: the model's own "
        "when available offline, else an approximation (with a warning)",
    ),
    OptionDef(
        "--llm-history",
        "remember every session's runs in a history store: a SQLite file path, or a "
        "postgresql:// URL (the [postgres] extra)",
    ),
    OptionDef(
        "--llm-history-tag",
        "label of this session in the history (default: the git branch and commit, "
        "from the checkout or the CI's variables)",
    ),
    OptionDef(
        "--llm-reference-endpoint",
        "A/B: a reference server ('URL', 'sim' or 'sim:PROFILE') that each test's runs "
        "alternate with the endpoint under test; a candidate worse than it fails",
    ),
    OptionDef(
        "--llm-ab-threshold",
        "A/B: slowdown of the candidate against the reference allowed before a significant "
        "change fails, same form as --llm-baseline-threshold (default 5%: the interleaved, "
        "paired runs cancel the drift a stored baseline cannot)",
        "5%",
    ),
    OptionDef(
        "--llm-ab-blocks",
        "A/B: interleaved blocks a side, in ABBA order (an even number >= 2, default 4)",
        "4",
    ),
    OptionDef(
        "--llm-server-metrics",
        "the server's own Prometheus metrics in every run: auto (default: the endpoint's "
        "/metrics where it answers, every 1 s), off, a /metrics URL (e.g. one worker behind "
        "a router), or SECONDS between samples",
        "auto",
    ),
    OptionDef(
        "--llm-reset-cache",
        "reset the server's prefix cache before each gated run where it offers that "
        "(vLLM POST /reset_prefix_cache in dev mode, SGLang /flush_cache): auto (default) or off",
        "auto",
    ),
    OptionDef(
        "--llm-baseline-strict",
        "a baseline, history or reference comparison across different server fingerprints "
        "is a usage error (default: flagged comparable: false)",
        switch=True,
    ),
    OptionDef(
        "--llm-confidence",
        "confidence of percentile SLO verdicts, strictly between 0.5 and 1 (default 0.99): "
        "a pN SLO passes or fails only when its distribution-free confidence bound is on "
        "one side of the target (per SLO: llm_slo(..., confidence=)); the bounds a "
        "baseline comparison quotes",
        "0.99",
    ),
    OptionDef(
        "--llm-until-decided",
        "every gated run stops once all its SLOs are decided (always-valid percentile "
        "bounds; per test: llm_load(..., until='decided')), within its declared size",
        switch=True,
    ),
    OptionDef(
        "--llm-server-cmd",
        "start the server under test for the session and measure it: a command line "
        "with {port} (a free port) and {host} filled, e.g. 'vllm serve MODEL --port {port}'; "
        "stopped at session end (SIGTERM to its process group, then SIGKILL); not with "
        "--llm-endpoint",
    ),
    OptionDef(
        "--llm-server-env",
        "KEY=VALUE added to the started servers' environment (repeatable; ini: one per line)",
        repeat=True,
    ),
    OptionDef("--llm-server-cwd", "working directory of the started servers"),
    OptionDef(
        "--llm-server-ready-url",
        "URL that answers 200 once a started server is ready, {host} and {port} filled "
        "(default: http://{host}:{port}/v1/models, listing the model when one is named)",
    ),
    OptionDef(
        "--llm-server-ready-timeout",
        "seconds a started server has to become ready before the session stops before "
        "load with its log's last lines (default 600)",
        "600",
    ),
    OptionDef(
        "--llm-server-log-dir",
        "directory of the started servers' logs, one file per server (default: "
        "llmperf-servers/ under pytest's basetemp); the path is in every report",
    ),
    OptionDef(
        "--llm-reference-cmd",
        "A/B: start the reference server with this command line (as --llm-server-cmd: "
        "{port}, {host}, the --llm-server-* options); not with --llm-reference-endpoint",
    ),
    OptionDef(
        "--llm-gpu",
        "read this machine's GPUs during every run (NVML at 10 Hz, off the event loop; "
        "AMD through amdsmi where installed): auto (default: every visible GPU; none: one "
        "line in the header, nothing fails), off, or GPU indexes (0,1: a missing one is a "
        "usage error); power, energy, memory, utilisation, energy per output token "
        "(docs/gpu.md)",
        "auto",
    ),
    OptionDef(
        "--llm-otel",
        "export every run's GenAI client metrics over OTLP/HTTP to this base URL (e.g. "
        "http://localhost:4318), or 'env' to take it from OTEL_EXPORTER_OTLP_ENDPOINT; the "
        "OTEL_EXPORTER_OTLP_* variables are honoured; needs pytest-llmperf[otel] "
        "(docs/export.md)",
    ),
    OptionDef(
        "--llm-otel-spans",
        "with --llm-otel: also one span per request, for this share of requests (a ratio "
        "0..1 or a percentage, default 0: none), under a span per run and one per session",
        "0",
    ),
    OptionDef(
        "--llm-mlflow",
        "log one MLflow run per test run (parameters, metrics, verdicts as tags, reports "
        "as artefacts), nested under one run per session, to this tracking URI "
        "(http://host:5000, sqlite:///mlflow.db), or 'env': $MLFLOW_TRACKING_URI where it "
        "is set; needs pytest-llmperf[mlflow] (docs/export.md)",
    ),
    OptionDef(
        "--llm-mlflow-experiment",
        "with --llm-mlflow: the MLflow experiment (created if missing; default "
        "$MLFLOW_EXPERIMENT_NAME, else llmperf)",
    ),
    OptionDef(
        "--llm-inconclusive",
        "what an inconclusive SLO or baseline comparison does to its test: fail "
        "(default), warn (pass with a warning) or skip",
        "fail",
    ),
)


@dataclass(frozen=True)
class LlmPerfOptions:
    """The resolved options; ``endpoint_url`` is None when the simulator is used."""

    endpoint_url: str | None
    sim_profile: str | None
    model: str | None
    api: str
    api_key_env: str
    ruleset: str | None
    html: str | None
    json: str | None
    events: str | None
    baseline_save: str | None
    baseline_compare: str | None
    baseline_threshold: str
    scale: float
    workers: int
    timeouts: Timeouts
    inconclusive: InconclusivePolicy
    endpoint_given: bool
    request_extra: Mapping[str, Any] = field(default_factory=dict)
    tokenizer: str | None = None  # --llm-tokenizer, checked (pytest_llmperf.session_tokenizer)
    history: str | None = None  # --llm-history: a SQLite path or a postgresql:// URL
    history_tag: str | None = None
    reference_url: str | None = None  # --llm-reference-endpoint: a real server ...
    reference_sim_profile: str | None = None  # ... or the simulator with this profile
    worker_backend: WorkerBackend = WorkerBackend.LOCAL
    workers_auto: bool = False  # ray:auto: ``workers`` is settled once Ray is connected
    ray_address: str | None = None  # --llm-ray-address (else $RAY_ADDRESS, else local Ray)
    progress_every_s: float | None = 10.0  # None: --llm-progress=off
    progress_auto: bool = True  # auto: an updating line on a terminal, plain lines otherwise
    ab_threshold: str = "5%"
    ab_blocks: int = 4
    server_metrics: str = "auto"  # --llm-server-metrics: auto, off, a URL or seconds (checked)
    reset_cache: bool = True  # --llm-reset-cache=auto
    # --llm-reset-cache set on the command line or in the ini file (not the default): a
    # reset that could not be done is then said even where no prefix cache is known
    reset_cache_given: bool = False
    baseline_strict: bool = False
    markdown: str | None = None  # --llm-markdown=PATH
    step_summary: bool = True  # append to $GITHUB_STEP_SUMMARY when set (not --llm-markdown=off)
    confidence: float = DEFAULT_CONFIDENCE  # --llm-confidence: of percentile verdicts
    until_decided: bool = False  # --llm-until-decided: stop each gated run once decided
    summary: SummaryDetail = SummaryDetail.AUTO  # --llm-summary
    # --llm-server-cmd (with the --llm-server-* options): the session's server, started
    # by the gate; None: --llm-endpoint's server, or the simulator
    server: ServerCommand | None = None
    reference_server: ServerCommand | None = None  # --llm-reference-cmd
    server_log_dir: str | None = None  # --llm-server-log-dir (None: under pytest's basetemp)
    affinity: Affinity = NO_AFFINITY  # --llm-affinity and --llm-replica-header
    gpu: str = "auto"  # --llm-gpu: auto, off or comma-separated GPU indexes (checked)
    otel: str | None = None  # --llm-otel: an OTLP/HTTP endpoint
    otel_spans: float = 0.0  # --llm-otel-spans: the share of requests exported as spans
    mlflow: str | None = None  # --llm-mlflow: a tracking URI, or "env"
    mlflow_experiment: str | None = None  # --llm-mlflow-experiment

    @classmethod
    def resolve(
        cls,
        get: Callable[[OptionDef], Any],
        on_command_line: Callable[[OptionDef], bool] | None = None,
    ) -> LlmPerfOptions:
        """Build from ``get(option) -> raw value or None`` (the plugin reads CLI then ini).

        ``on_command_line(option)``: whether the option was given on the command line
        (None: nothing is known of where a value came from). ``--llm-server-cmd`` and
        ``--llm-endpoint`` name the same thing: one on the command line wins over the
        other in the ini file; both at the same level is a usage error (so for the
        reference's pair)."""
        raw = {o.dest: _value(get, o) for o in OPTIONS}
        _one_of(raw, on_command_line, "--llm-server-cmd", "--llm-endpoint")
        _one_of(raw, on_command_line, "--llm-reference-cmd", "--llm-reference-endpoint")
        endpoint = (raw["llm_endpoint"] or "").strip()
        url: str | None = None
        profile: str | None = None
        if not endpoint or endpoint == "sim" or endpoint.startswith("sim:"):
            profile = sim_profile_of("--llm-endpoint", endpoint)
        else:
            url = _checked("--llm-endpoint", endpoint, normalize_base_url)
        api: str = parse_api(raw["llm_api"], where="--llm-api").value
        inconclusive = raw["llm_inconclusive"]
        if inconclusive not in INCONCLUSIVE_POLICIES:
            raise LlmPerfUsageError(
                f"must be one of {', '.join(INCONCLUSIVE_POLICIES)}, got {inconclusive!r}",
                where="--llm-inconclusive",
            )
        scale = _number("--llm-scale", raw["llm_scale"], float)
        backend, workers, workers_auto = _workers(raw["llm_workers"])
        progress_every_s, progress_auto = _progress(raw["llm_progress"])
        ab_blocks = _number("--llm-ab-blocks", raw["llm_ab_blocks"], int)
        if ab_blocks < 2 or ab_blocks % 2:
            raise LlmPerfUsageError(
                f"must be an even number >= 2 (ABBA order), got {raw['llm_ab_blocks']!r}",
                where="--llm-ab-blocks",
            )
        timeouts = _checked_timeouts(raw["llm_timeout"])
        reference = (raw["llm_reference_endpoint"] or "").strip()
        reference_url: str | None = None
        reference_profile: str | None = None
        if reference == "sim" or reference.startswith("sim:"):
            reference_profile = sim_profile_of("--llm-reference-endpoint", reference)
        elif reference:
            reference_url = _checked("--llm-reference-endpoint", reference, normalize_base_url)
        server = _server_command(raw, "--llm-server-cmd")
        reference_server = _server_command(raw, "--llm-reference-cmd")
        if server is not None:  # the endpoint is the started server, not the simulator
            profile = None
        return cls(
            endpoint_url=url,
            sim_profile=profile,
            model=raw["llm_model"] or None,
            api=api,
            api_key_env=raw["llm_api_key_env"] or "OPENAI_API_KEY",
            ruleset=raw["llm_ruleset"] or None,
            html=raw["llm_html"] or None,
            json=raw["llm_json"] or None,
            events=raw["llm_events"] or None,
            baseline_save=raw["llm_baseline_save"] or None,
            baseline_compare=raw["llm_baseline_compare"] or None,
            baseline_threshold=raw["llm_baseline_threshold"] or "10%",
            scale=scale,
            workers=workers,
            timeouts=timeouts,
            inconclusive=InconclusivePolicy(inconclusive),
            endpoint_given=bool(endpoint),
            request_extra=_request_extra(raw["llm_request_extra"]),
            tokenizer=check_tokenizer_option(raw["llm_tokenizer"]),
            history=raw["llm_history"] or None,
            history_tag=raw["llm_history_tag"] or None,
            reference_url=reference_url,
            reference_sim_profile=reference_profile,
            worker_backend=backend,
            workers_auto=workers_auto,
            ray_address=raw["llm_ray_address"] or None,
            progress_every_s=progress_every_s,
            progress_auto=progress_auto,
            ab_threshold=raw["llm_ab_threshold"] or "5%",
            ab_blocks=ab_blocks,
            server_metrics=_server_metrics(raw["llm_server_metrics"]),
            reset_cache=_choice("--llm-reset-cache", raw["llm_reset_cache"], ("auto", "off"))
            == "auto",
            reset_cache_given=_given(get, "--llm-reset-cache"),
            baseline_strict=_switch("--llm-baseline-strict", raw["llm_baseline_strict"]),
            markdown=_markdown(raw["llm_markdown"]),
            step_summary=str(raw["llm_markdown"] or "").strip().lower() != "off",
            confidence=_confidence(raw["llm_confidence"]),
            until_decided=_switch("--llm-until-decided", raw["llm_until_decided"]),
            summary=SummaryDetail(
                _choice("--llm-summary", raw["llm_summary"], tuple(SummaryDetail))
            ),
            server=server,
            reference_server=reference_server,
            server_log_dir=raw["llm_server_log_dir"] or None,
            affinity=Affinity.parse(
                raw["llm_affinity"] or None,
                replica_headers=parse_replica_headers(raw["llm_replica_header"] or None),
            ),
            gpu=_gpu(raw["llm_gpu"]),
            otel=_otel(raw["llm_otel"]),
            otel_spans=_ratio("--llm-otel-spans", raw["llm_otel_spans"]),
            mlflow=_mlflow_uri(raw["llm_mlflow"]),
            mlflow_experiment=(raw["llm_mlflow_experiment"] or "").strip() or None,
        )


def _one_of(
    raw: dict[str, Any],
    on_command_line: Callable[[OptionDef], bool] | None,
    first: str,
    second: str,
) -> None:
    """Two options that name the same endpoint: the command line's wins over the ini
    file's (the other is dropped from ``raw``); both at one level is a usage error."""
    a, b = (next(o for o in OPTIONS if o.flag == flag) for flag in (first, second))
    if not raw[a.dest] or not raw[b.dest]:
        return
    if on_command_line is not None:
        a_cli, b_cli = on_command_line(a), on_command_line(b)
        if a_cli != b_cli:
            raw[(b if a_cli else a).dest] = None
            return
    raise LlmPerfUsageError(
        f"give one of {first} (a server the gate starts) and {second} (a server already "
        "running), not both",
        where=first,
    )


def _server_command(raw: dict[str, Any], flag: str) -> ServerCommand | None:
    """``--llm-server-cmd`` / ``--llm-reference-cmd`` with the ``--llm-server-*`` options,
    checked here: a command that does not parse, a timeout <= 0, an env entry that is
    not KEY=VALUE or a working directory that is not one are usage errors naming the
    option."""
    text = raw[flag.lstrip("-").replace("-", "_")]
    if not text:
        return None
    env = _server_env(raw["llm_server_env"])
    timeout = _number("--llm-server-ready-timeout", raw["llm_server_ready_timeout"], float)
    if not math.isfinite(timeout):
        raise LlmPerfUsageError(
            f"must be a finite number of seconds, got {raw['llm_server_ready_timeout']!r}",
            where="--llm-server-ready-timeout",
        )
    cwd = raw["llm_server_cwd"] or None
    if cwd is not None and not os.path.isdir(cwd):
        raise LlmPerfUsageError(f"not a directory: {cwd!r}", where="--llm-server-cwd")
    ready_url = raw["llm_server_ready_url"] or None
    if ready_url is not None and not ready_url.startswith(("http://", "https://")):
        raise LlmPerfUsageError(
            f"expected an http(s) URL ({{host}} and {{port}} are filled), got {ready_url!r}",
            where="--llm-server-ready-url",
        )
    from pytest_llmperf.managed_server import ServerCommand

    try:
        return ServerCommand.parse(
            str(text),
            where=flag,
            env=env,
            cwd=cwd,
            ready_url=ready_url,
            ready_timeout_s=timeout,
        )
    except LlmPerfUsageError as exc:
        raise exc.located(flag) from None


def _server_env(value: Any) -> dict[str, str]:
    """``--llm-server-env=KEY=VALUE`` (repeatable) or the ini's lines: a dict."""
    if not value:
        return {}
    entries = [value] if isinstance(value, str) else list(value)
    env: dict[str, str] = {}
    for entry in entries:
        for line in str(entry).splitlines():
            line = line.strip()
            if not line:
                continue
            key, sep, val = line.partition("=")
            key = key.strip()
            if not sep or not key or any(c.isspace() for c in key):
                raise LlmPerfUsageError(
                    f"expected KEY=VALUE (e.g. CUDA_VISIBLE_DEVICES=0), got {line!r}",
                    where="--llm-server-env",
                )
            env[key] = val
    return env


def _confidence(value: Any) -> float:
    """``--llm-confidence``: a number strictly between 0.5 and 1."""
    text = str(value if value is not None else DEFAULT_CONFIDENCE).strip()
    try:
        number = float(text)
    except ValueError:
        number = math.nan
    problem = confidence_problem(number)
    if problem or not math.isfinite(number):
        raise LlmPerfUsageError(
            f"must be a number strictly between 0.5 and 1 (e.g. 0.99), got {text!r}",
            where="--llm-confidence",
        )
    return number


def _workers(value: Any) -> tuple[WorkerBackend, int, bool]:
    """``--llm-workers``: ``N``, ``ray:N`` or ``ray:auto``."""
    text = str(value).strip()
    if text.lower().startswith("ray:"):
        count = text[4:].strip()
        if count.lower() == "auto":
            return WorkerBackend.RAY, 1, True
        return WorkerBackend.RAY, _number("--llm-workers", count, int), False
    if text.lower() == "ray":
        raise LlmPerfUsageError(
            "give the number of Ray actors: 'ray:N' or 'ray:auto', got 'ray'",
            where="--llm-workers",
        )
    return WorkerBackend.LOCAL, _number("--llm-workers", text, int), False


def _progress(value: Any) -> tuple[float | None, bool]:
    """``--llm-progress``: ``auto``, ``off`` or seconds between plain lines."""
    text = str(value).strip().lower()
    if text == "auto":
        return 10.0, True
    if text in ("off", "0", "no", "false"):
        return None, False
    try:
        seconds = float(text.removesuffix("s"))
    except ValueError:
        raise LlmPerfUsageError(
            f"expected auto, off or a number of seconds, got {value!r}", where="--llm-progress"
        ) from None
    if not seconds > 0:
        raise LlmPerfUsageError(f"must be > 0 seconds, got {value!r}", where="--llm-progress")
    return seconds, False


def _server_metrics(value: Any) -> str:
    """``--llm-server-metrics``: ``auto``, ``off``, an http(s) URL or seconds between samples
    (checked by :func:`~pytest_llmperf.server_metrics.source.parse_option`, kept as written)."""
    text = str(value or "auto").strip()
    parse_option(text)
    return text.lower() if text.lower() in ("auto", "off") else text


def _gpu(value: Any) -> str:
    """``--llm-gpu``: ``auto``, ``off`` or GPU indexes (``0,1``), kept as written."""
    text = str(value or "auto").strip().lower()
    if text in ("auto", "off"):
        return text
    parts = [p.strip() for p in text.split(",")]
    if not all(p.isdigit() for p in parts):
        raise LlmPerfUsageError(
            f"expected auto, off or GPU indexes such as 0,1, got {value!r}", where="--llm-gpu"
        )
    return ",".join(parts)


def _otel(value: Any) -> str | None:
    """``--llm-otel``: an OTLP/HTTP base URL, or ``env`` (the ``OTEL_EXPORTER_OTLP_*``
    variables say where); unset or empty: no export."""
    text = str(value or "").strip()
    if not text:
        return None
    if text != "env" and not text.startswith(("http://", "https://")):
        raise LlmPerfUsageError(
            f"expected an OTLP/HTTP base URL (http://collector:4318) or env, got {value!r}",
            where="--llm-otel",
        )
    return text


def _ratio(option: str, value: Any) -> float:
    """A share between 0 and 1 (``0.1``, or ``10%``)."""
    text = str(value if value is not None else "0").strip()
    try:
        ratio = float(text[:-1]) / 100 if text.endswith("%") else float(text)
    except ValueError:
        raise LlmPerfUsageError(
            f"expected a ratio between 0 and 1, got {value!r}", where=option
        ) from None
    if not 0.0 <= ratio <= 1.0:
        raise LlmPerfUsageError(f"must be between 0 and 1, got {value!r}", where=option)
    return ratio


_URI_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*:")


def _mlflow_uri(value: Any) -> str | None:
    """``--llm-mlflow``: a tracking URI with its scheme (``http://``, ``sqlite:///``,
    ``databricks``), or ``env``. A bare path is refused here, before any load: MLflow
    would read it as its file store, which MLflow 3 refuses, and the session would learn
    it only at its end."""
    text = str(value or "").strip()
    if not text or text.lower() in ("env", "databricks") or _URI_SCHEME.match(text):
        return text or None
    raise LlmPerfUsageError(
        "expected a tracking URI (http://host:5000, sqlite:///mlflow.db) or env "
        f"($MLFLOW_TRACKING_URI), got {text!r}",
        where="--llm-mlflow",
    )


def _markdown(value: Any) -> str | None:
    """``--llm-markdown``: a path, or ``off`` (no file, no step summary): None for both."""
    text = str(value or "").strip()
    return None if not text or text.lower() == "off" else text


def _choice(option: str, value: Any, choices: tuple[str, ...]) -> str:
    text = str(value).strip().lower()
    if text not in choices:
        raise LlmPerfUsageError(f"must be one of {', '.join(choices)}, got {value!r}", where=option)
    return text


def _switch(option: str, value: Any) -> bool:
    """A switch: given on the command line, or ``true``/``false`` as an ini value."""
    if value is None or value is False:
        return False
    text = str(value).strip().lower()
    if text in ("true", "1", "yes", "on"):
        return True
    if text in ("false", "0", "no", "off", ""):
        return False
    raise LlmPerfUsageError(f"expected true or false, got {value!r}", where=option)


def _request_extra(value: Any) -> dict[str, Any]:
    """``--llm-request-extra``: a JSON object of request fields."""
    from pytest_llmperf.specs.run import check_extra_body

    if not value:
        return {}
    try:
        parsed = json.loads(value) if isinstance(value, str) else value
    except ValueError as exc:
        raise LlmPerfUsageError(
            f"expected a JSON object such as '{{\"top_k\": 5}}', got {value!r} ({exc})",
            where="--llm-request-extra",
        ) from None
    try:
        return check_extra_body(parsed, "the value")
    except LlmPerfUsageError as exc:
        raise exc.located("--llm-request-extra") from None


def _given(get: Callable[[OptionDef], Any], flag: str) -> bool:
    """Whether option ``flag`` was set (command line or ini), not left at its default."""
    option = next(o for o in OPTIONS if o.flag == flag)
    value = get(option)
    return value is not None and str(value).strip() != ""


def _value(get: Callable[[OptionDef], Any], option: OptionDef) -> Any:
    value = get(option)
    if value is None or value == "" or value == []:
        return option.default
    return value.strip() if isinstance(value, str) else value


_Number = TypeVar("_Number", int, float)


def _number(flag: str, value: Any, kind: type[_Number]) -> _Number:
    try:
        number = kind(value)
    except (TypeError, ValueError):
        noun = "a whole number" if kind is int else "a number"
        raise LlmPerfUsageError(f"expected {noun}, got {value!r}", where=flag) from None
    if not number > 0:
        raise LlmPerfUsageError(f"must be > 0, got {value!r}", where=flag)
    return number


def _checked_timeouts(value: Any) -> Timeouts:
    try:
        return Timeouts.parse(value)
    except LlmPerfUsageError as exc:
        raise exc.located("--llm-timeout") from None


def sim_profile_of(flag: str, value: str) -> str:
    """``sim`` or ``sim:PROFILE`` (empty: the default): a shipped profile, checked here so
    that a typo is one usage error naming ``flag`` (an option, or a test's marker), not a
    simulator that fails to start."""
    from pytest_llmperf.sim.profiles import profile_names

    profile = value[4:].strip() or DEFAULT_SIM_PROFILE
    if profile not in profile_names():
        raise LlmPerfUsageError(
            f"unknown simulator profile {profile!r} in {value!r}; "
            f"known: {', '.join(profile_names())}",
            where=flag,
        )
    return profile


def _checked(flag: str, value: str, parse: Callable[[str], str]) -> str:
    try:
        return parse(value)
    except LlmPerfUsageError as exc:
        raise exc.located(flag) from None
