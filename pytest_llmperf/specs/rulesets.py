"""Rulesets: named sets of SLO targets (built-in MLPerf-style, or a YAML file).

A ruleset maps to SLO expressions, so one evaluation path serves markers and
rulesets alike; it adds the two conditions under which a target may be
judged at all: a minimum sample count and a minimum measured duration
(below either, the verdict is inconclusive, never a pass). The built-ins are
the MLPerf Inference LLM server-scenario p99 limits (TTFT / TPOT, in ms).

A YAML ruleset (loaded with ``yaml.safe_load``)::

    name: chat-tier
    description: what the chat service promises
    min_samples: 1000          # every percentile needs at least this many samples
    min_duration: 60s          # measured time (sum of run windows): 90, 90s, 2m
    targets:
      ttft: {p50: 200ms, p75: 300ms, p99: 500ms}  # any pN / pN.M; "<" implied
      replica.ttft: {p99: 800ms}           # a fleet's names too (docs/fleets.md)
      fleet.imbalance: 1.5                 # "<" implied; fleet.prefix_hit_rate: ">="
      decode.kv_usage: {max: 90%}          # a pool's gauge or latency: "<" implied
      tpot: {p99: "<= 50ms"}
      error_rate: 1%                       # "<" implied for error_rate,
      goodput: 95%                         # ">=" for goodput and throughputs
      output_throughput: 1000 tok/s
      energy_per_output_token_j: 0.5J      # a GPU figure (docs/gpu.md): "<" implied,
      gpu.util: "> 50%"                    # the other way written out
    slos:                      # free-form expressions, as in llm_slo(...)
      - "itl.p99 < 100ms"

Every error names the file, the key and the bad value.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import yaml

from pytest_llmperf.errors import LlmPerfUsageError
from pytest_llmperf.specs.conversation_names import (
    CONVERSATION_LATENCY_METRICS,
    CONVERSATION_RATE_METRICS,
)
from pytest_llmperf.specs.fleet_names import (
    FLEET_METRICS,
    POOL_SCOPES,
    REPLICA_SCOPE,
    SERVER_ALIASES,
)
from pytest_llmperf.specs.gpu_names import GPU_METRICS
from pytest_llmperf.specs.server_names import COMMON_METRICS, MetricKind
from pytest_llmperf.specs.slo import (
    LATENCY_SLO_METRICS,
    RATE_SLO_METRICS,
    REPLICA_SLO_METRICS,
    Slo,
    parse_slo,
    stat_problem,
)

__all__ = [
    "BUILTIN_RULESETS",
    "MLPERF_SERVER_LIMITS",
    "Ruleset",
    "load_ruleset",
    "ruleset_bar",
    "ruleset_bars",
]

MLPERF_SERVER_LIMITS: dict[str, tuple[int, int]] = {
    # name: (ttft p99 ms, tpot p99 ms) — MLPerf Inference LLM server scenario
    "mlperf-llama2-70b-server": (2000, 200),
    "mlperf-llama2-70b-interactive": (450, 40),
    "mlperf-llama3.1-8b-server": (2000, 100),
    "mlperf-llama3.1-8b-interactive": (500, 30),
    "mlperf-llama3.1-405b-server": (6000, 175),
    "mlperf-llama3.1-405b-interactive": (4500, 80),
    "mlperf-mixtral-8x7b-server": (2000, 200),
    "mlperf-deepseek-r1-server": (2000, 80),
    "mlperf-deepseek-r1-interactive": (1500, 15),
    "mlperf-gpt-oss-120b-server": (3000, 80),
    "mlperf-gpt-oss-120b-interactive": (2000, 20),
}
BUILTIN_RULESETS: dict[str, list[str]] = {
    name: [f"ttft.p99 < {ttft}ms", f"tpot.p99 < {tpot}ms"]
    for name, (ttft, tpot) in MLPERF_SERVER_LIMITS.items()
}
_TOP_KEYS = ("name", "description", "min_samples", "min_duration", "targets", "slos")
# Direction implied when a rate target is written without an operator.
_RATE_DEFAULT_OP = {
    "error_rate": "<",
    "blank_rate": "<",
    "goodput": ">=",
    "request_throughput": ">=",
    "output_throughput": ">=",
    "input_throughput": ">=",
    "valid_rate": ">=",
    "output_match": ">=",
    "output_consistency": ">=",
    "conversation.same_replica_rate": ">=",
    "conversation.tree_same_replica_rate": ">=",
}
# ... for a fleet's figures, and for a server count or share over one pool's pages
_FLEET_DEFAULT_OP = {
    "fleet.imbalance": "<",
    "fleet.busy_imbalance": "<",
    "fleet.prefix_hit_rate": ">=",
}
_SERVER_VALUE_DEFAULT_OP = {
    "server.preemptions": "<=",  # a count: `decode.preemptions: 0` means none
    "server.prefix_cache_hit_rate": ">=",
    "server.spec_decode_acceptance": ">=",
    "server.requests": ">=",
    "server.prompt_tokens": ">=",
    "server.generation_tokens": ">=",
}
_OP_PREFIX = re.compile(r"^\s*(<=|>=|<|>)")
_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(s|m|min|h)?\s*$")


@dataclass(frozen=True)
class Ruleset:
    """A named list of SLOs, plus when they may be judged at all.

    ``min_samples`` raises (never lowers) the per-percentile minimum of
    :func:`~pytest_llmperf.metrics.sample_size.min_samples`; ``min_duration_s`` is
    the least measured time (sum of the runs' windows) a verdict needs.
    """

    name: str
    slos: list[Slo]
    source: str = "built-in"
    description: str = ""
    min_samples: int = 0
    min_duration_s: float = 0.0

    def describe(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "source": self.source,
            "description": self.description,
            "slos": [s.expr for s in self.slos],
            "min_samples": self.min_samples,
            "min_duration_s": self.min_duration_s,
        }


def ruleset_bars(rulesets: Sequence[Ruleset]) -> dict[Slo, tuple[int, float]]:
    """Each ruleset SLO's ``(min_count, min_duration_s)``: the strictest of the rulesets
    that name it (a ruleset's ``min_samples`` and ``min_duration``). A verdict needs them,
    and so does a run that stops once its SLOs are decided (``until="decided"``)."""
    bars: dict[Slo, tuple[int, float]] = {}
    for ruleset in rulesets:
        for slo in ruleset.slos:
            count, duration = bars.get(slo, (0, 0.0))
            bars[slo] = (max(count, ruleset.min_samples), max(duration, ruleset.min_duration_s))
    return bars


def ruleset_bar(bars: Mapping[Slo, tuple[int, float]] | None, slo: Slo) -> tuple[int, float]:
    """``slo``'s ``(min_count, min_duration_s)`` in ``bars`` (:func:`ruleset_bars`), ``(0,
    0.0)`` for none; a ruleset SLO judged ``per_model=True`` too is the ruleset's own."""
    return (bars or {}).get(replace(slo, per_model=False), (0, 0.0))


def load_ruleset(name_or_path: str, *, base_dir: str | Path | None = None) -> Ruleset:
    """A built-in ruleset by name, or a YAML file (relative paths also tried under ``base_dir``)."""
    if not isinstance(name_or_path, str) or not name_or_path.strip():
        raise LlmPerfUsageError(f"ruleset must be a built-in name or a file, got {name_or_path!r}")
    if name_or_path in BUILTIN_RULESETS:
        return Ruleset(name_or_path, [parse_slo(e) for e in BUILTIN_RULESETS[name_or_path]])
    path = Path(name_or_path)
    if not path.is_file() and base_dir is not None and not path.is_absolute():
        path = Path(base_dir) / path
    if not path.is_file():
        raise LlmPerfUsageError(
            f"ruleset {name_or_path!r} is neither a built-in "
            f"({', '.join(sorted(BUILTIN_RULESETS))}) nor a readable file"
        )
    try:
        data = yaml.safe_load(path.read_text("utf-8"))
    except (yaml.YAMLError, UnicodeDecodeError) as exc:
        raise LlmPerfUsageError(f"bad YAML: {exc}", where=str(path)) from None
    return ruleset_from_mapping(data, source=str(path), default_name=path.stem)


def ruleset_from_mapping(data: Any, *, source: str, default_name: str = "ruleset") -> Ruleset:
    """Validate a parsed YAML document; errors read ``<file>: <key>: ... <value>``."""
    if not isinstance(data, dict):
        raise LlmPerfUsageError(
            f"expected a mapping with 'targets:' and/or 'slos:', got {type(data).__name__}",
            where=source,
        )
    unknown = sorted(str(k) for k in data if k not in _TOP_KEYS)
    if unknown:
        raise LlmPerfUsageError(
            f"unknown key(s) {', '.join(unknown)}; allowed: {', '.join(_TOP_KEYS)}", where=source
        )
    if "targets" not in data and "slos" not in data:
        raise LlmPerfUsageError("needs 'targets:' and/or 'slos:'", where=source)
    exprs = _target_exprs(data.get("targets") or {}, source)
    raw_slos = data.get("slos") or []
    if not isinstance(raw_slos, list):
        raise LlmPerfUsageError(
            f"must be a list of expressions, got {raw_slos!r}", where=f"{source}: slos"
        )
    slos: list[Slo] = []
    for key, expr in [*exprs, *((f"slos[{i}]", e) for i, e in enumerate(raw_slos))]:
        try:
            slos.append(parse_slo(expr))
        except LlmPerfUsageError as exc:
            raise LlmPerfUsageError(exc.message, where=f"{source}: {key}") from None
    if not slos:
        raise LlmPerfUsageError("defines no targets", where=source)
    name = data.get("name", default_name)
    if not isinstance(name, str) or not name:
        raise LlmPerfUsageError(
            f"must be a non-empty string, got {name!r}", where=f"{source}: name"
        )
    min_samples = data.get("min_samples", 0)
    if isinstance(min_samples, bool) or not isinstance(min_samples, int) or min_samples < 0:
        raise LlmPerfUsageError(
            f"must be an integer >= 0, got {min_samples!r}", where=f"{source}: min_samples"
        )
    return Ruleset(
        name=name,
        slos=slos,
        source=source,
        description=str(data.get("description") or ""),
        min_samples=min_samples,
        min_duration_s=parse_duration(data.get("min_duration", 0), where=f"{source}: min_duration"),
    )


def parse_duration(value: Any, *, where: str) -> float:
    """``90``, ``90s``, ``1.5m``, ``2h`` -> seconds (0 = no minimum)."""
    if isinstance(value, bool):
        raise LlmPerfUsageError(f"expected seconds like 90 or '2m', got {value!r}", where=where)
    if isinstance(value, (int, float)):
        seconds = float(value)
    else:
        m = _DURATION.match(str(value))
        if not m:
            raise LlmPerfUsageError(
                f"expected a duration like 90, '90s', '2m' or '1h', got {value!r}", where=where
            )
        factor = {"s": 1.0, None: 1.0, "m": 60.0, "min": 60.0, "h": 3600.0}[m[2]]
        seconds = float(m[1]) * factor
    if seconds < 0:
        raise LlmPerfUsageError(f"must be >= 0, got {value!r}", where=where)
    return seconds


def _target_exprs(targets: Any, source: str) -> list[tuple[str, str]]:
    """``targets:`` mapping -> ``(yaml key path, SLO expression)`` pairs."""
    if not isinstance(targets, dict):
        raise LlmPerfUsageError(
            f"must be a mapping of metric -> target, got {targets!r}", where=f"{source}: targets"
        )
    out: list[tuple[str, str]] = []
    for metric, spec in targets.items():
        key = f"targets.{metric}"
        default_op = _default_op(str(metric))
        if default_op is not None:
            if isinstance(spec, dict) and metric in GPU_METRICS:
                raise LlmPerfUsageError(
                    f"{metric} is one value per run of the GPUs: give one limit like '300W' "
                    f"or '> 50%', got {spec!r} (GPU metrics: {', '.join(GPU_METRICS)})",
                    where=f"{source}: {key}",
                )
            if isinstance(spec, dict):
                raise LlmPerfUsageError(
                    f"{metric} is a rate: give one value like '1%' or '> 10 req/s', got {spec!r}",
                    where=f"{source}: {key}",
                )
            out.append((key, _expr(metric, spec, default_op, source, key)))
        elif _has_stats(str(metric)):
            if not isinstance(spec, dict) or not spec:
                raise LlmPerfUsageError(
                    f"expected a mapping of statistic -> limit like {{p99: 500ms}}, got {spec!r}",
                    where=f"{source}: {key}",
                )
            for stat, value in spec.items():
                stat_key = f"{key}.{stat}"
                problem = stat_problem(str(stat))
                if problem:
                    raise LlmPerfUsageError(problem, where=f"{source}: {stat_key}")
                out.append((stat_key, _expr(f"{metric}.{stat}", value, "<", source, stat_key)))
        else:
            known = ", ".join(
                (
                    *LATENCY_SLO_METRICS,
                    *RATE_SLO_METRICS,
                    *CONVERSATION_LATENCY_METRICS,
                    *CONVERSATION_RATE_METRICS,
                    f"{REPLICA_SCOPE}.<metric>",
                    *FLEET_METRICS,
                    *GPU_METRICS,
                    "kv_transfer",
                    *(f"{pool}.<server name>" for pool in POOL_SCOPES),
                )
            )
            raise LlmPerfUsageError(
                f"unknown metric {metric!r}; known: {known}", where=f"{source}: {key}"
            )
    return out


def _pool_name(metric: str) -> str | None:
    """``decode.kv_usage`` -> ``server.kv_cache_usage``: the common name a pool's target
    names, None for a metric that is no pool's."""
    pool, _, name = metric.partition(".")
    if pool not in POOL_SCOPES:
        return None
    return f"server.{SERVER_ALIASES.get(name, name)}"


def _default_op(metric: str) -> str | None:
    """The direction a one-value target of ``metric`` implies (``error_rate: 1%`` is
    ``<``, ``goodput: 95%`` is ``>=``; a replica's rate as the plain one); None for a
    metric whose targets are per statistic."""
    if metric in _RATE_DEFAULT_OP:
        return _RATE_DEFAULT_OP[metric]
    if metric in _FLEET_DEFAULT_OP:
        return _FLEET_DEFAULT_OP[metric]
    if metric in GPU_METRICS:  # a limit (gpu.power_w.mean: 300W); '> 50%' says the other way
        return "<"
    scope, _, rest = metric.partition(".")
    if scope == REPLICA_SCOPE and rest in RATE_SLO_METRICS and rest in REPLICA_SLO_METRICS:
        return _RATE_DEFAULT_OP[rest]
    server = _pool_name(metric)
    return _SERVER_VALUE_DEFAULT_OP.get(server) if server else None


def _has_stats(metric: str) -> bool:
    """Are ``metric``'s targets a mapping of statistic -> limit (``<`` implied)?"""
    if metric in LATENCY_SLO_METRICS or metric in CONVERSATION_LATENCY_METRICS:
        return True
    scope, _, rest = metric.partition(".")
    if scope == REPLICA_SCOPE:
        return rest in LATENCY_SLO_METRICS
    if metric == "kv_transfer":
        return True
    server = _pool_name(metric)
    if server is None:
        return False
    # an unknown name too: its expressions' parsing names the bad word and the known ones
    return COMMON_METRICS.get(server, (None, ""))[0] is not MetricKind.VALUE


def _expr(lhs: str, value: Any, default_op: str, source: str, key: str) -> str:
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        raise LlmPerfUsageError(
            f"expected a limit like '500ms', '1%' or '> 10 req/s', got {value!r}",
            where=f"{source}: {key}",
        )
    text = str(value).strip()
    return f"{lhs} {text}" if _OP_PREFIX.match(text) else f"{lhs} {default_op} {text}"
