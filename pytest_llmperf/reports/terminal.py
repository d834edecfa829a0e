"""The ``llmperf`` section of pytest's terminal summary.

Per test one line per SLO (✓ pass, ✗ fail, ? inconclusive) with observed and
target values (on a staged run: per SLO and stage, then one line per stage
with its planned and achieved load, TTFT p99 and verdict; a run of more than
:data:`MAX_STAGE_LINES` stages lists only the stages that did not pass), its
A/B comparison with ``--llm-reference-endpoint`` (one line per run, passed or
not: the statistics compared and the largest change), and its baseline
comparisons when they say something (regressed, improved, or could not
compare); then per endpoint and model the session's merged figures and one
line per session-wide ruleset target; then, when the session did not run to its
end, one line saying so (:func:`stop_note`: interrupted, with or without runs
measured, or stopped early by pytest after runs were measured); then the paths
of reports written.
A run with ``connection_retries`` (requests sent once more on a new
connection, docs/measurement.md "Connections") gets a ``!`` line saying how
many, and the figures of a run or group name them; at 0, the normal case,
nothing is printed (the JSON and HTML reports always carry the count).
A run whose server the gate started (``--llm-server-cmd``) gets a ``server NAME
[run0]:`` line (ready time, RSS max and growth, GPU memory, CPU per output token), and
a ``✗`` line with the exit and the log's path where the server died (under
``--llm-summary=brief``, only that). With the server's metrics
(``--llm-server-metrics``), each run gets a ``server [run0]:`` line (family, source,
server TTFT p50/p99, queue p99, KV-cache max, preemptions, prefix-cache hit rate, the
cache reset; or why
they are missing); a fleet's run (``runs[].by_replica``, ``runs[].fleet``) a ``fleet
[run0]:`` block, a line per replica and per pool (:mod:`.fleet_words`); and a
failing latency SLO (ttft, ttfo, e2e, ``server.*``) says where its run's time went:
the client's TTFT p50 and p99 against the server's queue and prefill, and the
client/network remainder (:mod:`.time_split`), once per run or stage. With the request paths of
``llm_workload(structured=, tools=, adapters=, greedy=)`` a run also says what it
asked for, a line per served model (its verdict too, like a stage's), its output
comparisons with where mismatching samples part, and its invalid outputs in the
validator's words (:mod:`.terminal_outputs`); a verdict on one model names it
(``[model sim-lora-1]``).

Written for an 80-column terminal and a CI log alike: a line that would pass
the width is broken at a clause (an SLO's reason, the figures of a merged
group, an A/B line, a note) onto an indented continuation line, never
mid-figure; an SLO's line stays whole, its verdict and reason greppable together. When a session
measured several endpoints, each test's line names the one it measured.
"""

from __future__ import annotations

import textwrap
from collections.abc import Mapping, Sequence
from typing import Any

from pytest_llmperf.reports.conversation_view import conversation_parts
from pytest_llmperf.reports.fleet_words import fleet_lines
from pytest_llmperf.reports.gpu_words import gpu_parts
from pytest_llmperf.reports.line_breaks import fit, prose, wrap_parts
from pytest_llmperf.reports.outcome import NOTHING_MEASURED
from pytest_llmperf.reports.server_process import exit_message, process_parts
from pytest_llmperf.reports.session_data import SessionData, TestEntry
from pytest_llmperf.reports.steady_words import steady_line
from pytest_llmperf.reports.table import (
    MARKS,
    error_sample_lines,
    format_change,
    format_interval,
    format_value,
    stage_level,
    stage_mark,
    stage_where,
    time_split_block,
    verdict_model,
    verdict_where,
)
from pytest_llmperf.reports.terminal_outputs import invalid_lines, output_lines, valid_part
from pytest_llmperf.reports.time_split import (
    cache_reset_note,
    explains_time,
    metric_unit,
    scope_of,
    server_figures,
    server_head,
)
from pytest_llmperf.results.blank import all_blank_note
from pytest_llmperf.results.run_result import TOKEN_LENGTH_TOLERANCE
from pytest_llmperf.server_metrics.cache_reset import reset_said
from pytest_llmperf.slo.regression import RegressionVerdict
from pytest_llmperf.slo.verdicts import SloVerdict

