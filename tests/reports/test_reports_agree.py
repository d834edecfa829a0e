"""The reports of one session agree with each other.

One session on the embedded simulator (a fixed-latency profile that fails about one
request in ten) writes every report: the terminal summary, ``--llm-json``,
``--junitxml``, ``--llm-html`` and ``--llm-markdown``. Each report is read back (the
terminal from the session's stdout, JUnit with ElementTree, the HTML with
``html.parser``, the Markdown rendered to HTML by markdown-it-py, then read alike) and
what it shows is compared with the JSON report's values: the counts (issued,
completed, failed) exactly, the statistics (ttft/tpot/itl p50/p99, throughput, error
rate, goodput, each SLO's observed value and confidence interval) to the rounding
the report writes them with (``20.7 ms`` is within 0.05 ms of the JSON's value),
the outcomes and verdicts word for word. A report that drifts from the others is how
a wrong count ships unnoticed.

The session runs once for the module (a subprocess pytest, as pytester's
``runpytest_subprocess`` runs it); each report is its own test.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import xml.etree.ElementTree as ET
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from html.parser import HTMLParser
from pathlib import Path
from typing import Any, TypeVar

import pytest

from pytest_llmperf.sim import start_sim_process

# SLO expressions are unique in the session: a report's SLO row is found by its words.
SESSION = """
import pytest

@pytest.mark.llm_workload("synthetic", input_tokens=16, output_tokens=8, requests=80, seed=1)
@pytest.mark.llm_load("concurrency", concurrency=8)
@pytest.mark.llm_slo(
    "ttft.p50 < 5s", "tpot.p50 < 5s", "error_rate < 50%", "goodput > 10%",
    "request_throughput > 1req/s", "output_throughput > 1tok/s",
)
async def test_passes(llm_loadgen):
    await llm_loadgen.run()

@pytest.mark.llm_workload("synthetic", input_tokens=16, output_tokens=8, requests=80, seed=2)
@pytest.mark.llm_load("concurrency", concurrency=8)
@pytest.mark.llm_slo("ttft.p50 < 1us", "itl.p50 < 1s")
async def test_fails(llm_loadgen):
    await llm_loadgen.run()

@pytest.mark.llm_workload("synthetic", input_tokens=16, output_tokens=8, requests=80, seed=3)
@pytest.mark.llm_load("concurrency", concurrency=8)
@pytest.mark.llm_slo("ttft.p99 < 5s")
async def test_inconclusive(llm_loadgen):
    await llm_loadgen.run()

@pytest.mark.llm_workload("synthetic", input_tokens=16, output_tokens=8, requests=80, seed=4)
@pytest.mark.llm_load("concurrency", concurrency=8)
async def test_no_slo(llm_loadgen):
    await llm_loadgen.run()
