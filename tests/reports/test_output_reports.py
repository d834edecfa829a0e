"""Issue 28's request paths in every report: the invalid outputs and ``valid_rate``, the
per-model table and verdicts, the output comparisons with where mismatching samples
part, and what the workload asked of the server.

Built from a run of records (:mod:`paths_session`: no server), each report is read back
and compared with the JSON report's values, as :mod:`test_reports_agree` does for a
real session; a plain run's reports gain none of it.
"""

from __future__ import annotations

import re
from dataclasses import replace
from typing import Any

import pytest
from paths_session import (
    INVALID,
    MISMATCHES,
    MS,
    NODEID,
    paths_record,
    paths_run,
    paths_session,
    paths_verdicts,
)
from synthetic_session import ENDPOINT, make_session_data
from test_reports_agree import assert_shows, read_tables

from pytest_llmperf.reports.html import build_html_report
from pytest_llmperf.reports.json_report import build_report
from pytest_llmperf.reports.junit import junit_properties, run_properties
from pytest_llmperf.reports.markdown import build_markdown
from pytest_llmperf.reports.outcome import judge_test
from pytest_llmperf.reports.output_words import (
    compare_head,
    parting_words,
    path_parts,
    validity,
)
from pytest_llmperf.reports.session_data import SessionData
from pytest_llmperf.reports.table import verdict_table, verdict_where
from pytest_llmperf.reports.terminal import summary_lines
from pytest_llmperf.reports.terminal_outputs import MAX_MODEL_LINES
from pytest_llmperf.results.accumulator import MetricsAccumulator
from pytest_llmperf.slo.verdicts import SloVerdict, Verdict, evaluate, evaluate_models
from pytest_llmperf.specs.slo import parse_slo

MODELS = ("sim-lora-1", "sim-lora-2", "sim-model")


def json_of(data: SessionData) -> dict[str, Any]:
    return build_report(data, endpoint=ENDPOINT, session={"exitstatus": 1})


@pytest.fixture(scope="module")
def data() -> SessionData:
    return paths_session()


@pytest.fixture(scope="module")
def report(data: SessionData) -> dict[str, Any]:
    return json_of(data)


@pytest.fixture(scope="module")
def run(report: dict[str, Any]) -> dict[str, Any]:
    (test,) = report["tests"]
    (only,) = test["runs"]
    return dict(only)


# -- the JSON report ------------------------------------------------------------------


def test_the_json_run_carries_the_outputs_and_the_models(run: dict[str, Any]) -> None:
    assert run["counts"]["invalid"] == 3 and run["counts"]["checked"] == 100
    assert run["metrics"]["valid_rate"] == pytest.approx(0.97)
    assert [s["count"] for s in run["invalid_samples"]] == [2, 1]
    assert {s["message"] for s in run["invalid_samples"]} == set(INVALID.values())
    assert list(run["by_model"]) == list(MODELS)
    assert [run["by_model"][m]["counts"]["issued"] for m in MODELS] == [40, 40, 20]
    assert len(run["outputs"]) == 100 and set(run["outputs"]["3"]) == {"digest", "tokens", "marks"}
    assert run["output_match"]["mismatches"] == MISMATCHES
    assert run["output_consistency"]["share"] == 1.0
    assert run["workload"]["adapters"] == {"sim-lora-1": 0.4, "sim-lora-2": 0.4, "base": 0.2}


def test_a_per_model_slos_percentile_is_added_to_each_models_metrics() -> None:
    result = paths_run()
    slo = replace(parse_slo("ttft.p75 < 1s"), per_model=True)
    verdicts = [evaluate(slo, result), *evaluate_models([slo], result)]
    data = SessionData()
    data.add(
        NODEID,
        "passed",
        {
            "endpoint": ENDPOINT,
            "runs": [result.to_dict()],
            "slos": [v.to_dict() for v in verdicts],
            "states": [result.accumulator.to_state()],
        },
    )
    (run,) = json_of(data)["tests"][0]["runs"]
    assert "p75" in run["metrics"]["ttft"]
    for model in MODELS:
        shown = run["by_model"][model]["metrics"]["ttft"]
        assert shown["p75"] == result.accumulator.models[model].histograms["ttft"].p(75)


