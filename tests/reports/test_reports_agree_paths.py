"""The reports of a session on issue 28's request paths agree with each other.

One session on the embedded simulator sends structured-output requests spread over two
adapters and the base model with greedy decoding, judged by ``valid_rate`` and
``output_consistency`` on the whole run and by per-model SLOs; every report is written
and read back (as :mod:`test_reports_agree` does) and compared with the JSON report: the
per-model counts and TTFT, the per-model verdicts, ``counts.invalid`` and
``valid_rate``, the output comparison's share and counts, word for word or to the
rounding each report writes them with. The figures themselves are whatever the
simulator served: only that the reports say the same is asserted.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

import pytest
from test_reports_agree import (
    MARK,
    assert_shows,
    read_reports,
    read_tables,
    run_reports_session,
    slo_unit,
    terminal_blocks,
)
from test_reports_agree import Session as AgreeSession

SESSION = """
import pytest

SCHEMA = {
    "type": "object",
    "properties": {"city": {"type": "string", "maxLength": 24}, "days": {"type": "integer"}},
    "required": ["city", "days"],
}

@pytest.mark.llm_workload(
    "synthetic", input_tokens=16, output_tokens=32, requests=80, seed=1, structured=SCHEMA,
    adapters={"sim-lora-1": 0.4, "sim-lora-2": 0.4}, greedy=True,
)
@pytest.mark.llm_load("concurrency", concurrency=4)
@pytest.mark.llm_slo("valid_rate >= 100%", "output_consistency >= 99%")
@pytest.mark.llm_slo("ttft.p50 < 5s", "error_rate < 50%", per_model=True)
async def test_paths(llm_loadgen):
    await llm_loadgen.run()
