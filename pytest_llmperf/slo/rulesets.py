"""Rulesets: named sets of SLO targets (built-in MLPerf-style, or a YAML file).

A ruleset maps to SLO expressions, so one evaluation path serves markers and
rulesets alike. The built-ins are the MLPerf Inference LLM server-scenario
p99 limits (TTFT / TPOT, in ms).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from pytest_llmperf.errors import LlmPerfUsageError
from pytest_llmperf.slo.expressions import Slo, parse_slo

__all__ = ["BUILTIN_RULESETS", "Ruleset", "load_ruleset"]

_MLPERF = {
    # name: (ttft p99 ms, tpot p99 ms)
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
    name: [f"ttft.p99 < {ttft}ms", f"tpot.p99 < {tpot}ms"] for name, (ttft, tpot) in _MLPERF.items()
}


class Ruleset:
    """A named list of SLOs."""

    def __init__(self, name: str, slos: list[Slo], source: str = "built-in") -> None:
        self.name = name
        self.slos = slos
        self.source = source

    def describe(self) -> dict[str, Any]:
        return {"name": self.name, "source": self.source, "slos": [s.expr for s in self.slos]}


def load_ruleset(name_or_path: str) -> Ruleset:
    """A built-in ruleset by name, or a YAML file with a ``slos:`` list of expressions."""
    if name_or_path in BUILTIN_RULESETS:
        return Ruleset(name_or_path, [parse_slo(e) for e in BUILTIN_RULESETS[name_or_path]])
    path = Path(name_or_path)
    if not path.is_file():
        raise LlmPerfUsageError(
            f"ruleset {name_or_path!r} is neither a built-in "
            f"({', '.join(sorted(BUILTIN_RULESETS))}) nor a readable file"
        )
    try:
        data = yaml.safe_load(path.read_text("utf-8"))
    except yaml.YAMLError as exc:
        raise LlmPerfUsageError(f"bad YAML: {exc}", where=str(path)) from None
    if not isinstance(data, dict) or not isinstance(data.get("slos"), list):
        raise LlmPerfUsageError("expected a mapping with a 'slos:' list", where=str(path))
    unknown = sorted(set(data) - {"name", "slos", "description"})
    if unknown:
        raise LlmPerfUsageError(f"unknown key(s) {', '.join(unknown)}", where=str(path))
    try:
        slos = [parse_slo(e) for e in data["slos"]]
    except LlmPerfUsageError as exc:
        raise exc.located(f"{path}: slos") from None
    return Ruleset(str(data.get("name", path.stem)), slos, source=str(path))