__all__ = [
    "DEFAULT_WIDTH",
    "MAX_STAGE_LINES",
    "endpoint_label",
    "stop_note",
    "summary_lines",
    "write_terminal_summary",
]

MAX_STAGE_LINES = 20  # a run with more stages lists only those that did not pass
DEFAULT_WIDTH = 80  # a CI log's width, and pytest's when it cannot tell


def endpoint_label(endpoint: Mapping[str, Any] | None) -> str:
    """``sim:tiny`` for the embedded simulator, else the (redacted) URL."""
    endpoint = endpoint or {}
    if endpoint.get("simulator"):
        return f"sim:{endpoint['simulator']}"
    return str(endpoint.get("url") or "?")


def summary_lines(
    data: SessionData,
    session_verdicts: Sequence[SloVerdict],
    *,
    width: int | None = None,
    stopped: str = "",
    brief: bool = False,
) -> list[str]:
    """The section's lines; ``width`` (the terminal's) breaks longer ones, None keeps each
    whole (a merged group's figures then take one line). ``stopped``: why pytest ended
    the session early when nobody interrupted it (:func:`stop_note`). ``brief``
    (``--llm-summary=brief``): a test that passed with every verdict a pass gets one line
    (:func:`_brief_test_lines`) and its warnings; any other test its whole block."""
    lines: list[str] = []
    tests = data.measured_tests()
    several = len({endpoint_label(t.endpoint) for t in tests if t.endpoint}) > 1
    notes: dict[str, None] = {}  # what the server refused, said once per endpoint
    for test in tests:
        where = f"endpoint {endpoint_label(test.endpoint)}" if several else "endpoint"
        for note in ((test.endpoint or {}).get("request_fields") or {}).get("notes", ()):
            if "ignore_eos" in note and not _outputs_fell_short(test.runs):
                continue  # the refusal changed no length this test measured: nothing to do
            notes[f"{where}: {note}"] = None
        on = f" on {endpoint_label(test.endpoint)}" if several and test.endpoint else ""
        if brief and _all_passed(test):
            lines.extend(_brief_test_lines(test, on, width))
            continue
        lines.append(f"{test.nodeid} [{test.outcome}]{on}")
        if test.nothing_measured:  # the test's failure, in its own words
            lines.extend(
                fit(f"  {MARKS['fail']} {NOTHING_MEASURED}: {test.nothing_measured}", width)
            )
        # a run of many stages (a fine ramp) shows only its stages that did not pass
        many = {r["label"] for r in test.runs if len(r.get("stages") or ()) > MAX_STAGE_LINES}
        hidden = 0
        by_label = {r.get("label"): r for r in test.runs}
        explained: set[tuple[Any, Any]] = set()  # (run, stage): where its time went, said once
        for v in test.slos:
            if v.get("stage") is not None and v.get("run") in many and v["verdict"] == "pass":
                hidden += 1
                continue
            lines.append("  " + _slo_line(v))  # whole: CI greps a verdict and its reason
            judged = (v.get("run"), v.get("stage"))
            if (
                v["verdict"] == "fail"
                and not verdict_model(v)  # a model's share of a run: no split of its own
                and judged not in explained
                and judged[0] in by_label
                and explains_time(str(v.get("expr") or ""))
            ):
                explained.add(judged)
                lines.extend(_split_lines(v, by_label[judged[0]], width))
        if hidden:
            lines.append(f"  {MARKS['pass']} {hidden} more stage verdict(s) passed")
        for run in test.runs:
            if not test.slos:
                m = run["metrics"]
                parts = _brief_parts(m, run["counts"], run.get("errors"))
                lines.extend(wrap_parts([f"{run['label']}: {parts[0]}", *parts[1:]], width))
            lines.extend(_stage_lines(run, test.slos))
            if parts := conversation_parts(run):  # what an agent feels: a short block
                lines.extend(wrap_parts(parts, width, sep=";"))
            if window := steady_line(run):  # llm_load(steady=...): one line
                lines.extend(fit(f"    {run['label']}: {window}", width))
            lines.extend(output_lines(run, test.slos, width))
            if run.get("stop_reason") == "decided":  # until="decided": when, and on what
                detail = run.get("stop_detail") or "every SLO decided"
                lines.extend(fit(f"    {run['label']}: stopped early: {detail}", width))
            for line in error_sample_lines(run.get("error_samples") or (), run=run["label"]):
                lines.append(f"    ✗ {line}")
            lines.extend(invalid_lines(run, width))
            for warning in (run.get("token_lengths") or {}).get("warnings", ()):
                lines.append(f"    ! {run['label']}: {warning}")
            if blank := all_blank_note(run.get("counts") or {}):
                lines.append(f"    ! {run['label']}: {blank}")
            if run.get("server_metrics") is not None or reset_said(run.get("cache_reset")):
                lines.extend(wrap_parts(_server_parts(run), width))
            lines.extend(fleet_lines(run, test.slos, width))  # per replica and pool
            if parts := process_parts(run.get("server_process"), str(run.get("label") or "")):
                lines.extend(wrap_parts(parts, width))
            if parts := gpu_parts(run.get("gpu"), str(run.get("label") or "")):
                lines.extend(wrap_parts(parts, width))  # the GPUs over the run: one line
            lines.extend(_exit_lines(run, width))
            if retried := (run.get("counts") or {}).get("connection_retries"):
                lines.extend(_retries_lines(run["label"], retried, width))
            if run.get("reference"):  # --llm-reference-endpoint: passed or not, one line
                lines.extend(fit("  " + _ab_line(run["label"], run["reference"]), width))
        for c in _notable(test.baseline):
            lines.extend(fit("  " + _baseline_line(c), width))
        if unchanged := _unchanged_line(test.baseline):
            lines.extend(fit("  " + unchanged, width))
    lines[:0] = [line for note in notes for line in prose(note, width)]
    groups = data.groups()
    if groups:
        lines.append("session (gated runs merged per endpoint and model):")
        for key, group in groups.items():
            acc = group.accumulator
            figures = _brief_parts(acc.summary(), acc.counts(), dict(acc.errors))
            head = f"{key}: {group.runs} run(s), {group.measured_s:.1f} s measured; {figures[0]}"
            lines.extend(wrap_parts([head, *figures[1:]], width, indent="  "))
            for verdict in session_verdicts:
                if verdict.run == f"session {key}":
                    lines.append("    " + _slo_line({**verdict.to_dict(), "run": ""}))
    unjudged = [v for v in session_verdicts if v.run == "session"]
    if unjudged:  # a ruleset over no measured group (slo/session.py): one line for all
        targets = ", ".join(v.expr for v in unjudged)
        lines.extend(fit(f"{MARKS['fail']} {unjudged[0].reason} (targets {targets})", width))
    if note := stop_note(data, stopped):
        lines.extend(prose(note, width))
    return lines