"""

NAMES = ("test_passes", "test_fails", "test_inconclusive", "test_no_slo")
STATS = (("ttft", "p50"), ("ttft", "p99"), ("tpot", "p50"), ("tpot", "p99"))


@dataclass
class Session:
    """What one session wrote: its stdout and every report."""

    stdout: str
    json: dict[str, Any]
    junit: ET.Element
    html: str
    markdown: str

    def tests(self) -> dict[str, dict[str, Any]]:
        return {t["nodeid"].rsplit("::", 1)[1]: t for t in self.json["tests"]}

    def slos(self) -> dict[str, dict[str, Any]]:
        """Every SLO verdict of the session, by its expression (unique here)."""
        return {v["expr"]: v for t in self.json["tests"] for v in t["slos"]}


S = TypeVar("S", bound="Session")


def run_reports_session(
    where: Path, source: str, overrides: dict[str, Any]
) -> subprocess.CompletedProcess[str]:
    """``source`` as a test file in ``where`` (its rootdir), run in a pytest of its own on a
    ``fixed`` simulator with ``overrides``, writing every report into ``where/out``."""
    (where / "pytest.ini").write_text("[pytest]\n")  # this directory is the rootdir
    (where / "test_session.py").write_text(source)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "GITHUB_"))}
    env["COLUMNS"] = "80"  # the terminal summary's width, as in a CI log
    sim = start_sim_process("fixed", overrides=overrides, seed=5)
    try:
        args = [
            f"--llm-endpoint={sim.url}",
            "--llm-json=out/r.json",
            "--llm-html=out/r.html",
            "--junitxml=out/j.xml",
            "--llm-inconclusive=warn",
            "--llm-markdown=out/r.md",
        ]
        return subprocess.run(
            [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *args],
            cwd=where,
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
        )
    finally:
        sim.stop()


def read_reports(kind: type[S], where: Path, stdout: str) -> S:
    """What :func:`run_reports_session` wrote in ``where``."""
    out = where / "out"
    return kind(
        stdout=stdout,
        json=json.loads((out / "r.json").read_text()),
        junit=ET.parse(out / "j.xml").getroot(),
        html=(out / "r.html").read_text(),
        markdown=(out / "r.md").read_text(),
    )


@pytest.fixture(scope="module")
def session(tmp_path_factory: pytest.TempPathFactory) -> Session:
    where = tmp_path_factory.mktemp("agree")
    done = run_reports_session(where, SESSION, {"ttft_ms": 20, "itl_ms": 3, "error_rate": 0.1})
    assert done.returncode == 1, done.stdout + done.stderr  # test_fails fails
    return read_reports(Session, where, done.stdout)


def test_the_session_measured_what_the_comparisons_need(session: Session) -> None:
    """Failed requests and every kind of verdict: no comparison below is vacuous."""
    tests = session.tests()
    assert set(tests) == set(NAMES)
    assert {n: t["outcome"] for n, t in tests.items()} == {
        "test_passes": "passed",
        "test_fails": "failed",
        "test_inconclusive": "passed",  # --llm-inconclusive=warn
        "test_no_slo": "passed",
    }
    verdicts = {v["verdict"] for v in session.slos().values()}
    assert verdicts == {"pass", "fail", "inconclusive"}
    # percentile intervals bounded and unbounded above, and rates judged as observed
    intervals = [v.get("interval") for v in session.slos().values()]
    assert any(i and i[1] is not None for i in intervals)
    assert any(i and i[1] is None for i in intervals)
    assert None in intervals
    for test in tests.values():
        (run,) = test["runs"]
        assert run["counts"]["completed"] > 0
    (group,) = session.json["session"]["groups"]
    assert group["counts"]["failed"] > 0 and group["metrics"]["error_rate"] > 0


# -- reading a shown value back -------------------------------------------------------

_NUMBER = re.compile(r"(?P<num>[-+]?[\d,]*\.?\d+)\s*(?P<unit>ms|%|req/s|tok/s)?")


def read_number(text: str) -> tuple[float, int, str]:
    """``"1,371.8 tok/s"`` -> ``(1371.8, 1, "tok/s")``: the value, its decimals, its unit."""
    m = _NUMBER.fullmatch(text.strip())
    assert m is not None, f"not a number: {text!r}"
    digits = m["num"].replace(",", "")
    return float(digits), len(digits.partition(".")[2]), m["unit"] or ""


def assert_shows(text: str, value: float | None, unit: str, where: str, header: str = "") -> None:
    """``text`` (what a report shows) is ``value`` (the JSON report's) in ``unit`` (``ms``,
    ``fraction``, ``req/s``, ``tok/s``), rounded to the decimals it is written with; a
    bare number takes its unit from the column's ``header``."""
    if value is None:
        assert text.strip() in ("-", "—", "n/a", ""), f"{where}: {text!r} for no value"
        return
    number, decimals, shown = read_number(text)
    shown = shown or next((u for u in ("ms", "%", "req/s", "tok/s") if u in header), "")
    if unit == "fraction":
        expected = value * 100 if shown == "%" else value
        assert shown in ("%", ""), f"{where}: {text!r} is not a share"
    else:
        expected = value
        assert shown in (unit, ""), f"{where}: {text!r} is not in {unit}"
    allowed = 0.5 * 10**-decimals * (1 + 1e-9)
    assert abs(number - expected) <= allowed, (
        f"{where}: shows {text!r}, the JSON says {value!r} ({unit})"
    )