# -- the terminal ---------------------------------------------------------------------


def terminal(data: SessionData) -> list[str]:
    return summary_lines(data, [], width=80)


def test_the_terminal_shows_models_outputs_and_paths_within_80_columns(
    data: SessionData, run: dict[str, Any]
) -> None:
    lines = terminal(data)
    slo_lines = [line for line in lines if re.match(r"  [✓✗?] ", line)]
    assert all(len(line) <= 80 for line in lines if line not in slo_lines), lines
    text = "\n".join(lines)
    joined = " ".join(line.strip() for line in lines)
    # what the workload asked for
    assert "run0 asked for: structured output (schema output);" in text
    assert "tools get_weather, search (tool_choice get_weather);" in joined
    assert "adapters sim-lora-1 40%, sim-lora-2 40%, base 20%; greedy" in joined
    # a line per model, like a stage's, with the model's verdict
    for model, mark in zip(MODELS, ("✓ pass", "✗ fail", "✓ pass"), strict=True):
        entry = run["by_model"][model]
        counts, ttft = entry["counts"], entry["metrics"]["ttft"]
        m = re.search(
            rf"run0 model {model}: (\d+)/(\d+) ok \((\d+)% of requests\), ttft p50 (\S+ ms) "
            rf"p99 (\S+ ms), tpot .*?valid (\S+%)(?: \((\d+) invalid\))?; (. \w+)",
            joined,
        )
        assert m is not None, (model, joined)
        assert (int(m[1]), int(m[2])) == (counts["completed"], counts["issued"])
        assert int(m[3]) == round(100 * counts["issued"] / run["counts"]["issued"])
        assert_shows(m[4], ttft["p50"], "ms", f"terminal {model}")
        assert_shows(m[5], ttft["p99"], "ms", f"terminal {model}")
        assert_shows(m[6], entry["metrics"]["valid_rate"], "fraction", f"terminal {model}")
        assert int(m[7] or 0) == counts["invalid"] and m[8] == mark
    # per-model verdicts name the model
    assert any(line.startswith("  ✗ ttft.p50 < 50ms [run0] [model sim-lora-2]:") for line in lines)
    # the comparisons, and where the mismatching samples part
    assert "≠ run0 output_match 90.00%: 36/40 samples equal the baseline's" in joined
    assert "parted at: #3 at token 12, #17 at token 0, #40 at token 5, #52 (differs)" in joined
    assert "= run0 output_consistency 100.00%: 40/40 samples equal their outputs sent alone" in (
        joined
    )
    # the invalid outputs, like the failed requests
    at = next(i for i, line in enumerate(lines) if "outputs invalid" in line)
    assert lines[at] == "    ✗ run0: 3 of 100 checked outputs invalid (valid 97.00%)"
    assert lines[at + 1] == f"      schema x2: {INVALID[7]}"
    assert lines[at + 2] == f"      schema x1: {INVALID[21]}"
    # the merged group's figures
    assert "valid 97.00% (3 invalid)" in joined


def test_a_plain_runs_terminal_lines_are_unchanged() -> None:
    lines = terminal(make_session_data())
    text = "\n".join(lines)
    for word in ("asked for", " model ", "valid", "output_match", "invalid", "parted"):
        assert word not in text, word


def test_a_long_invalid_reason_wraps_within_80_columns() -> None:
    result = paths_run()
    result.accumulator.invalid_samples.add("tool_arguments", "$.attendees[0]: " + "x" * 250)
    data = paths_session(result)
    lines = terminal(data)
    at = next(i for i, line in enumerate(lines) if "tool_arguments x1" in line)
    assert all(len(line) <= 80 for line in lines[at : at + 5])
    assert lines[at + 1].startswith("        ")  # a continuation


