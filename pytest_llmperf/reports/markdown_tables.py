"""The Markdown summary's per-test pieces, read from the JSON report's ``tests[]``
entries: what a test came to (:func:`test_view`), and its checks (:func:`checks_block`):
the SLO table, each comparison side's table, the notes, where a failing latency's time
went, the failed requests, the outputs checked and compared
(:mod:`~pytest_llmperf.reports.markdown_outputs`). :mod:`pytest_llmperf.reports.markdown`
puts them together with the runs' and the session's
(:mod:`pytest_llmperf.reports.markdown_runs`).

Figures are formatted as every other report formats them
(:func:`~pytest_llmperf.reports.table.format_value`), so a cell reads back as the JSON
value written the same way.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pytest_llmperf.errors import LlmPerfUsageError
from pytest_llmperf.gfm import code, table, text
from pytest_llmperf.reports.markdown_outputs import outputs_block
from pytest_llmperf.reports.outcome import NOTHING_MEASURED
from pytest_llmperf.reports.table import (
    error_sample_lines,
    format_change,
    format_interval,
    format_value,
    stage_where,
    verdict_model,
    verdict_where,
)
from pytest_llmperf.reports.time_split import (
    explains_time,
    metric_unit,
    scope_of,
    server_figures,
    time_split,
)
from pytest_llmperf.specs.slo import parse_slo

__all__ = ["MARKS", "TestView", "checks_block", "mark", "test_view"]

MARKS = {
    "pass": "✅ pass",
    "fail": "❌ fail",
    "inconclusive": "⚠️ inconclusive",
    "regressed": "❌ regressed",
    "improved": "🟢 improved",
    "unchanged": "✅ unchanged",
}


def mark(verdict: Any) -> str:
    return MARKS.get(str(verdict), str(verdict))


@dataclass(frozen=True)
class TestView:
    """What a report test came to: ``kind`` ``fail`` (an SLO violated, a regression, a
    worse A/B candidate, every request failed, SLOs over nothing measured, or the body
    failed), ``inconclusive``,
    ``pass``, or its pytest outcome (``skipped``, ``interrupted``); ``why``: what made it
    fail, in words."""

    __test__ = False  # not a pytest test class

    test: Mapping[str, Any]
    kind: str
    why: list[str] = field(default_factory=list)

    @property
    def nodeid(self) -> str:
        return str(self.test.get("nodeid", ""))


def _comparisons(test: Mapping[str, Any]) -> list[tuple[str, Mapping[str, Any]]]:
    """The test's baseline/history checks and A/B checks: ``(side, check dict)``, side
    ``baseline``, ``history`` or ``reference``."""
    out: list[tuple[str, Mapping[str, Any]]] = []
    for check in test.get("baseline") or []:
        side = (
            "history" if str(check.get("compared_with", "")).startswith("history") else "baseline"
        )
        out.append((side, check))
    for run in test.get("runs") or []:
        reference = run.get("reference")
        if isinstance(reference, Mapping):
            out += [("reference", c) for c in reference.get("checks") or []]
    return out


def test_view(test: Mapping[str, Any]) -> TestView:
    """Classify ``test`` as :func:`~pytest_llmperf.reports.outcome.judge_test` did."""
    slos = list(test.get("slos") or [])
    why = []
    failed = [v for v in slos if v.get("verdict") == "fail"]
    if failed:
        why.append(f"{len(failed)} SLO(s) violated")
    regressed = [(s, c) for s, c in _comparisons(test) if c.get("verdict") == "regressed"]
    for side in ("baseline", "history", "reference"):
        n = sum(1 for s, _ in regressed if s == side)
        if n:
            worse = "worse than the reference" if side == "reference" else f"regressed ({side})"
            why.append(f"{n} statistic(s) {worse}")
    runs = [r for r in test.get("runs") or [] if r.get("gated", True)]
    dead = [r for r in runs if (r.get("counts") or {}).get("issued") and not _completed(r)]
    if unmeasured := test.get("nothing_measured"):  # the dead runs' words are in it
        why.append(f"{NOTHING_MEASURED}: {unmeasured}")
    elif slos and dead:
        why.append(f"every request failed in {', '.join(str(r.get('label')) for r in dead)}")
    outcome = str(test.get("outcome", ""))
    if why:
        return TestView(test, "fail", why)
    undecided = []
    if any(v.get("verdict") == "inconclusive" for v in slos):
        undecided.append("SLO(s) not decided")
    unjudged = [
        c
        for side, c in _comparisons(test)
        if side != "reference" and c.get("verdict") == "inconclusive" and not c.get("note_only")
    ]
    if unjudged:  # judge_test: a baseline that judged nothing is inconclusive
        undecided.append(f"{len(unjudged)} baseline comparison(s) not made")
    if undecided:
        return TestView(test, "inconclusive", undecided)
    if outcome in ("failed", "error"):
        return TestView(test, "fail", ["the test body failed (not an SLO): see its log"])
    if outcome == "passed":
        return TestView(test, "pass")
    return TestView(test, outcome or "unknown")


def _completed(run: Mapping[str, Any]) -> int:
    return int((run.get("counts") or {}).get("completed") or 0)


def _slo_key(v: Mapping[str, Any]) -> tuple[str, str, str] | None:
    try:
        slo = parse_slo(str(v.get("expr", "")))
    except LlmPerfUsageError:
        return None
    return slo.metric, str(slo.stat or ""), str(v.get("run") or "")


def checks_block(view: TestView) -> str:
    """A test's checks: its SLOs as a table (observed, target, the baseline's, history's or
    reference's value of the same statistic and the change, verdict), then each side's
    comparisons as a table of their own (baseline file, history, A/B reference), the notes
    (inconclusive reasons, what each side was), where the time of a failing latency SLO
    went, and the failed requests in the server's words."""
    test = view.test
    slos = list(test.get("slos") or [])
    comparisons = _comparisons(test)
    out = []
    if slos:
        out.append(_slo_table(slos, comparisons))
    elif not comparisons:
        out.append("No SLO or comparison was judged.\n")
    notes = [
        f"{code(v['expr'], cell=False)} [{text(v.get('run'))}]"
        + (f" [{text(where)}]" if (where := verdict_where(v)) else "")
        + f": {text(v['reason'])}"
        for v in slos
        if v.get("reason")
    ]
    if notes:
        out.append("\n" + "".join(f"- {line}\n" for line in notes))
    for side in ("baseline", "history", "reference"):
        checks = [c for s, c in comparisons if s == side]
        if checks:
            out.append("\n" + _comparison_table(side, checks, test))
    split = _time_split_tables(slos, list(test.get("runs") or []))
    if split:
        out.append("\n" + split)
    errors = [
        line
        for run in test.get("runs") or []
        for line in error_sample_lines(run.get("error_samples") or [], run=str(run.get("label")))
    ]
    if errors:
        out.append("\nFailed requests, in the server's words:\n\n")
        out.append("".join(f"- {code(line, cell=False)}\n" for line in errors[:10]))
        if len(errors) > 10:
            out.append(f"- … {len(errors) - 10} more (JSON report: `error_samples`)\n")
    out.append(outputs_block(list(test.get("runs") or [])))
    return "".join(out)