def assert_interval(
    lower: str | None, upper: str | None, confidence: str | None, v: Mapping[str, Any], where: str
) -> None:
    """A percentile verdict's shown interval is the JSON's ``interval`` at its ``confidence``
    (an unbounded upper side shown as ``∞``); a statistic judged as observed shows none."""
    if not v.get("interval"):
        assert lower is None and upper is None, f"{where}: an interval for {v['expr']}"
        return
    assert lower is not None and upper is not None and confidence is not None, where
    assert float(confidence) == v["confidence"] * 100, where
    assert_shows(lower, v["interval"][0], slo_unit(v), where + " (lower bound)")
    if v["interval"][1] is None:
        assert upper == "∞", where
    else:
        assert_shows(upper, v["interval"][1], slo_unit(v), where + " (upper bound)")


_INTERVAL_CELL = re.compile(r"\[(?P<lower>.+?), (?P<upper>.+?)\] at (?P<confidence>[\d.]+)%")


def assert_interval_cell(cell: str, v: Mapping[str, Any], where: str) -> None:
    """A table's interval cell (``[20.5 ms, 23.0 ms] at 99%``, ``-`` for none) against the
    JSON's ``interval`` and ``confidence``."""
    m = _INTERVAL_CELL.fullmatch(cell.strip())
    if m is None:
        assert cell.strip() in ("-", ""), f"{where}: interval cell {cell!r}"
        assert_interval(None, None, None, v, where)
    else:
        assert_interval(m["lower"], m["upper"], m["confidence"], v, where)


def slo_unit(verdict: Mapping[str, Any]) -> str:
    return str(verdict["unit"])


# -- the terminal summary --------------------------------------------------------------

_SLO_LINE = re.compile(
    r"(?P<mark>[✓✗?]) (?P<expr>.+?) \[(?P<run>run\d+)\]: observed (?P<observed>.+?), "
    r"(?:interval \[(?P<lower>.+?), (?P<upper>.+?)\] at (?P<confidence>[\d.]+)%, )?"
    r"target .+?, n=(?P<n>\d+)"
)
_FIGURES = (
    r"(?P<completed>\d+)/(?P<issued>\d+) ok, "
    r"ttft p50 (?P<ttft_p50>\S+ ms) p99 (?P<ttft_p99>\S+ ms), "
    r"tpot p50 (?P<tpot_p50>\S+ ms) p99 (?P<tpot_p99>\S+ ms), "
    r"(?P<rps>\S+) req/s, (?P<tps>\S+) tok/s, errors (?P<errors>\S+%)"
    r"(?: \((?P<why>[^)]*)\))?"
)
_RUN_BRIEF = re.compile(r"(?P<run>run\d+): " + _FIGURES)
_GROUP = re.compile(r"(?P<key>\S+ \S+): (?P<runs>\d+) run\(s\), [\d.]+ s measured; " + _FIGURES)
MARK = {"pass": "✓", "fail": "✗", "inconclusive": "?"}


def terminal_blocks(stdout: str) -> dict[str, str]:
    """The llmperf section, per test (``test_passes``: its lines joined) and ``session``."""
    lines = stdout.splitlines()
    start = next(i for i, line in enumerate(lines) if re.fullmatch(r"=+ llmperf =+", line))
    blocks: dict[str, list[str]] = {}
    current: list[str] = []
    for line in lines[start + 1 :]:
        if line.startswith(("llmperf report:", "=")):
            break
        head = re.match(r"\S+::(?P<name>\w+) \[\w+\]", line)
        if head:
            current = blocks.setdefault(head["name"], [line])
        elif line.startswith("session (gated runs merged"):
            current = blocks.setdefault("session", [])
        else:
            current.append(line)
    return {name: " ".join(x.strip() for x in block) for name, block in blocks.items()}


def assert_figures(shown: Mapping[str, str | None], run: Mapping[str, Any], where: str) -> None:
    """A terminal line's figures (a run's brief or a merged group's) against the JSON's."""
    counts, metrics = run["counts"], run["metrics"]
    assert int(str(shown["issued"])) == counts["issued"], where
    assert int(str(shown["completed"])) == counts["completed"], where
    for metric, stat in STATS:
        assert_shows(str(shown[f"{metric}_{stat}"]), metrics[metric][stat], "ms", where)
    assert_shows(f"{shown['rps']} req/s", metrics["request_throughput"], "req/s", where)
    assert_shows(f"{shown['tps']} tok/s", metrics["output_throughput"], "tok/s", where)
    assert_shows(str(shown["errors"]), metrics["error_rate"], "fraction", where)
    # failed requests: the categories the line names add up to the count
    why = shown["why"] or ""
    failed = sum(int(n) for n in re.findall(r"\w+ (\d+)", why))
    assert failed == counts["failed"], f"{where}: ({why}) for {counts['failed']} failed"