def _outputs_fell_short(runs: Sequence[Mapping[str, Any]]) -> bool:
    """Whether some run's outputs came out shorter than requested (beyond the tolerance
    of ``token_lengths``): where a server's refusal of ``ignore_eos`` shows. Where none
    did, the JSON's ``request_fields`` still records the refusal."""
    for run in runs:
        deviation = (run.get("token_lengths") or {}).get("output_deviation")
        if deviation is not None and deviation < -TOKEN_LENGTH_TOLERANCE:
            return True
    return False


def _all_passed(test: TestEntry) -> bool:
    """Passed, every SLO verdict a pass, no baseline or A/B comparison worth a line."""
    return (
        test.outcome == "passed"
        and all(v.get("verdict") == "pass" for v in test.slos)
        and not _notable(test.baseline)
        and not any(
            (run.get("reference") or {}).get("verdict")
            in (RegressionVerdict.REGRESSED, RegressionVerdict.INCONCLUSIVE)
            for run in test.runs
        )
    )


def _brief_test_lines(test: TestEntry, on: str, width: int | None) -> list[str]:
    """A passed test in one line (its verdicts counted, its runs, its blank replies), then
    what still asks for attention: an all-blank run, the failures the server gave in its
    own words, invalid outputs, output lengths off the request, connections retried."""
    runs = len(test.runs)
    parts = [f"{runs} run{'s' if runs != 1 else ''}"]
    if test.slos:
        parts.insert(0, f"{MARKS['pass']} {len(test.slos)} SLO verdict(s) passed")
    blank = sum(int((run.get("counts") or {}).get("blank") or 0) for run in test.runs)
    if blank:  # shown wherever failed requests are: replies generated but blank
        completed = sum(int((run.get("counts") or {}).get("completed") or 0) for run in test.runs)
        parts.append(f"blank {blank} ({blank / completed * 100:.2f}%)")
    lines = fit(f"{test.nodeid} [{test.outcome}]{on}: {', '.join(parts)}", width)
    for run in test.runs:
        if note := all_blank_note(run.get("counts") or {}):
            lines.append(f"    ! {run['label']}: {note}")
        for line in error_sample_lines(run.get("error_samples") or (), run=run["label"]):
            lines.append(f"    ✗ {line}")
        lines.extend(invalid_lines(run, width))
        for warning in (run.get("token_lengths") or {}).get("warnings", ()):
            lines.append(f"    ! {run['label']}: {warning}")
        if retried := (run.get("counts") or {}).get("connection_retries"):
            lines.extend(_retries_lines(run["label"], retried, width))
        lines.extend(_exit_lines(run, width))
    return lines