def _slo_table(
    slos: Sequence[Mapping[str, Any]], comparisons: Sequence[tuple[str, Mapping[str, Any]]]
) -> str:
    """SLO, run, (stage,) (model,) observed, target, the compared value of the same statistic and
    run (a baseline's, the history's or the reference's) and the change, verdict."""
    staged = any(v.get("stage") is not None for v in slos)
    modelled = any(verdict_model(v) for v in slos)
    by_stat = {
        (str(c.get("metric")), str(c.get("stat")), str(c.get("run") or "")): (side, c)
        for side, c in comparisons
    }
    sides = {side for side, c in comparisons if c.get("metric") != "*"}
    compared = sides.pop() if len(sides) == 1 else "compared with"
    header = ["SLO", "run", "observed", "interval", "target", compared, "change", "verdict"]
    if modelled:
        header.insert(2, "model")
    if staged:
        header.insert(2, "stage")
    rows = []
    for v in slos:
        unit = str(v.get("unit") or "ms")
        parts = str(v.get("expr", "")).split()
        op = parts[1] if len(parts) > 2 else ""
        key = _slo_key(v)
        whole = v.get("stage") is None and not verdict_model(v)  # compared: whole runs only
        side, check = by_stat.get(key, ("", {})) if key and whole else ("", {})
        other = check.get("reference" if side == "reference" else "baseline") if check else None
        cells = [
            code(v.get("expr", "")),
            text(v.get("run") or "-"),
            format_value(v.get("observed"), unit),
            text(format_interval(v) or "-"),
            text(f"{op} {format_value(v.get('target'), unit)}".strip()),
            format_value(other, unit) if check else "-",
            format_change(check.get("change")) if check else "-",
            mark(v.get("verdict")),
        ]
        if modelled:
            cells.insert(2, code(verdict_model(v)) if verdict_model(v) else "-")
        if staged:
            cells.insert(2, text(stage_where(v).removeprefix("stage ") or "-"))
        rows.append(cells)
    first = 2 + staged + modelled
    return table(header, rows, right=range(first, first + 5))