def test_a_comparison_not_made_says_why_unless_its_verdict_does() -> None:
    result = paths_run()
    result.output_match = None
    result.output_notes = {"output_match": "no baseline, history or reference outputs"}
    data = SessionData()
    data.add(NODEID, "passed", {"endpoint": ENDPOINT, "runs": [result.to_dict()], "slos": []})
    assert (
        "    ? run0 output_match not measured: no baseline, history or reference outputs"
        in terminal(data)
    )
    judged = paths_session(result)  # its output_match SLO is inconclusive with that reason
    assert not any("not measured" in line for line in terminal(judged))


# -- the HTML report ------------------------------------------------------------------


def test_the_html_report_agrees_with_the_json(data: SessionData, report: dict[str, Any]) -> None:
    tables = read_tables(build_html_report(report, data))
    (test,) = report["tests"]
    (run,) = test["runs"]
    by_class = {t.cls: t for t in tables}
    (slos,) = [t for t in tables if t.cls == "slos"]
    rows = slos.records()
    assert [(r["SLO"], r["model"]) for r in rows] == [
        (v["expr"], v.get("model") or "") for v in test["slos"]
    ]
    models = by_class["models"].records()
    assert [r["model"] for r in models] == list(MODELS)
    for r in models:
        entry = run["by_model"][r["model"]]
        where = f"html {r['model']}"
        completed, issued = (int(x) for x in r["completed / issued"].split(" / "))
        assert (completed, issued) == (entry["counts"]["completed"], entry["counts"]["issued"])
        for metric in ("ttft", "tpot"):
            for stat in ("p50", "p99"):
                shown = r[f"{metric.upper()} {stat}"]
                assert_shows(shown, entry["metrics"][metric][stat], "ms", where)
        assert_shows(r["valid"].split(" (")[0], entry["metrics"]["valid_rate"], "fraction", where)
        assert_shows(r["share of requests"], issued / run["counts"]["issued"], "fraction", where)
    assert models[1]["verdicts"] == "✗ ttft.p50 < 50ms"
    (validity_row,) = by_class["validity"].records()
    assert int(validity_row["invalid"]) == run["counts"]["invalid"]
    assert int(validity_row["checked"]) == run["counts"]["checked"]
    assert_shows(validity_row["valid rate"], run["metrics"]["valid_rate"], "fraction", "html")
    samples = [
        (r["invalid output"], int(r["count"]), r["the validator's message"])
        for r in by_class["invalid-samples"].records()
    ]
    assert samples == [(s["kind"], s["count"], s["message"]) for s in run["invalid_samples"]]
    compare = {r["metric"]: r for r in by_class["output-compare"].records()}
    for name in ("output_match", "output_consistency"):
        match = run[name]
        assert_shows(compare[name]["share equal"], match["share"], "fraction", f"html {name}")
        equal, compared = (int(x) for x in compare[name]["equal / compared"].split(" / "))
        assert compared == match["compared"] and equal == compared - match["mismatched"]
    mismatches = by_class["output-mismatches"].records()
    assert [(int(r["sample"]), r["parts at token"]) for r in mismatches] == [
        (m["index"], "-" if m["position"] is None else str(m["position"]))
        for m in run["output_match"]["mismatches"]
    ]
    config = dict(r for r in by_class["config"].rows if len(r) == 2)
    assert config["workload.adapters"] == "sim-lora-1 40%, sim-lora-2 40%, base 20%"
    assert config["workload.tool_choice"] == "get_weather"
    assert config["workload.greedy"].startswith("yes")


def test_a_plain_runs_html_has_none_of_the_new_tables(session_data: SessionData) -> None:
    report = json_of(session_data)
    classes = {t.cls for t in read_tables(build_html_report(report, session_data))}
    new = {"models", "validity", "invalid-samples", "output-compare", "output-mismatches"}
    assert not classes & new


# -- the Markdown summary -------------------------------------------------------------