def test_the_terminal_summary_agrees_with_the_json(session: Session) -> None:
    blocks = terminal_blocks(session.stdout)
    tests = session.tests()
    for name, test in tests.items():
        block = blocks[name]
        assert block.startswith(f"{test['nodeid']} [{test['outcome']}]"), block
        shown = {m["expr"]: m for m in _SLO_LINE.finditer(block)}
        assert set(shown) == {v["expr"] for v in test["slos"]}, block
        for v in test["slos"]:
            line = shown[v["expr"]]
            where = f"terminal {name} {v['expr']}"
            assert line["mark"] == MARK[v["verdict"]] and line["run"] == v["run"], where
            assert int(line["n"]) == v["samples"], where
            assert_shows(line["observed"], v["observed"], slo_unit(v), where)
            assert_interval(line["lower"], line["upper"], line["confidence"], v, where)
        if not test["slos"]:  # a test without SLOs shows its run's figures
            (run,) = test["runs"]
            brief = _RUN_BRIEF.search(block)
            assert brief is not None, block
            assert brief["run"] == run["label"]
            assert_figures(brief.groupdict(), run, f"terminal {name}")
    (group,) = session.json["session"]["groups"]
    merged = _GROUP.search(blocks["session"])
    assert merged is not None, blocks["session"]
    assert merged["key"] == group["key"] and int(merged["runs"]) == group["runs"]
    assert_figures(merged.groupdict(), group, "terminal session")
    outcomes = session.json["session"]["outcomes"]
    tail = session.stdout.strip().splitlines()[-1]
    for outcome, n in outcomes.items():
        assert f"{n} {outcome}" in tail, (tail, outcomes)


# -- JUnit -----------------------------------------------------------------------------


def test_junit_properties_agree_with_the_json(session: Session) -> None:
    (suite,) = session.junit.iter("testsuite")
    # xunit2 (pytest's default): the properties are the suite's, named <nodeid>::<name>
    props = {p.get("name") or "": p.get("value") or "" for p in suite.iter("property")}
    outcomes = session.json["session"]["outcomes"]
    assert int(suite.get("tests") or 0) == sum(outcomes.values())
    assert int(suite.get("failures") or 0) == outcomes.get("failed", 0)
    cases = {c.get("name"): c for c in suite.iter("testcase")}
    for name, test in session.tests().items():
        assert (cases[name].find("failure") is not None) == (test["outcome"] == "failed"), name
        mine = {
            k.split("::", 2)[2]: v for k, v in props.items() if k.startswith(test["nodeid"] + "::")
        }
        for v in test["slos"]:
            key = f"llm_slo[{v['expr']}][{v['run']}]"
            where = f"junit {name} {key}"
            assert mine[f"{key}.verdict"] == v["verdict"], where
            assert int(mine[f"{key}.samples"]) == v["samples"], where
            assert_shows(mine[f"{key}.observed"], v["observed"], slo_unit(v), where)
        for run in test["runs"]:
            label, counts, metrics = run["label"], run["counts"], run["metrics"]
            where = f"junit {name} {label}"
            for key in ("issued", "completed", "failed"):
                assert int(mine[f"llm_run[{label}].{key}"]) == counts[key], (where, key)
            for metric, stat in (*STATS, ("itl", "p50"), ("itl", "p99")):
                shown = mine[f"llm_run[{metric}.{stat}][{label}]"]
                assert_shows(shown, metrics[metric][stat], "ms", f"{where} {metric}.{stat}")
            for rate, unit in (
                ("request_throughput", "req/s"),
                ("output_throughput", "tok/s"),
                ("error_rate", "fraction"),
                ("goodput", "fraction"),
            ):
                shown = mine[f"llm_run[{rate}][{label}]"]
                assert_shows(shown, metrics[rate], unit, f"{where} {rate}")


# -- reading HTML tables (the HTML report's, and the Markdown's once rendered) ---------