def _exit_lines(run: Mapping[str, Any], width: int | None) -> list[str]:
    """``✗ run0: server exited with signal 9 (SIGKILL) at 12.3 s into run0 (log: PATH)``
    where the run's server died; nothing while it lives."""
    block = run.get("server_process")
    died = exit_message(block)
    if not died:
        return []
    log = (block or {}).get("log")
    where = f" (log: {log})" if log else ""
    return fit(f"    {MARKS['fail']} {run.get('label')}: {died}{where}", width)


def stop_note(data: SessionData, stopped: str = "") -> str:
    """The last line when the session did not run to its end ("" when it did).

    Interrupted (``data.interrupted``: Ctrl-C, SIGTERM, a KeyboardInterrupt in a test):
    the figures cover what was measured until then, or nothing was measured. Stopped by
    pytest or a plugin, not interrupted (``stopped``: pytest's words, such as ``1 error
    during collection``, or a ``pytest.exit`` reason, which pytest prints itself): named
    only when runs were measured before it; with none measured there is nothing to add.
    """
    measured = any(t.runs for t in data.tests.values())
    if data.interrupted:
        if measured:
            return "session was interrupted: figures cover what was measured until then"
        return "session was interrupted before any run was measured"
    if stopped and measured:
        return f"session stopped early ({stopped}): figures cover what was measured until then"
    return ""