def _comparison_table(
    side: str, checks: Sequence[Mapping[str, Any]], test: Mapping[str, Any]
) -> str:
    """One side's comparisons: what it was, then statistic, run, this run's value, the
    side's, change, allowed slowdown, p, verdict; the notes (a run with nothing to
    compare with, a reason, a comparison across different server fingerprints)."""
    rows = []
    notes = []
    for c in checks:
        if c.get("metric") == "*":  # a note on its whole run: no baseline for it, say
            notes.append(
                f"[{text(c.get('run'))}] {text(c.get('verdict'))}: {text(c.get('reason'))}"
            )
            continue
        unit = metric_unit(str(c.get("metric")))
        name = c.get("name") or f"{c.get('metric')}.{c.get('stat')}"
        current = c.get("candidate") if side == "reference" else c.get("current")
        other = c.get("reference") if side == "reference" else c.get("baseline")
        threshold = c.get("threshold")
        p = c.get("p_value")
        mde = c.get("mde")  # the smallest slowdown caught with 80% power (slo/multiplicity.py)
        rows.append(
            [
                code(name),
                text(c.get("run") or "-"),
                format_value(current, unit),
                format_value(other, unit),
                format_change(c.get("change")),
                "-" if threshold is None else f"+{float(threshold) * 100:g}%",
                "-" if p is None else f"{float(p):.3g}",
                "-" if mde is None else f"≥ {format_change(mde)}",
                mark(c.get("verdict")),
            ]
        )
        if c.get("reason"):
            notes.append(f"{code(name, cell=False)} [{text(c.get('run'))}]: {text(c['reason'])}")
        if c.get("comparable") is False:
            differs = ", ".join(str(d) for d in c.get("differs") or []) or "the fingerprints"
            notes.append(f"[{text(c.get('run'))}] not comparable: differs in {text(differs)}")
    words = _side_words(side, checks[0], test)
    out = [f"Compared with the {side}" + (f" ({words})" if words else "") + ":\n\n"]
    if rows:
        header = (
            *("statistic", "run", "this run", side, "change"),
            *("allowed", "p", "detects", "verdict"),
        )
        out.append(table(header, rows, right=range(2, 8)))
    notes = list(dict.fromkeys(notes))  # a run's note once, not per statistic
    if notes:
        out.append(("\n" if rows else "") + "".join(f"- {line}\n" for line in notes))
    return "".join(out)


def _side_words(side: str, check: Mapping[str, Any], test: Mapping[str, Any]) -> str:
    """What the ``side`` a comparison was made with is: a baseline file, the history's
    runs, the reference endpoint."""
    if side == "reference":
        for run in test.get("runs") or []:
            ref = run.get("reference")
            if isinstance(ref, Mapping):
                where = (ref.get("reference_endpoint") or {}).get("url") or "the reference"
                return f"{code(where, cell=False)}, {ref.get('blocks', '?')} interleaved blocks"
        return ""
    what = str(check.get("compared_with") or "")
    return code(what, cell=False) if what else ""


def _time_split_tables(slos: Sequence[Mapping[str, Any]], runs: Sequence[Mapping[str, Any]]) -> str:
    """For each run (or stage) with a failing latency SLO, once: its TTFT split (ms) as a
    table, and the server's key figures."""
    by_label = {str(r.get("label") or ""): r for r in runs}
    seen: set[tuple[str, Any]] = set()
    out = []
    for v in slos:
        key = (str(v.get("run") or ""), v.get("stage"))
        if v.get("verdict") != "fail" or key in seen or key[0] not in by_label:
            continue
        if not explains_time(str(v.get("expr") or "")) or verdict_model(v):
            continue  # a model's share of a run has no time split of its own
        seen.add(key)
        scope = scope_of(by_label[key[0]], key[1])
        where = text(key[0]) + (f" ({text(stage_where(v))})" if key[1] is not None else "")
        split = time_split(scope)
        server = scope.get("server_metrics")
        figures = server_figures(server) if isinstance(server, Mapping) else []
        if split is not None:
            header = ["", "ttft", *(p.label for p in split.parts)]
            rows = [
                [
                    stat,
                    format_value(split.ttft.get(stat), "ms"),
                    *(format_value(p.values.get(stat), "ms") for p in split.parts),
                ]
                for stat in ("p50", "p99")
            ]
            out.append(f"Where the time went [{where}] ({text(split.source)}):\n\n")
            out.append(table(header, rows, right=range(1, len(header))))
            for note in split.notes:
                out.append(f"\n*{text(note)}*\n")
        elif server is not None:
            why = ", ".join(figures) if figures else server.get("missing") or "no figures"
            out.append(f"Where the time went [{where}]: no split; server: {text(why)}\n")
            continue
        if figures:
            out.append(f"\nServer [{where}]: {text(', '.join(figures))}\n")
    return "\n".join(block.rstrip("\n") + "\n" for block in _paragraphs(out))


def _paragraphs(pieces: Sequence[str]) -> list[str]:
    """``pieces`` joined into paragraphs: a piece that starts a new one (a heading line)
    opens the next."""
    out: list[str] = []
    for piece in pieces:
        if out and not piece.startswith("Where the time went"):
            out[-1] += piece
        else:
            out.append(piece)
    return out