def test_the_markdown_summary_agrees_with_the_json(report: dict[str, Any]) -> None:
    from markdown_it import MarkdownIt

    markdown = build_markdown(report)
    html = MarkdownIt("commonmark", {"html": True}).enable("table").render(markdown)
    tables = read_tables(html)
    (test,) = report["tests"]
    (run,) = test["runs"]
    (slos,) = [t for t in tables if t.header()[:3] == ["SLO", "run", "model"]]
    assert [(r["SLO"], r["model"]) for r in slos.records()] == [
        (v["expr"], v.get("model") or "-") for v in test["slos"]
    ]
    (models,) = [t for t in tables if t.header()[:1] == ["model"]]
    for r in models.records():
        entry = run["by_model"][r["model"]]
        ok, issued = (int(x) for x in r["ok/issued"].split("/"))
        assert (ok, issued) == (entry["counts"]["completed"], entry["counts"]["issued"])
        for metric, stat in (("ttft", "p50"), ("ttft", "p99"), ("tpot", "p99")):
            shown = r[f"{metric.upper()} {stat}"]
            assert_shows(shown, entry["metrics"][metric][stat], "ms", f"md {r['model']}")
        assert_shows(r["valid"], entry["metrics"]["valid_rate"], "fraction", r["model"])
    assert [r["verdict"] for r in models.records()] == ["✅ pass", "❌ fail", "✅ pass"]
    assert "Outputs checked [run0]: 97/100 valid (valid\\_rate 97.00%), 3 invalid" in markdown
    assert (
        "`output_match` [run0]: 90.00%: 36/40 samples equal the baseline's (baseline b.json "
        "(2026-11-25T22:00:00+00:00)); parted at: \\#3 at token 12, \\#17 at token 0, "
        "\\#40 at token 5, \\#52 (differs)"
    ) in markdown
    assert f"- `run0: schema x2: {INVALID[7]}`" in markdown
    assert "adapters sim-lora-1 40%, sim-lora-2 40%, base 20%; greedy" in markdown


def test_a_plain_sessions_markdown_is_unchanged(session_data: SessionData) -> None:
    markdown = build_markdown(json_of(session_data))
    for word in ("Models:", "Outputs checked", "Asked of the server", "output_match", "| model"):
        assert word not in markdown, word


# -- JUnit ----------------------------------------------------------------------------


def test_junit_properties_agree_with_the_json(report: dict[str, Any]) -> None:
    (test,) = report["tests"]
    (run,) = test["runs"]
    props = dict(run_properties([run]))
    assert props["llm_run[run0].invalid"] == "3" and props["llm_run[run0].checked"] == "100"
    assert_shows(props["llm_run[valid_rate][run0]"], run["metrics"]["valid_rate"], "fraction", "")
    for model in MODELS:
        entry = run["by_model"][model]
        where = f"[run0][model {model}]"
        assert int(props[f"llm_run{where}.issued"]) == entry["counts"]["issued"]
        assert int(props[f"llm_run{where}.invalid"]) == entry["counts"]["invalid"]
        ttft = props[f"llm_run[ttft.p99]{where}"]
        assert_shows(ttft, entry["metrics"]["ttft"]["p99"], "ms", where)
    assert [v for k, v in props.items() if k.startswith("llm_invalid[run0]")] == [
        f"schema x2: {INVALID[7]}",
        f"schema x1: {INVALID[21]}",
    ]
    assert props["llm_output_match[run0].share"] == "90.00%"
    assert props["llm_output_match[run0].mismatched"] == "4"
    assert props["llm_output_match[run0].parted"].startswith("#3 at token 12, #17 at token 0")
    assert props["llm_output_consistency[run0].against"] == "alone"
    verdicts = dict(junit_properties(paths_verdicts(paths_run())))
    assert verdicts["llm_slo[ttft.p50 < 50ms][run0][model sim-lora-2].verdict"] == "fail"
    assert verdicts["llm_slo[ttft.p50 < 50ms][run0].verdict"] in ("pass", "inconclusive")
    assert verdicts["llm_slo[valid_rate >= 100%][run0].verdict"] == "fail"


def test_a_plain_runs_junit_properties_are_unchanged(session_data: SessionData) -> None:
    (run,) = session_data.tests[next(iter(session_data.tests))].runs
    names = [name for name, _ in run_properties([run])]
    assert not [n for n in names if "invalid" in n or "model" in n or "llm_output" in n]
    assert not [n for n in names if "checked" in n or "valid_rate" in n]