@dataclass
class Table:
    """A ``<table>``: its class, the headings above it, its rows of cell texts."""

    cls: str
    headings: tuple[str, ...]
    rows: list[list[str]] = field(default_factory=list)

    def header(self) -> list[str]:
        return self.rows[0] if self.rows else []

    def records(self) -> list[dict[str, str]]:
        """Rows under a header row, as ``{header: cell}``."""
        head = self.header()
        return [dict(zip(head, row, strict=False)) for row in self.rows[1:]]


class TableReader(HTMLParser):
    """Every table of a page, each with the text of the latest h1–h4 above it."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tables: list[Table] = []
        self.headings: dict[str, str] = {}
        self._heading: list[str] | None = None
        self._cell: list[str] | None = None
        self._table: Table | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in ("h1", "h2", "h3", "h4"):
            self._heading = []
        elif tag == "table":
            levels = ("h1", "h2", "h3", "h4")
            above = tuple(self.headings[h] for h in levels if h in self.headings)
            self._table = Table(dict(attrs).get("class") or "", above)
            self.tables.append(self._table)
        elif tag == "tr" and self._table is not None:
            self._table.rows.append([])
        elif tag in ("td", "th") and self._table is not None:
            self._cell = []

    def handle_endtag(self, tag: str) -> None:
        if tag in ("h1", "h2", "h3", "h4") and self._heading is not None:
            levels = ("h1", "h2", "h3", "h4")
            for deeper in levels[levels.index(tag) + 1 :]:
                self.headings.pop(deeper, None)
            self.headings[tag] = " ".join("".join(self._heading).split())
            self._heading = None
        elif tag in ("td", "th") and self._cell is not None and self._table is not None:
            self._table.rows[-1].append(" ".join("".join(self._cell).split()))
            self._cell = None
        elif tag == "table":
            self._table = None

    def handle_data(self, data: str) -> None:
        if self._cell is not None:
            self._cell.append(data)
        if self._heading is not None:
            self._heading.append(data)


def read_tables(html: str) -> list[Table]:
    reader = TableReader()
    reader.feed(html)
    reader.close()
    return reader.tables


# -- HTML ------------------------------------------------------------------------------


def test_the_html_report_agrees_with_the_json(session: Session) -> None:
    tables = read_tables(session.html)
    report = session.json
    (summary,) = [t for t in tables if t.cls == "summary"]
    tests_row = next(row for row in summary.rows if row[0] == "tests")
    shown = {word: int(n) for n, word in re.findall(r"(\d+) (\w+)", tests_row[1])}
    assert shown == report["session"]["outcomes"]

    (groups,) = [t for t in tables if t.cls == "groups"]
    (group,) = report["session"]["groups"]
    (row,) = groups.records()
    where = "html groups"
    assert row["endpoint · model"] == group["key"] and int(row["runs"]) == group["runs"]
    completed, issued = (int(x) for x in row["completed / issued"].split(" / "))
    assert (completed, issued) == (group["counts"]["completed"], group["counts"]["issued"])
    for metric, stat in STATS:
        assert_shows(row[f"{metric.upper()} {stat}"], group["metrics"][metric][stat], "ms", where)
    assert_shows(row["req/s"], group["metrics"]["request_throughput"], "req/s", where)
    assert_shows(row["tok/s"], group["metrics"]["output_throughput"], "tok/s", where)
    assert_shows(row["errors"], group["metrics"]["error_rate"], "fraction", where)

    index = {r["test"]: r for t in tables if t.cls == "test-index" for r in t.records()}
    for name, test in session.tests().items():
        nodeid = test["nodeid"]
        assert index[nodeid]["outcome"] == test["outcome"]
        mine = [t for t in tables if len(t.headings) > 1 and t.headings[1].startswith(nodeid)]
        assert mine[0].headings[1] == f"{nodeid} {test['outcome']}"
        slo_rows = {r["SLO"]: r for t in mine if t.cls == "slos" for r in t.records()}
        assert set(slo_rows) == {v["expr"] for v in test["slos"]}
        for v in test["slos"]:
            r, where = slo_rows[v["expr"]], f"html {name} {v['expr']}"
            assert r["run"] == v["run"] and int(r["samples"]) == v["samples"], where
            assert r["verdict"] == f"{MARK[v['verdict']]} {v['verdict']}", where
            assert_shows(r["observed"], v["observed"], slo_unit(v), where)
            assert_interval_cell(r["interval"], v, where)
        for run in test["runs"]:
            where = f"html {name} {run['label']}"
            in_run = [
                t for t in mine if any(h.startswith(f"Run {run['label']}") for h in t.headings)
            ]
            (metrics,) = [t for t in in_run if t.cls == "metrics"]
            (rates,) = [t for t in in_run if t.cls == "rates"]
            cells = {r["metric (ms)"]: r for r in metrics.records()}
            for metric in ("ttft", "tpot", "itl", "e2e"):
                for stat, text in cells[metric].items():
                    if stat == "metric (ms)":
                        continue
                    value = run["metrics"][metric][stat]
                    if stat == "count":
                        assert int(text) == value, (where, metric)
                    else:
                        assert_shows(text, value, "ms", f"{where} {metric}.{stat}")
            (r,) = rates.records()
            for key in ("issued", "completed", "failed"):
                assert int(r[key]) == run["counts"][key], (where, key)
            m = run["metrics"]
            assert_shows(r["error rate"], m["error_rate"], "fraction", f"{where} error rate")
            assert_shows(r["goodput"], m["goodput"], "fraction", f"{where} goodput")
            assert_shows(r["req/s"], m["request_throughput"], "req/s", f"{where} req/s")
            assert_shows(r["output tok/s"], m["output_throughput"], "tok/s", f"{where} tok/s")


# -- Markdown --------------------------------------------------------------------------

_STAT_HEADER = re.compile(r"\b(ttft|tpot|itl|e2e)\b\W*(p\d+(?:\.\d+)?)\b", re.IGNORECASE)


def _rate_of(header: str, cell: str) -> tuple[str, str] | None:
    """The JSON metric and unit a Markdown column shows, if a rate's: named by its
    header (``errors``, ``goodput``, ``req/s``), else by its cells' unit (``tok/s``)."""
    h = header.lower()
    if "goodput" in h:
        return "goodput", "fraction"
    if "error" in h:
        return "error_rate", "fraction"
    if "tok/s" in h or "tok/s" in cell or "output throughput" in h:
        return "output_throughput", "tok/s"
    if "req/s" in h or "req/s" in cell or "throughput" in h:
        return "request_throughput", "req/s"
    return None


