"""What an agent feels, in words: a run's ``conversations`` block (the JSON report's
``runs[].conversations``, :attr:`~pytest_llmperf.results.run_result.RunResult.conversations`)
as the terminal's figures, the Markdown tables, JUnit properties and the HTML report's rows.

Every format reads the same block and formats each figure with
:func:`~pytest_llmperf.reports.table.format_value`, so the reports agree.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pytest_llmperf.gfm import table
from pytest_llmperf.reports.table import format_value

__all__ = [
    "BAND_HEADER",
    "band_rows",
    "conversation_figures",
    "conversation_markdown",
    "conversation_parts",
    "conversation_properties",
    "has_conversations",
]


def has_conversations(run: Mapping[str, Any]) -> bool:
    """Does ``run`` have a conversations block with anything in it?"""
    block = run.get("conversations") or {}
    return bool(block.get("count") or block.get("failed") or block.get("by_turn_band"))


def _ms(summary: Mapping[str, Any] | None, stat: str) -> str:
    return format_value((summary or {}).get(stat), "ms")


def _seconds(summary: Mapping[str, Any] | None, stat: str) -> str:
    value = (summary or {}).get(stat)
    if value is None:
        return "-"
    return f"{value / 1000:.2f} s" if value >= 1000 else format_value(value, "ms")


def _affinity_words(affinity: Mapping[str, Any]) -> str:
    """``same replica 97.50% of 120 call pairs`` or ``replica not attributed``."""
    rate = affinity.get("same_replica_rate")
    if rate is None:
        return "replica not attributed"
    words = f"same replica {format_value(rate, 'fraction')} of {affinity.get('pairs')} call pairs"
    tree = affinity.get("tree_same_replica_rate")
    if tree is not None:
        words += f" ({format_value(tree, 'fraction')} across threads)"
    return words


def conversation_parts(run: Mapping[str, Any]) -> list[str]:
    """The terminal's short block: comma-separated parts for
    :func:`~pytest_llmperf.reports.line_breaks.wrap_parts` (empty without conversations)."""
    if not has_conversations(run):
        return []
    block = run["conversations"]
    label = str(run.get("label") or "")
    parts: list[str] = []
    if block.get("count") or block.get("failed"):
        head = f"{label}: {block['count']} conversation(s)"
        if block.get("failed"):
            head += f" ({block['failed']} with a failed call)"
        parts.append(head + f", {block.get('calls_mean') or 0:g} calls each")
        span, busy = block.get("makespan"), block.get("makespan_excl_tools")
        parts.append(f"makespan p50 {_seconds(span, 'p50')} p90 {_seconds(span, 'p90')}")
        parts.append(f"excl. tools p50 {_seconds(busy, 'p50')} p90 {_seconds(busy, 'p90')}")
        fan = block.get("fan_out") or {}
        threads = block.get("threads") or {}
        if (threads.get("max") or 0) > 1:
            parts.append(
                f"fan-out max {fan.get('max')} p50 {fan.get('p50')}, "
                f"threads max {threads.get('max')} p50 {threads.get('p50')}"
            )
        parts.append(_affinity_words(block.get("affinity") or {}))
    else:
        parts.append(f"{label}: by turn")
    for row in block.get("by_turn_band") or ():
        hit = row.get("cache_hit_rate")
        cache = "cache -" if hit is None else f"cache {format_value(hit, 'fraction')}"
        parts.append(f"turns {row['turns']}: TTFT p90 {_ms(row.get('ttft'), 'p90')} {cache}")
    return parts


def band_rows(block: Mapping[str, Any], key: str) -> list[list[str]]:
    """One row per band (``key``: ``by_turn_band`` or ``by_prompt_band``): the band,
    requests ok/issued, TTFT p50/p90/p99, E2E p50, mean prompt and cache hit."""
    name = "turns" if key == "by_turn_band" else "prompt"
    rows: list[list[str]] = []
    for row in block.get(key) or ():
        counts = row.get("counts") or {}
        hit = row.get("cache_hit_rate")
        prompt = row.get("prompt_tokens_mean")
        rows.append(
            [
                str(row.get(name)),
                f"{counts.get('completed', 0)}/{counts.get('issued', 0)}",
                _ms(row.get("ttft"), "p50"),
                _ms(row.get("ttft"), "p90"),
                _ms(row.get("ttft"), "p99"),
                _ms(row.get("e2e"), "p50"),
                "-" if prompt is None else f"{prompt:.0f}",
                "not reported" if hit is None else format_value(hit, "fraction"),
            ]
        )
    return rows


BAND_HEADER = ("ok/issued", "TTFT p50", "TTFT p90", "TTFT p99", "E2E p50", "prompt", "cache hit")


def conversation_figures(block: Mapping[str, Any]) -> list[str]:
    """The conversations' figures, one sentence each (the Markdown list's and the HTML
    report's): count, makespans, fan-out and threads, affinity; none without any."""
    if not (block.get("count") or block.get("failed")):
        return []
    span, busy = block.get("makespan"), block.get("makespan_excl_tools")
    fan, threads = block.get("fan_out") or {}, block.get("threads") or {}
    return [
        f"conversations: {block['count']} completed, {block.get('failed', 0)} with a "
        f"failed call; {block.get('calls_mean') or 0:g} calls each",
        f"makespan (incl. tools): p50 {_seconds(span, 'p50')}, p90 "
        f"{_seconds(span, 'p90')}, p99 {_seconds(span, 'p99')}",
        f"makespan excl. tools: p50 {_seconds(busy, 'p50')}, p90 "
        f"{_seconds(busy, 'p90')}, p99 {_seconds(busy, 'p99')}",
        f"fan-out (most calls in flight): max {fan.get('max')}, p50 {fan.get('p50')}; "
        f"threads: max {threads.get('max')}, p50 {threads.get('p50')}",
        f"affinity: {_affinity_words(block.get('affinity') or {})}",
    ]


