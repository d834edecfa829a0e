"""The methodology draft's "Minimum Viable Report", one per run.

The draft (Reporting Templates, Minimum Viable Report) asks every published
result for the system's identity, the test configuration and six key
figures, in a fixed plain-text layout, so results from different tools can
be read side by side. What the plugin cannot know (hardware, SUT boundary,
guardrails) is written as "not reported" rather than guessed, and what
deviates from the methodology (too few samples for a percentile, a
generator-bound run, token counts from chunks) is listed under Notes, as are
the outputs checked (``valid_rate``) and compared (``output_match``,
``output_consistency``) where the workload asked for them.

Printable from a JSON report: ``python -m pytest_llmperf.reports.methodology
report.json`` (that command is :mod:`pytest_llmperf.reports.methodology`; this module is
the report itself, which the JSON report imports, so the package never loads the module
that ``python -m`` runs, and runpy has nothing to warn about).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from pytest_llmperf.reports.output_words import (
    compare_head,
    compared_outputs,
    parting_words,
    path_parts,
    validity,
)
from pytest_llmperf.slo.verdicts import min_samples

__all__ = ["minimum_viable_report"]

_NOT_REPORTED = "not reported"


def minimum_viable_report(run: Mapping[str, Any], endpoint: Mapping[str, Any]) -> str:
    """The draft's minimum report for one run dict (as in the JSON report's ``runs[]``)."""
    m = run.get("metrics", {})
    counts = run.get("counts", {})
    load = run.get("load", {})
    workload = run.get("workload", {})
    ttft, tpot = m.get("ttft", {}), m.get("tpot", {})
    software = endpoint.get("server_software") or ""
    version = endpoint.get("server_version")
    if endpoint.get("simulator"):
        engine = f"pytest-llmperf embedded simulator, profile {endpoint['simulator']}"
    else:
        engine = software or _NOT_REPORTED
    if version:
        engine += f" (version {version})"
    lines = [
        "=== LLM Benchmark Report (Minimum) ===",
        "",
        "System Identification:",
        f"- Model: {endpoint.get('model') or _NOT_REPORTED}",
        f"- Hardware: {_NOT_REPORTED}",
        f"- Software: {engine}",
        f"- SUT Boundary: {_NOT_REPORTED} (endpoint {endpoint.get('url') or '?'})",
        "",
        "Test Configuration:",
        f"- Workload: {_workload(workload)}",
        f"- Load Model: {_load(load)}",
        f"- Request Count: {counts.get('issued', 0)} issued, {counts.get('completed', 0)} "
        f"completed, {counts.get('failed', 0)} failed",
        f"- Test Duration: {_num(m.get('window_s'), 's', 1)} measured "
        f"({_num(run.get('duration_s'), 's', 1)} wall)",
        "",
        "Key Results:",
        f"- TTFT P50: {_num(ttft.get('p50'), 'ms')}",
        f"- TTFT P99: {_num(ttft.get('p99'), 'ms')}{_few(ttft, 99)}",
        f"- TPOT P50: {_num(tpot.get('p50'), 'ms')}",
        f"- TPOT P99: {_num(tpot.get('p99'), 'ms')}{_few(tpot, 99)}",
        f"- Max Throughput: {_num(m.get('output_throughput'), 'tok/s', 1)} "
        f"(output tokens at this run's load, not a saturation search)",
        f"- Throughput at P99 TTFT < 500ms: {_at_slo(m)}",
        "",
        "Notes:",
        *[f"- {note}" for note in _notes(run, m, workload)],
        "- Guardrail configuration: not reported",
        "",
        "=== End Report ===",
    ]
    return "\n".join(lines)


def _workload(w: Mapping[str, Any]) -> str:
    """``synthetic (seed=7, input_tokens=16); structured output (schema output); greedy``:
    its parameters, then what it asked of the server beyond plain text in words."""
    name = w.get("name", "?")
    paths = ("structured", "tools", "tool_choice", "adapters", "greedy")
    skip = ("name", "requests", "duration_s", "warmup", "tokenizer", "tokenizer_identity", *paths)
    params = [f"{k}={_compact(v)}" for k, v in w.items() if k not in skip and v is not None]
    said = f"{name} ({', '.join(params)})" if params else str(name)
    return "; ".join([said, *path_parts(w)])


def _load(load: Mapping[str, Any]) -> str:
    pattern = load.get("pattern", "?")
    stages = load.get("stages") or ()
    if stages:
        return f"{pattern}, {_stages(stages)}"
    if load.get("rate"):
        return f"open-loop {pattern}, {load['rate']:g} req/s"
    if load.get("concurrency"):
        return f"closed-loop {pattern}, concurrency {load['concurrency']}"
    return str(pattern)


def _stages(stages: Sequence[Mapping[str, Any]]) -> str:
    """``2 stages: 10 req/s for 60 s, 40 req/s for 60 s`` (a long plan: its ends)."""

    def level(stage: Mapping[str, Any], end: bool = False) -> str:
        if stage.get("concurrency") is not None:
            return f"concurrency {stage['concurrency']}"
        rate = (
            stage.get("rate_end")
            if end and stage.get("rate_end") is not None
            else stage.get("rate")
        )
        return f"{float(rate or 0):.4g} req/s"

    total = sum(float(s.get("duration_s") or 0) for s in stages)
    if len(stages) <= 4:
        return f"{len(stages)} stage(s): " + ", ".join(
            f"{level(s)}{'→' + level(s, True) if s.get('rate_end') is not None else ''} "
            f"for {float(s.get('duration_s') or 0):g} s"
            for s in stages
        )
    return (
        f"{len(stages)} stages from {level(stages[0])} to {level(stages[-1], True)} "
        f"over {total:g} s (results per stage: runs[].stages)"
    )


def _compact(value: Any) -> str:
    if isinstance(value, (list, tuple)) and len(value) == 2 and value[0] == value[1]:
        return str(value[0])
    if isinstance(value, (list, tuple)):
        return "-".join(str(v) for v in value)
    return str(value)


def _num(value: Any, unit: str, digits: int = 2) -> str:
    if value is None:
        return "n/a"
    return f"{float(value):.{digits}f} {unit}"


def _few(stats: Mapping[str, Any], p: float) -> str:
    n = int(stats.get("count") or 0)
    needed = min_samples(p)
    return f" (inconclusive: {n} samples, needs >= {needed})" if n < needed else ""


def _at_slo(m: Mapping[str, Any]) -> str:
    p99 = (m.get("ttft") or {}).get("p99")
    if p99 is None:
        return "n/a"
    if p99 < 500:
        return f"{_num(m.get('output_throughput'), 'tok/s', 1)} (this run meets it; not a sweep)"
    return "n/a (this run's TTFT P99 is over 500 ms; needs a rate sweep)"


def _notes(run: Mapping[str, Any], m: Mapping[str, Any], workload: Mapping[str, Any]) -> list[str]:
    notes = [
        f"Token counts from: {m.get('token_count_source', '?')} ({workload.get('tokenizer', '?')})"
    ]
    notes.append(f"Warm-up: {workload.get('warmup') or 0} requests excluded")
    check = run.get("self_check") or {}
    if check.get("generator_bound"):
        notes.append("Load generator was the bottleneck: " + "; ".join(check.get("reasons", [])))
    lag = check.get("schedule_lag_p99_ms")
    if lag is not None:
        notes.append(f"Schedule lag p99: {lag:.2f} ms (TTFT counted from the planned send time)")
    errors = run.get("errors") or {}
    if errors:
        notes.append("Errors: " + ", ".join(f"{k} x{v}" for k, v in sorted(errors.items())))
    if run.get("interrupted"):
        notes.append("Run was stopped early")
    checked = validity(run)
    if checked is not None:
        invalid, n, rate = checked
        notes.append(
            f"Outputs checked: {n - invalid}/{n} valid (valid_rate {rate * 100:.2f}%; "
            "an invalid output still counts as a completed request)"
        )
    for name, match in compared_outputs(run):
        parted = parting_words(match, limit=5)
        notes.append(compare_head(name, match) + (f"; parted at: {parted}" if parted else ""))
    return notes