def _row_test(row: Sequence[str], names: Sequence[str]) -> str | None:
    found = [n for n in names if any(re.search(rf"\b{n}\b", cell) for cell in row)]
    return found[0] if len(found) == 1 else None


def test_the_markdown_summary_agrees_with_the_json(session: Session) -> None:
    """GitHub-flavoured Markdown, rendered as GitHub would (tables on), read back: the
    verdict line first; every SLO of a failing test in an SLO table, and every SLO row
    shown agreeing (observed value, interval, verdict); every gated run in a table of its figures
    (completed/issued, ttft/tpot p50/p99, a throughput, the error rate), each agreeing."""
    from markdown_it import MarkdownIt

    html = MarkdownIt("commonmark", {"html": True}).enable("table").render(session.markdown)
    tables = read_tables(html)
    report = session.json
    tests = session.tests()
    failed = report["session"]["outcomes"].get("failed", 0)
    first = next(line for line in session.markdown.splitlines() if line.strip())
    assert re.search(rf"\b{failed}\b[^|]*fail", first, re.IGNORECASE), first
    headings = [line for line in session.markdown.splitlines() if line.startswith("#")]
    for test in tests.values():
        said = [h for h in headings if test["nodeid"] in h]
        failing = [h for h in said if re.search(r"fail", h, re.IGNORECASE)]
        assert bool(failing) == (test["outcome"] == "failed"), (test["nodeid"], said)

    slos = session.slos()
    seen_slos: set[str] = set()
    for table in tables:
        head = [h.lower() for h in table.header()]
        if not any(h.strip() == "slo" or h.startswith("slo") for h in head):
            continue
        if not any("observed" in h for h in head):
            continue
        expr_at = next(i for i, h in enumerate(head) if h.startswith("slo"))
        observed_at = next(i for i, h in enumerate(head) if "observed" in h)
        verdict_at = next((i for i, h in enumerate(head) if "verdict" in h), None)
        interval_at = next(i for i, h in enumerate(head) if h.strip() == "interval")
        for row in table.rows[1:]:
            named = [e for e in slos if e in row[expr_at]]  # the cell may add the run
            assert named, f"markdown: an SLO row {row[expr_at]!r} that the JSON does not have"
            expr = max(named, key=len)
            v = slos[expr]
            assert_shows(row[observed_at], v["observed"], slo_unit(v), f"markdown {expr}")
            assert_interval_cell(row[interval_at], v, f"markdown {expr}")
            if verdict_at is not None:
                assert v["verdict"] in row[verdict_at].lower(), (expr, row[verdict_at])
            seen_slos.add(expr)
    must = {v["expr"] for t in tests.values() if t["outcome"] == "failed" for v in t["slos"]}
    assert must <= seen_slos, f"markdown: no SLO row for {sorted(must - seen_slos)}"

    seen_runs: dict[str, set[str]] = {}
    for table in tables:
        head = table.header()
        stats = {i: m for i, h in enumerate(head) if (m := _STAT_HEADER.search(h))}
        if not stats:
            continue
        for row in table.rows[1:]:
            name = _row_test(row, list(tests))
            if name is None:
                continue  # a merged group's row, or another table's
            rates = {
                i: r
                for i, (h, cell) in enumerate(zip(head, row, strict=False))
                if (r := _rate_of(h, cell))
            }
            (run,) = tests[name]["runs"]
            where = f"markdown {name}"
            for i, m in stats.items():
                metric, stat = m[1].lower(), m[2].lower()
                value = run["metrics"][metric][stat]
                assert_shows(row[i], value, "ms", f"{where} {metric}.{stat}", head[i])
                seen_runs.setdefault(name, set()).add(f"{metric}.{stat}")
            for i, (rate, unit) in rates.items():
                assert_shows(row[i], run["metrics"][rate], unit, f"{where} {rate}", head[i])
                seen_runs.setdefault(name, set()).add(rate)
            for i, h in enumerate(head):
                word = h.lower().strip()
                if word in ("issued", "completed", "failed"):
                    assert int(row[i]) == run["counts"][word], (where, word)
                    seen_runs.setdefault(name, set()).add(word)
                elif re.fullmatch(r"(ok|completed)\s*/\s*issued", word):
                    ok, issued = (int(x) for x in row[i].split("/"))
                    assert (ok, issued) == (run["counts"]["completed"], run["counts"]["issued"])
                    seen_runs.setdefault(name, set()).update(("completed", "issued"))
    for name, test in tests.items():
        (run,) = test["runs"]
        if not run.get("gated", True):
            continue
        shown = seen_runs.get(name, set())
        needed = {f"{metric}.{stat}" for metric, stat in STATS}
        needed |= {"error_rate", "completed", "issued"}
        assert needed <= shown, f"markdown: {name} lacks {sorted(needed - shown)}"
        assert shown & {"request_throughput", "output_throughput"}, f"markdown: {name}"


# -- the simulator's session line ------------------------------------------------------


def test_the_session_line_names_the_profile_and_its_model_alike(
    pytester: pytest.Pytester,
) -> None:
    """``--llm-endpoint=sim`` runs profile ``fixed``, which serves ``sim-fixed`` (it once
    served ``sim-llama-3.1-8b``, a model it does not imitate)."""
    pytester.makepyfile(
        """
        import pytest

        @pytest.mark.llm_workload("synthetic", input_tokens=8, output_tokens=2, requests=10)
        @pytest.mark.llm_load("concurrency", concurrency=2)
        async def test_one(llm_loadgen):
            await llm_loadgen.run()
        """
    )
    result = pytester.runpytest("-p", "no:cacheprovider", "--llm-endpoint=sim", "--llm-json=r.json")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["*embedded simulator, profile fixed*", "  sim:fixed sim-fixed: *"])
    report = json.loads((pytester.path / "r.json").read_text())
    assert report["endpoint"]["simulator"] == "fixed"
    assert report["endpoint"]["model"] == "sim-fixed"
    assert [g["key"] for g in report["session"]["groups"]] == ["sim:fixed sim-fixed"]