# -- the failure message and the verdict table ----------------------------------------


def test_the_failure_message_names_the_model_and_the_validators_reasons() -> None:
    result = paths_run()
    slo = replace(parse_slo("ttft.p50 < 50ms"), per_model=True)
    verdicts = evaluate_models([slo], result)
    outcome = judge_test(NODEID, [slo], [result], verdicts)
    head, table = outcome.message.split("\n", 1)
    assert head == "SLO violated: ttft.p50 < 50ms [model sim-lora-2], observed 62.0 ms"
    assert table.splitlines()[0].split()[:3] == ["SLO", "run", "model"]
    assert "Invalid outputs, in the validator's words:\n" in outcome.message
    assert f"schema x2: {INVALID[7]}" in outcome.message


def test_verdict_where_names_the_stage_and_the_model() -> None:
    assert verdict_where({"model": "sim-lora-1"}) == "model sim-lora-1"
    assert verdict_where({"stage": 1, "stage_load": "40 req/s", "model": "m"}) == (
        "stage 1: 40 req/s, model m"
    )
    assert verdict_where({"stage": None, "model": None}) == ""
    plain = SloVerdict("ttft.p50 < 1s", 10.0, 1000.0, "ms", Verdict.PASS, run="run0")
    assert "model" not in verdict_table([plain]).splitlines()[0]


# -- the words ------------------------------------------------------------------------


def test_parting_words_name_the_first_samples_then_how_many_more() -> None:
    match = {"share": 0.5, "compared": 20, "mismatched": 10, "mismatches": MISMATCHES}
    assert parting_words(match, limit=2) == "#3 at token 12, #17 at token 0, +8 more"
    assert parting_words({"share": 1.0, "compared": 20, "mismatched": 0}) == ""
    head = compare_head("output_match", {**match, "against": "history"})
    assert head == "output_match 50.00%: 10/20 samples equal history's last good run's"


def test_path_parts_of_a_plain_workload_and_of_a_named_tool_choice() -> None:
    assert path_parts({"name": "synthetic", "seed": 1}) == []
    assert path_parts({"tools": ["search"], "tool_choice": "required"}) == [
        "tools search (tool_choice required)"
    ]
    assert validity({"counts": {"invalid": 0}, "metrics": {}}) is None


def test_the_minimum_report_says_what_was_asked_checked_and_compared(
    run: dict[str, Any],
) -> None:
    text = run["minimum_report"]
    assert "- Workload: synthetic (seed=7); structured output (schema output); tools" in text
    assert "adapters sim-lora-1 40%, sim-lora-2 40%, base 20%; greedy\n" in text
    assert "- Outputs checked: 97/100 valid (valid_rate 97.00%;" in text
    assert "- output_match 90.00%: 36/40 samples equal the baseline's; parted at: #3" in text


def test_a_run_of_many_models_lists_only_those_that_did_not_pass() -> None:
    acc = MetricsAccumulator()
    names = [f"lora-{k}" for k in range(MAX_MODEL_LINES + 2)]
    for i in range(20 * len(names)):
        r = paths_record(i, "sim-model")
        r.model = names[i % len(names)]
        if r.model == "lora-3":  # the one slow model
            r.t_first += 200 * MS
            r.t_last += 200 * MS
            r.t_end = r.t_last
        acc.add(r)
    result = replace(paths_run(), accumulator=acc)
    slo = replace(parse_slo("ttft.p50 < 100ms"), per_model=True)
    data = SessionData()
    verdicts = evaluate_models([slo], result)
    payload = {"endpoint": ENDPOINT, "runs": [result.to_dict()], "slos": []}
    data.add(NODEID, "failed", {**payload, "slos": [v.to_dict() for v in verdicts]})
    lines = terminal(data)
    shown = [line for line in lines if re.match(r"    run0 model ", line)]
    assert [line.split(":")[0] for line in shown] == ["    run0 model lora-3"]
    assert f"    run0: {len(names) - 1} more model(s) passed or were not judged" in lines