def _stage_lines(run: Mapping[str, Any], slos: Sequence[Mapping[str, Any]]) -> list[str]:
    """A staged run's stages, one line each: planned and achieved load, ttft p99, verdict."""
    stages = run.get("stages") or ()
    label = run.get("label") or ""
    lines: list[str] = []
    hidden = 0
    for stage in stages:
        k = stage["index"]
        mark = stage_mark([v for v in slos if v.get("run") == label and v.get("stage") == k])
        if len(stages) > MAX_STAGE_LINES and mark in ("pass", ""):
            hidden += 1
            continue
        counts, ttft = stage["counts"], stage["metrics"]["ttft"]
        planned = stage_level(stage)
        if stage.get("concurrency") is None:
            drawn = stage.get("schedule_rate")
            planned += " planned" + (f" ({drawn:.2f} drawn)" if drawn is not None else "")
        verdict = f"; {MARKS[mark]} {mark}" if mark else ""
        lines.append(
            f"    {label + ' ' if label else ''}stage {k}: {planned}, "
            f"{stage['achieved_rate']:.2f} req/s achieved; "
            f"{counts['completed']}/{counts['issued']} ok, "
            f"ttft p99 {format_value(ttft['p99'], 'ms')}{verdict}"
        )
    if hidden:
        where = f"{label}: " if label else ""
        lines.append(f"    {where}{hidden} more stage(s) passed or were not judged")
    return lines


def _split_lines(v: Mapping[str, Any], run: Mapping[str, Any], width: int | None) -> list[str]:
    """Under a failing latency SLO: where its run's (or stage's) TTFT went, p50 and p99
    (a head broken at a clause to fit ``width``, then names over figures, never broken)::

        where the time went [run0] (ms; server histograms, bucket-bounded, n=1200):
                  ttft = server queue + prefill + client/network
            p50   39.6 =         5.00 +    25.0 +           9.60
            p99  131.0 =         50.0 +    60.0 +           21.0
    """
    where = f"[{v.get('run')}]" + (f" [{stage_where(v)}]" if v.get("stage") is not None else "")
    block = time_split_block(where, scope_of(run, v.get("stage")), figures=False)
    if not block:
        return []
    lines = fit("    where the time went " + block[0], width)
    for line in block[1:]:
        if line.lstrip().startswith("("):  # a note on what the figures leave out
            lines += textwrap.wrap(
                line.strip(),
                width or len(line) + 8,
                initial_indent="      ",
                subsequent_indent="       ",
                break_long_words=False,
            )
        else:
            lines.append("    " + line)  # names over figures: never broken
    return lines


def _server_parts(run: Mapping[str, Any]) -> list[str]:
    """A run's server line, as parts for :func:`_wrap`: ``server [run0]: vllm at
    http://h:8000/metrics`` (or ``none (why)``), its key figures, what the cache reset did."""
    server = run.get("server_metrics")
    head = f"server [{run.get('label')}]: " + (
        server_head(server) if server is not None else "metrics off"
    )
    reset = cache_reset_note(run.get("cache_reset"))
    return [head, *(server_figures(server) if server else ()), *([reset] if reset else [])]


def _slo_line(v: Mapping[str, Any]) -> str:
    mark = MARKS.get(v["verdict"], " ")
    run = f" [{v['run']}]" if v.get("run") else ""
    where = verdict_where(v)
    run += f" [{where}]" if where else ""
    why = f"  ({v['reason']})" if v.get("reason") else ""
    return (
        f"{mark} {v['expr']}{run}: observed {format_value(v['observed'], v['unit'])}"
        + (f", interval {interval}" if (interval := format_interval(v)) else "")
        + f", target {format_value(v['target'], v['unit'])}, n={v.get('samples', 0)}{why}"
    )