"""


class Session(AgreeSession):
    def test(self) -> dict[str, Any]:
        (test,) = self.json["tests"]
        return dict(test)

    def run(self) -> dict[str, Any]:
        (run,) = self.test()["runs"]
        return dict(run)


@pytest.fixture(scope="module")
def session(tmp_path_factory: pytest.TempPathFactory) -> Session:
    where = tmp_path_factory.mktemp("agree_paths")
    done = run_reports_session(where, SESSION, {"ttft_ms": 20, "itl_ms": 2})
    assert done.returncode in (0, 1), done.stdout + done.stderr  # not a usage error
    return read_reports(Session, where, done.stdout)


def test_the_session_measured_what_the_comparisons_need(session: Session) -> None:
    run = session.run()
    assert len(run["by_model"]) == 3  # two adapters and the base model
    assert sum(m["counts"]["issued"] for m in run["by_model"].values()) == run["counts"]["issued"]
    assert run["counts"]["checked"] > 0 and "valid_rate" in run["metrics"]
    assert run["output_consistency"]["compared"] > 0
    models = {v.get("model") for v in session.test()["slos"]}
    assert set(run["by_model"]) <= models


def _key(v: Mapping[str, Any]) -> tuple[str, str]:
    return str(v["expr"]), str(v.get("model") or "")


_SLO_LINE = re.compile(
    r"(?P<mark>[✓✗?]) (?P<expr>.+?) \[run0\](?: \[model (?P<model>[^\]]+)\])?: "
    r"observed (?P<observed>.+?), (?:interval .+?, )?target .+?, n=(?P<n>\d+)"
)


def test_the_terminal_agrees_with_the_json(session: Session) -> None:
    block = terminal_blocks(session.stdout)["test_paths"]
    run, test = session.run(), session.test()
    shown = {(m["expr"], m["model"] or ""): m for m in _SLO_LINE.finditer(block)}
    assert set(shown) == {_key(v) for v in test["slos"]}, block
    for v in test["slos"]:
        line, where = shown[_key(v)], f"terminal {_key(v)}"
        assert line["mark"] == MARK[v["verdict"]] and int(line["n"]) == v["samples"], where
        assert_shows(line["observed"], v["observed"], slo_unit(v), where)
    for model, entry in run["by_model"].items():
        m = re.search(
            rf"run0 model {re.escape(model)}: (\d+)/(\d+) ok \(\d+% of requests\), "
            r"ttft p50 (\S+(?: ms)?) p99 (\S+(?: ms)?),",
            block,
        )
        assert m is not None, (model, block)
        counts, ttft = entry["counts"], entry["metrics"]["ttft"]
        assert (int(m[1]), int(m[2])) == (counts["completed"], counts["issued"]), model
        assert_shows(m[3], ttft["p50"], "ms", f"terminal {model}")
        assert_shows(m[4], ttft["p99"], "ms", f"terminal {model}")
    counts = run["counts"]
    if counts["invalid"]:
        m = re.search(r"✗ run0: (\d+) of (\d+) checked outputs invalid \(valid (\S+%)\)", block)
        assert m is not None, block
        assert (int(m[1]), int(m[2])) == (counts["invalid"], counts["checked"])
        assert_shows(m[3], run["metrics"]["valid_rate"], "fraction", "terminal valid_rate")
    match = run["output_consistency"]
    m = re.search(r"[=≠] run0 output_consistency (\S+%): (\d+)/(\d+) samples equal", block)
    assert m is not None, block
    assert_shows(m[1], match["share"], "fraction", "terminal output_consistency")
    assert (int(m[2]), int(m[3])) == (match["compared"] - match["mismatched"], match["compared"])


def test_the_html_report_agrees_with_the_json(session: Session) -> None:
    tables = read_tables(session.html)
    run, test = session.run(), session.test()
    (slos,) = [t for t in tables if t.cls == "slos"]
    rows = {(r["SLO"], r["model"]): r for r in slos.records()}
    assert set(rows) == {_key(v) for v in test["slos"]}
    for v in test["slos"]:
        r, where = rows[_key(v)], f"html {_key(v)}"
        assert r["verdict"] == f"{MARK[v['verdict']]} {v['verdict']}", where
        assert_shows(r["observed"], v["observed"], slo_unit(v), where)
    (models,) = [t for t in tables if t.cls == "models"]
    assert [r["model"] for r in models.records()] == list(run["by_model"])
    for r in models.records():
        entry = run["by_model"][r["model"]]
        completed, issued = (int(x) for x in r["completed / issued"].split(" / "))
        assert (completed, issued) == (entry["counts"]["completed"], entry["counts"]["issued"])
        for stat in ("p50", "p99"):
            assert_shows(r[f"TTFT {stat}"], entry["metrics"]["ttft"][stat], "ms", r["model"])
    (validity,) = [t for t in tables if t.cls == "validity"]
    (row,) = validity.records()
    assert (int(row["invalid"]), int(row["checked"])) == (
        run["counts"]["invalid"],
        run["counts"]["checked"],
    )
    assert_shows(row["valid rate"], run["metrics"]["valid_rate"], "fraction", "html valid")
    (compare,) = [t for t in tables if t.cls == "output-compare"]
    (row,) = [r for r in compare.records() if r["metric"] == "output_consistency"]
    assert_shows(row["share equal"], run["output_consistency"]["share"], "fraction", "html")


def test_the_markdown_summary_agrees_with_the_json(session: Session) -> None:
    from markdown_it import MarkdownIt

    html = MarkdownIt("commonmark", {"html": True}).enable("table").render(session.markdown)
    tables = read_tables(html)
    run, test = session.run(), session.test()
    slo_tables = [t for t in tables if t.header()[:3] == ["SLO", "run", "model"]]
    assert slo_tables, session.markdown  # the test failed or was inconclusive: its table
    rows = {(r["SLO"], r["model"]): r for t in slo_tables for r in t.records()}
    for v in test["slos"]:
        key = (str(v["expr"]), str(v.get("model") or "-"))
        assert key in rows, (key, sorted(rows))
        assert_shows(rows[key]["observed"], v["observed"], slo_unit(v), f"markdown {key}")
        assert v["verdict"] in rows[key]["verdict"], key
    (models,) = [t for t in tables if t.header()[:1] == ["model"]]
    assert [r["model"] for r in models.records()] == list(run["by_model"])
    for r in models.records():
        entry = run["by_model"][r["model"]]
        ok, issued = (int(x) for x in r["ok/issued"].split("/"))
        assert (ok, issued) == (entry["counts"]["completed"], entry["counts"]["issued"])
        assert_shows(r["TTFT p99"], entry["metrics"]["ttft"]["p99"], "ms", r["model"])
    counts = run["counts"]
    valid = counts["checked"] - counts["invalid"]
    assert f"Outputs checked [run0]: {valid}/{counts['checked']} valid" in session.markdown


def test_junit_properties_agree_with_the_json(session: Session) -> None:
    (suite,) = session.junit.iter("testsuite")
    run, test = session.run(), session.test()
    prefix = test["nodeid"] + "::"
    props = {
        (p.get("name") or "").removeprefix(prefix): p.get("value") or ""
        for p in suite.iter("property")
    }
    for v in test["slos"]:
        name = f"llm_slo[{v['expr']}][run0]" + (f"[model {v['model']}]" if v.get("model") else "")
        assert props[f"{name}.verdict"] == v["verdict"], name
        assert int(props[f"{name}.samples"]) == v["samples"], name
    for model, entry in run["by_model"].items():
        for key in ("issued", "completed", "failed"):
            shown = props[f"llm_run[run0][model {model}].{key}"]
            assert int(shown) == entry["counts"][key], (model, key)
    assert int(props["llm_run[run0].invalid"]) == run["counts"]["invalid"]
    assert_shows(props["llm_run[valid_rate][run0]"], run["metrics"]["valid_rate"], "fraction", "")
    share = props["llm_output_consistency[run0].share"]
    assert_shows(share, run["output_consistency"]["share"], "fraction", "junit")
