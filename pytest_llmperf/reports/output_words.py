"""What every report says about a run's outputs, in the same words.

Issue 28's paths add three things a report must show besides latencies: whether the
outputs were valid (``counts.invalid``, ``valid_rate``, ``invalid_samples``: why the
validator refused them), whether they equal another side's (``output_match``,
``output_consistency``: which samples differ and at which token they part), and what
the workload asked for (``structured``, ``tools``, ``adapters``, ``greedy``). The
terminal, HTML, Markdown and JUnit reports all read the JSON report's run dicts, and
all phrase these through this module, so a figure reads the same wherever it is shown
(and :mod:`tests.reports` can read it back and compare).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from pytest_llmperf.reports.table import format_value
from pytest_llmperf.results.outputs import sample_words

__all__ = [
    "AGAINST_WORDS",
    "COMPARISONS",
    "against_words",
    "compare_head",
    "compared_outputs",
    "invalid_sample_lines",
    "mismatched",
    "output_notes",
    "parting_words",
    "path_parts",
    "tool_choice_word",
    "validity",
]

# the run dict's keys of the two output comparisons, in the order reports show them
COMPARISONS = ("output_match", "output_consistency")

# ``OutputMatch.against``: whose outputs a run's were compared with
AGAINST_WORDS = {
    "baseline": "the baseline's",
    "history": "history's last good run's",
    "reference": "the reference endpoint's",
    "alone": "their outputs sent alone",
}


def invalid_sample_lines(samples: Sequence[Mapping[str, Any]], *, run: str = "") -> list[str]:
    """One line per distinct reason an output failed its check, in the validator's words:
    ``schema x3: $.title: 'Lisbon' is too long`` (like
    :func:`~pytest_llmperf.reports.table.error_sample_lines`)."""
    where = f"{run}: " if run else ""
    return [f"{where}{s.get('kind')} x{s.get('count')}: {s.get('message')}" for s in samples]


def validity(run: Mapping[str, Any]) -> tuple[int, int, float] | None:
    """``(invalid, checked, valid_rate)`` of a run (or a stage's or model's entry) whose
    outputs were checked; None when none was (no ``valid_rate``: nothing to say).

    ``checked`` is ``counts.checked`` where the accumulator gives it, else derived from
    the rate (``invalid / (1 - valid_rate)``), else the completed requests."""
    metrics = run.get("metrics") or {}
    counts = run.get("counts") or {}
    rate = metrics.get("valid_rate")
    invalid = int(counts.get("invalid") or 0)
    if not isinstance(rate, (int, float)) or isinstance(rate, bool):
        return None
    checked = counts.get("checked")
    if not isinstance(checked, int):
        checked = round(invalid / (1 - rate)) if rate < 1 else int(counts.get("completed") or 0)
    return invalid, checked, float(rate)


def compared_outputs(run: Mapping[str, Any]) -> list[tuple[str, Mapping[str, Any]]]:
    """The run's output comparisons that were made: ``[("output_match", {...})]``."""
    return [
        (key, entry) for key in COMPARISONS if isinstance(entry := run.get(key), Mapping) and entry
    ]


def mismatched(match: Mapping[str, Any]) -> int:
    """How many compared samples differ (``mismatched``; else from the share)."""
    said = match.get("mismatched")
    if isinstance(said, int):
        return said
    compared = int(match.get("compared") or 0)
    share = match.get("share")
    if isinstance(share, (int, float)) and compared:
        return compared - round(float(share) * compared)
    return len(match.get("mismatches") or ())


def against_words(match: Mapping[str, Any]) -> str:
    """Whose outputs these were compared with: ``the baseline's``, ``their outputs sent
    alone``."""
    against = str(match.get("against") or "")
    return AGAINST_WORDS.get(against, f"the {against}'s" if against else "the other side's")


def compare_head(name: str, match: Mapping[str, Any], *, exactly: bool = False) -> str:
    """``output_match 90.00%: 36/40 samples equal the baseline's`` (``name``: the
    metric, ``match``: the run's ``output_match`` or ``output_consistency``);
    ``exactly`` adds what exactly they were compared with (``(baseline b.json
    (2026-11-25T22:00:00+00:00))``; not for outputs sent alone, which the head says)."""
    compared = int(match.get("compared") or 0)
    equal = compared - mismatched(match)
    head = (
        f"{name} {format_value(match.get('share'), 'fraction')}: "
        f"{equal}/{compared} samples equal {against_words(match)}"
    )
    what = str(match.get("compared_with") or "")
    alone = match.get("against") == "alone"  # "alone (concurrency 1)": the head said it
    return head + (f" ({what})" if exactly and what and not alone else "")


def parting_words(match: Mapping[str, Any], *, limit: int | None = None) -> str:
    """Where mismatching samples part from the other side's output: ``#3 at token 12,
    #17 at token 0`` (the first ``limit``, then ``+N more``); ``""`` when all agree.
    A sample whose marks cannot say where (``position`` None) reads ``#3 (differs)``."""
    mismatches = list(match.get("mismatches") or ())
    shown = mismatches if limit is None else mismatches[:limit]
    words = [_parting(m) for m in shown]
    more = max(mismatched(match), len(mismatches)) - len(shown)
    if more > 0:
        words.append(f"+{more} more")
    return ", ".join(words)


def _parting(m: Mapping[str, Any]) -> str:
    position = m.get("position")
    return f"#{sample_words(m)} " + ("(differs)" if position is None else f"at token {position}")


def output_notes(run: Mapping[str, Any]) -> list[str]:
    """Why a comparison the run asked for was not made: ``output_match not measured:
    no baseline, history or reference outputs to compare with``."""
    notes = run.get("output_notes") or {}
    if not isinstance(notes, Mapping):
        return []
    return [f"{name} not measured: {why}" for name, why in notes.items() if why]


def path_parts(workload: Mapping[str, Any]) -> list[str]:
    """What the workload asked of the server beyond plain text, one phrase each:
    ``structured output (schema output)``, ``tools get_weather, search (tool_choice
    required)``, ``adapters sim-lora-1 40%, sim-lora-2 40%, base 20%``, ``greedy``;
    ``[]`` for a plain workload."""
    parts = []
    structured = workload.get("structured")
    if structured:
        parts.append(f"structured output (schema {structured})")
    tools = workload.get("tools")
    if tools:
        names = ", ".join(str(t) for t in tools) if isinstance(tools, (list, tuple)) else tools
        choice = tool_choice_word(workload.get("tool_choice"))
        parts.append(f"tools {names}" + (f" (tool_choice {choice})" if choice else ""))
    adapters = workload.get("adapters")
    if isinstance(adapters, Mapping) and adapters:
        shares = ", ".join(f"{name} {_share(w)}" for name, w in adapters.items())
        parts.append(f"adapters {shares}")
    if workload.get("greedy"):
        parts.append("greedy")
    return parts


def tool_choice_word(choice: Any) -> str:
    """``auto``, ``required``, ``none``, or a named function's name."""
    if isinstance(choice, Mapping):
        function = choice.get("function")
        name = function.get("name") if isinstance(function, Mapping) else choice.get("name")
        return str(name or "")
    return str(choice or "")


def _share(weight: Any) -> str:
    try:
        return f"{float(weight) * 100:g}%"
    except (TypeError, ValueError):
        return str(weight)