def _notable(checks: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    notable = (
        RegressionVerdict.REGRESSED,
        RegressionVerdict.IMPROVED,
        RegressionVerdict.INCONCLUSIVE,
    )
    return [c for c in checks if c["verdict"] in notable]


def _baseline_line(c: Mapping[str, Any]) -> str:
    mark = MARKS.get(c["verdict"], " ")
    if c["metric"] == "*":
        return f"{mark} baseline [{c['run']}]: {c['verdict']}: {c['reason']}"
    why = f"  ({c['reason']})" if c.get("reason") else ""
    p = f", p={c['p_value']:.3g}" if c.get("p_value") is not None else ""
    if c.get("mde") is not None:  # the smallest change caught with 80% power (multiplicity.py)
        p += f", detects >= {format_change(c['mde'])} at p<{c['level']:.2g}"
    unit = metric_unit(str(c.get("metric") or ""))  # a server metric's own unit, else ms
    return (
        f"{mark} baseline {c['name']} [{c['run']}]: {c['verdict']}: "
        f"{format_value(c['baseline'], unit)} -> {format_value(c['current'], unit)} "
        f"({format_change(c['change'])}{p}){why}"
    )


def _unchanged_line(checks: Sequence[Mapping[str, Any]]) -> str:
    """The unchanged comparisons in one line, with the smallest change each could have
    caught (80% power, slo/multiplicity.py): ``= baseline: 12 unchanged (ttft.p50 ...
    e2e.mean); detects >= +6.1% to +14.0% at p<0.0002``."""
    same = [c for c in checks if c.get("verdict") == RegressionVerdict.UNCHANGED]
    mdes = [float(c["mde"]) for c in same if c.get("mde") is not None]
    if not same or not mdes:
        return ""
    levels = {f"{float(c['level']):.2g}" for c in same if c.get("level") is not None}
    span = format_change(min(mdes))
    if max(mdes) > min(mdes):
        span += f" to {format_change(max(mdes))}"
    return (
        f"{MARKS.get('unchanged', '=')} baseline: {len(same)} unchanged; "
        f"detects >= {span} at p<{', '.join(sorted(levels))} (80% power)"
    )


def _ab_line(label: str, ab: Mapping[str, Any]) -> str:
    """One run's A/B comparison: its verdict, what was compared and the largest change.

    ``  = A/B [run0] vs sim:fixed: passed (unchanged, allowed +5%); compared ttft.p50,
    tpot.p90; largest change ttft.p50 +1.1%``
    """
    verdict = str(ab.get("verdict") or "")
    passed = "failed" if verdict == RegressionVerdict.REGRESSED else "passed"
    if verdict == RegressionVerdict.INCONCLUSIVE:
        passed = "not judged"
    checks = list(ab.get("checks") or ())
    allowed = _allowed(ab.get("thresholds") or {})
    names = ", ".join(str(c.get("name")) for c in checks) or "nothing"
    changed = [c for c in checks if c.get("change") is not None]
    largest = max(changed, key=lambda c: abs(c["change"]), default=None)
    most = (
        f"; largest change {largest['name']} {format_change(largest['change'])}"
        if largest is not None
        else ""
    )
    return (
        f"{MARKS.get(verdict, ' ')} A/B [{label}] vs {endpoint_label(ab.get('reference_endpoint'))}"
        f": {passed} ({verdict}{allowed}); compared {names}{most}"
    )


def _allowed(thresholds: Mapping[str, float]) -> str:
    default = thresholds.get("default")
    if default is None:
        return ""
    named = "".join(f", {k} +{v * 100:g}%" for k, v in thresholds.items() if k != "default")
    return f", allowed +{default * 100:g}%{named}"


def _retries_lines(label: str, retried: int, width: int | None) -> list[str]:
    """A run's ``connection_retries``, said in full (wrapped at spaces to ``width``)."""
    text = (
        f"! {label}: {retried} request(s) sent once more on a new connection: the server"
        " closed a reused one before answering (connection_retries; their times count"
        " from the first send)"
    )
    if width is None:
        return ["    " + text]
    return textwrap.wrap(text, width, initial_indent="    ", subsequent_indent="      ")


def _brief_parts(
    metrics: dict[str, Any], counts: dict[str, int], errors: dict[str, int] | None = None
) -> list[str]:
    ttft = metrics["ttft"]
    tpot = metrics["tpot"]
    # Why requests failed, most frequent first (categories: docs/fault-matrix.md).
    why = ", ".join(f"{k} {n}" for k, n in sorted((errors or {}).items(), key=lambda kv: -kv[1]))
    retried = counts.get("connection_retries", 0)
    blank = counts.get("blank", 0)  # completed with no visible text: beside the errors
    if metrics.get("embedding_inputs") and not ttft.get("count"):  # no token stream: e2e
        e2e = metrics["e2e"]
        latency = [
            f"e2e p50 {format_value(e2e['p50'], 'ms')} p99 {format_value(e2e['p99'], 'ms')}",
            f"{metrics['embedding_inputs_per_s']:.1f} inputs/s "
            f"({metrics['embedding_dimensions']:g} dimensions)",
            _per_s(metrics["request_throughput"], 2, "req/s"),
            _per_s(metrics["input_throughput"], 1, "input tok/s"),
        ]
    else:
        latency = [
            f"ttft p50 {format_value(ttft['p50'], 'ms')} p99 {format_value(ttft['p99'], 'ms')}",
            f"tpot p50 {format_value(tpot['p50'], 'ms')} p99 {format_value(tpot['p99'], 'ms')}",
            _per_s(metrics["request_throughput"], 2, "req/s"),  # None: no steady window
            _per_s(metrics["output_throughput"], 1, "tok/s"),
        ]
    images = metrics.get("images")
    return [
        f"{counts['completed']}/{counts['issued']} ok",
        *latency,
        *([f"{images} images ({_kib(metrics['image_bytes'])})"] if images else []),
        f"errors {metrics['error_rate'] * 100:.2f}%" + (f" ({why})" if why else ""),
        *([f"blank {blank} ({metrics.get('blank_rate', 0) * 100:.2f}%)"] if blank else []),
        *([valid] if (valid := valid_part({"metrics": metrics, "counts": counts})) else []),
        *([f"connection retries {retried}"] if retried else []),
    ]


def _per_s(value: float | None, digits: int, unit: str) -> str:
    """A throughput as the summary writes it; ``-`` where an empty steady window has none."""
    return f"- {unit}" if value is None else f"{value:.{digits}f} {unit}"


def _kib(nbytes: int) -> str:
    return f"{nbytes / 1024:.0f} KiB" if nbytes < 10 * 1024 * 1024 else f"{nbytes / 2**20:.1f} MiB"


def write_terminal_summary(
    terminalreporter: Any,
    data: SessionData,
    session_verdicts: Sequence[SloVerdict],
    written: Sequence[str],
    *,
    errors: Sequence[str] = (),
    stopped: str = "",
    brief: bool = False,
) -> None:
    """``errors``: extension hooks that failed (pytest_llmperf.hook_calls), shown last, in red;
    ``stopped``: why pytest ended the session early without an interrupt (:func:`stop_note`);
    ``brief``: a line per passed test (:func:`summary_lines`)."""
    tw = getattr(terminalreporter, "_tw", None)  # pytest's writer knows the terminal's width
    width = getattr(tw, "fullwidth", DEFAULT_WIDTH) if tw is not None else DEFAULT_WIDTH
    width = width if width >= 40 else DEFAULT_WIDTH
    lines = summary_lines(data, session_verdicts, width=width, stopped=stopped, brief=brief)
    if not lines and not written and not errors:
        return
    # end the last test file's progress line first: write_line would do it after the
    # header otherwise, leaving a blank line under it
    ensure_newline = getattr(terminalreporter, "ensure_newline", None)
    if callable(ensure_newline):
        ensure_newline()
    terminalreporter.section("llmperf")
    for line in lines:
        terminalreporter.write_line(line)
    for path in written:
        terminalreporter.write_line(f"llmperf report: {path}")
    for error in errors:
        terminalreporter.write_line(error, red=True)