def conversation_markdown(run: Mapping[str, Any]) -> str:
    """The Markdown block: the conversations' figures as a list, then the turn-band and
    prompt-band tables ("" without conversations)."""
    if not has_conversations(run):
        return ""
    block = run["conversations"]
    out = [f"- {line}" for line in conversation_figures(block)]
    if out:
        out.append("")
    for key, name in (("by_turn_band", "turns"), ("by_prompt_band", "prompt tokens")):
        rows = band_rows(block, key)
        if rows:
            out.append(table((name, *BAND_HEADER), rows, right=range(1, 8)).rstrip("\n"))
            out.append("")
    return "\n".join(out).rstrip() + "\n"


def conversation_properties(run: Mapping[str, Any]) -> list[tuple[str, str]]:
    """JUnit ``(name, value)`` pairs: ``llm_conversations[run0].count``,
    ``llm_conversations[makespan.p90][run0]`` = ``4.21 s``, ``[makespan_excl_tools.p90]``,
    ``[fan_out.max]``, ``[same_replica_rate]`` (``-`` not attributed) and per turn band
    ``llm_conversations[turns 2-5][ttft.p90][run0]`` and ``[turns 2-5][cache_hit_rate]``."""
    if not has_conversations(run):
        return []
    block = run["conversations"]
    where = f"[{run.get('label') or ''}]"
    name = "llm_conversations"
    props = [
        (f"{name}{where}.count", str(block.get("count", 0))),
        (f"{name}{where}.failed", str(block.get("failed", 0))),
    ]
    for metric in ("makespan", "makespan_excl_tools"):
        for stat in ("p50", "p90", "p99"):
            value = _seconds(block.get(metric), stat)
            props.append((f"{name}[{metric}.{stat}]{where}", value))
    props.append((f"{name}[fan_out.max]{where}", str((block.get("fan_out") or {}).get("max"))))
    affinity = block.get("affinity") or {}
    rate = affinity.get("same_replica_rate")
    props.append((f"{name}[same_replica_rate]{where}", format_value(rate, "fraction")))
    for row in block.get("by_turn_band") or ():
        band = f"[turns {row['turns']}]"
        props.append((f"{name}{band}[ttft.p90]{where}", _ms(row.get("ttft"), "p90")))
        hit = row.get("cache_hit_rate")
        props.append((f"{name}{band}[cache_hit_rate]{where}", format_value(hit, "fraction")))
    return props
