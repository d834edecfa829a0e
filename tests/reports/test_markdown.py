"""The Markdown summary (``--llm-markdown``, ``$GITHUB_STEP_SUMMARY``): written by real
sessions against the simulator, rendered to HTML by a GitHub-flavoured Markdown renderer
(markdown-it-py with tables), and its tables read back against the JSON report.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest
from synthetic_session import payload, synthetic_run

from pytest_llmperf.gfm import CHAR_LIMIT, code, sparkline, table, text
from pytest_llmperf.history.cli import main as history_main
from pytest_llmperf.history.records import RunRecord, SessionRecord, comparison_key
from pytest_llmperf.history.session import clean_endpoint
from pytest_llmperf.history.store import HistoryStore
from pytest_llmperf.options import LlmPerfOptions
from pytest_llmperf.reports.json_report import build_report
from pytest_llmperf.reports.markdown import build_markdown
from pytest_llmperf.reports.session_data import SessionData
from pytest_llmperf.reports.table import format_change, format_interval, format_value
from pytest_llmperf.reports.time_split import bounded_ms
from pytest_llmperf.sim import SimProcess, start_sim_process

markdown_it = pytest.importorskip("markdown_it")

SESSION = """
import pytest

@pytest.mark.parametrize("name", ["a|b<i>*x*</i>"])
@pytest.mark.llm_workload("synthetic", input_tokens=16, output_tokens=4, requests=60, seed=1)
@pytest.mark.llm_load("concurrency", concurrency=8)
@pytest.mark.llm_slo("ttft.p50 < 5s", "error_rate < 1%")
async def test_meets(llm_loadgen, name):
    await llm_loadgen.run()

@pytest.mark.llm_workload("synthetic", input_tokens=16, output_tokens=4, requests=60, seed=2)
@pytest.mark.llm_load("concurrency", concurrency=8)
@pytest.mark.llm_slo("ttft.p50 < 1us", "tpot.p99 < 1s")
async def test_misses(llm_loadgen):
    await llm_loadgen.run()

@pytest.mark.llm_workload("synthetic", input_tokens=16, output_tokens=4, requests=5, seed=3)
@pytest.mark.llm_load("concurrency", concurrency=2)
@pytest.mark.llm_slo("ttft.p99 < 5s")
async def test_unsure(llm_loadgen):
    await llm_loadgen.run()
"""

ONE_TEST = """
import pytest

@pytest.mark.llm_workload("synthetic", input_tokens=16, output_tokens=4, requests=20, seed=5)
@pytest.mark.llm_load("concurrency", concurrency=4)
@pytest.mark.llm_slo("ttft.p50 < 5s")
async def test_steady(llm_loadgen):
    await llm_loadgen.run()
"""

PLAIN_TEST = """
def test_plain():
    assert True
"""


@pytest.fixture(scope="module")
def sim() -> Iterator[SimProcess]:
    process = start_sim_process("fixed", overrides={"ttft_ms": 20, "itl_ms": 2})
    yield process
    process.stop()


# -- reading rendered Markdown back --------------------------------------------------------


class _Blocks(HTMLParser):
    """The rendered HTML as a sequence of headings (``("h3", text)``), ``<summary>`` lines
    (``("summary", text)``), paragraphs and list items (``("p", text)``) and tables
    (``("table", [header cells], [[row cells], ...])``), cell text as a browser shows it."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.blocks: list[tuple[Any, ...]] = []
        self._text: list[str] | None = None
        self._tag = ""
        self._rows: list[list[str]] = []
        self._row: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in ("h1", "h2", "h3", "h4", "summary", "p", "li", "th", "td"):
            self._text, self._tag = [], tag
        elif tag == "table":
            self._rows = []
        elif tag == "tr":
            self._row = []
        elif tag == "br" and self._text is not None:
            self._text.append("\n")

    def handle_endtag(self, tag: str) -> None:
        if tag in ("th", "td") and self._text is not None:
            self._row.append("".join(self._text).strip())
            self._text = None
        elif tag == "tr":
            self._rows.append(self._row)
        elif tag == "table":
            self.blocks.append(("table", self._rows[0], self._rows[1:]))
        elif tag == self._tag and self._text is not None:
            kind = "p" if tag == "li" else tag
            self.blocks.append((kind, "".join(self._text).strip()))
            self._text = None

    def handle_data(self, data: str) -> None:
        if self._text is not None:
            self._text.append(data)


def render(markdown: str) -> str:
    """GitHub-flavoured Markdown to HTML: CommonMark, raw HTML (``<details>``), tables."""
    md = markdown_it.MarkdownIt("commonmark", {"html": True}).enable("table")
    html: str = md.render(markdown)
    return html


def blocks(markdown: str) -> list[tuple[Any, ...]]:
    parser = _Blocks()
    parser.feed(render(markdown))
    return parser.blocks


def table_after(found: list[tuple[Any, ...]], heading: str) -> tuple[list[str], list[list[str]]]:
    """The first table after the first heading, summary or paragraph containing ``heading``."""
    start = next(i for i, b in enumerate(found) if b[0] != "table" and heading in b[1])
    _, header, rows = next(b for b in found[start:] if b[0] == "table")
    return header, rows


def as_dicts(header: list[str], rows: list[list[str]]) -> list[dict[str, str]]:
    return [dict(zip(header, row, strict=True)) for row in rows]


# -- a whole session -----------------------------------------------------------------------


def test_a_session_writes_markdown_whose_tables_read_back_as_the_json_report(
    pytester: pytest.Pytester, sim: SimProcess
) -> None:
    pytester.makepyfile(SESSION)
    result = pytester.runpytest(
        f"--llm-endpoint={sim.url}", "--llm-json=out/r.json", "--llm-markdown=out/summary.md"
    )
    result.assert_outcomes(passed=1, failed=2)
    result.stdout.fnmatch_lines(["llmperf report: out/summary.md"])
    report = json.loads((pytester.path / "out/r.json").read_text())
    markdown = (pytester.path / "out/summary.md").read_text()
    assert markdown.splitlines()[0] == "## ❌ pytest-llmperf: 1 test failed"
    assert "**1 failed** · **1 inconclusive** · **1 passed**" in markdown.splitlines()[2]
    assert len(markdown) < CHAR_LIMIT and "Shortened" not in markdown
    found = blocks(markdown)
    tests = {t["nodeid"].split("::")[1]: t for t in report["tests"]}
    meets = tests["test_meets[a|b<i>*x*</i>]"]

    # the failing and the inconclusive test: a table each, every SLO as the JSON has it
    for name, kind in (("test_misses", "❌ Failed"), ("test_unsure", "⚠️ Inconclusive")):
        test = tests[name]
        (heading,) = [b[1] for b in found if b[0] == "h3" and test["nodeid"] in b[1]]
        assert heading.startswith(f"{kind}: {test['nodeid']}")
        header, rows = table_after(found, test["nodeid"])
        assert header == [
            "SLO",
            "run",
            "observed",
            "interval",
            "target",
            "compared with",
            "change",
            "verdict",
        ]
        got = as_dicts(header, rows)
        assert len(got) == len(test["slos"])
        for row, slo in zip(got, test["slos"], strict=True):
            op = slo["expr"].split()[1]
            assert row["SLO"] == slo["expr"] and row["run"] == slo["run"]
            assert row["observed"] == format_value(slo["observed"], slo["unit"])
            assert row["interval"] == (format_interval(slo) or "-")
            assert row["target"] == f"{op} {format_value(slo['target'], slo['unit'])}"
            assert row["verdict"].split()[-1] == slo["verdict"]
            if slo["reason"]:  # why it is inconclusive, in a note under the table
                assert any(slo["reason"] in b[1] for b in found if b[0] == "p")
    assert [r["verdict"].split()[-1] for r in as_dicts(*table_after(found, "test_misses"))] == [
        "fail",
        "inconclusive",
    ]
    # where the failing TTFT's time went: the run's split, at p50 and p99
    header, rows = table_after(found, "Where the time went [run0]")
    split = tests["test_misses"]["runs"][0]["ttft_split"]
    assert header[:2] == ["", "ttft"] and [r[0] for r in rows] == ["p50", "p99"]
    assert rows[1][1] == format_value(split["ttft"]["p99"], "ms")
    assert header[-1] == "network/other"
    assert rows[1][-1] == format_value(split["remainder"]["p99"], "ms")

    # the passing test: collapsed, its id (a pipe, tags, stars) as written
    summaries = [b[1] for b in found if b[0] == "summary"]
    assert "Passing tests (1)" in summaries
    header, rows = table_after(found, meets["nodeid"])
    assert [r[0] for r in rows] == ["ttft.p50 < 5s", "error_rate < 1%"]
    assert [r[-1] for r in rows] == ["✅ pass", "✅ pass"]
    assert "<details><summary>Passing tests (1)</summary>" in markdown

    # every gated run: one row, each figure the JSON's
    header, rows = table_after(found, "Gated runs")
    got = as_dicts(header, rows)
    assert [r["test"] for r in got] == [t["nodeid"] for t in report["tests"]]
    for row, test in zip(got, report["tests"], strict=True):
        (run,) = test["runs"]
        m, counts = run["metrics"], run["counts"]
        assert row["run"] == run["label"]
        assert row["ok/issued"] == f"{counts['completed']}/{counts['issued']}"
        for column, (metric, stat) in {
            "TTFT p50": ("ttft", "p50"),
            "TTFT p99": ("ttft", "p99"),
            "TPOT p50": ("tpot", "p50"),
            "TPOT p99": ("tpot", "p99"),
            "ITL p50": ("itl", "p50"),
            "ITL p99": ("itl", "p99"),
        }.items():
            assert row[column] == format_value(m[metric][stat], "ms"), column
        assert row["throughput"] == format_value(m["request_throughput"], "req/s")
        assert row["output"] == format_value(m["output_throughput"], "tok/s")
        assert row["errors"] == format_value(m["error_rate"], "fraction")
        assert row["goodput"] == format_value(m["goodput"], "fraction")
    # the server's own view of each run, the identity, the self-check
    server = [b[1] for b in found if b[0] == "p" and b[1].startswith(meets["nodeid"] + " [run0]")]
    (line,) = server
    sm = meets["runs"][0]["server_metrics"]
    ttft = sm["metrics"]["server.ttft"]  # a bucket's upper bound, said as a bound
    assert f"sim: ttft p50 ≤ {ttft['p50']:.1f} ms (bucket " in line  # p50 on 10 ms and up
    assert f"sim: ttft p50 {bounded_ms(ttft, 'p50')}, p99 {bounded_ms(ttft, 'p99')}" in line
    assert "queue p99" in line and "preemptions 0" in line
    items = [b[1] for b in found if b[0] == "p"]
    assert f"model: {report['endpoint']['model']}" in items
    assert f"endpoint: {report['endpoint']['url']}" in items
    software, version = report["endpoint"]["server_software"], report["endpoint"]["server_version"]
    assert f"server: {software}, version {version}" in items
    assert any(i.startswith("✅ the load generator kept up in every gated run (3)") for i in items)

    # the same text from the JSON report alone, later (a comment step)
    cli = subprocess.run(
        [sys.executable, "-m", "pytest_llmperf.reports.markdown", "out/r.json", "--out", "x.md"],
        cwd=pytester.path,
        capture_output=True,
        text=True,
        check=False,
    )
    assert cli.returncode == 0, cli.stderr
    assert (pytester.path / "x.md").read_text() == markdown


def test_the_command_line_renders_a_json_file_and_refuses_anything_else(tmp_path: Path) -> None:
    report = _synthetic_report(3, failing=1)
    (tmp_path / "r.json").write_text(json.dumps(report))
    (tmp_path / "other.json").write_text(json.dumps({"schema_version": 3, "sessions": []}))
    run = [sys.executable, "-m", "pytest_llmperf.reports.markdown"]
    out = subprocess.run([*run, "r.json"], cwd=tmp_path, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout == build_markdown(report)
    assert out.stdout.startswith("## ❌ pytest-llmperf: 1 test failed\n")
    for name, why in (("other.json", "is no pytest-llmperf JSON report"), ("no.json", "cannot")):
        bad = subprocess.run([*run, name], cwd=tmp_path, capture_output=True, text=True)
        assert bad.returncode == 2 and why in bad.stderr and not bad.stdout


def test_each_session_appends_to_the_github_step_summary(
    pytester: pytest.Pytester, sim: SimProcess, monkeypatch: pytest.MonkeyPatch
) -> None:
    summary = pytester.path / "step_summary.md"
    summary.write_text("# Build\n\nearlier step's words\n")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    pytester.makepyfile(ONE_TEST)
    first = pytester.runpytest(f"--llm-endpoint={sim.url}")
    first.assert_outcomes(passed=1)
    first.stdout.fnmatch_lines([f"llmperf report: {summary} ($GITHUB_STEP_SUMMARY, appended)"])
    after_one = summary.read_text()
    assert after_one.startswith("# Build\n\nearlier step's words\n\n## ✅ pytest-llmperf: passed\n")
    # the second session under xdist (the controller writes, once), with an ini file too
    pytest.importorskip("xdist")
    pytester.makeini("[pytest]\nllm_markdown = out/summary.md\n")
    second = pytester.runpytest_subprocess(f"--llm-endpoint={sim.url}", "-n", "2", "-p", "xdist")
    second.assert_outcomes(passed=1)
    text_now = summary.read_text()
    assert text_now.startswith(after_one)
    assert text_now.count("## ✅ pytest-llmperf: passed") == 2
    assert text_now[len(after_one) :] == "\n" + (pytester.path / "out/summary.md").read_text()
    # off: neither the file nor the step summary; a session of plain tests adds nothing
    off = pytester.runpytest(f"--llm-endpoint={sim.url}", "--llm-markdown=off")
    off.assert_outcomes(passed=1)
    pytester.makepyfile(test_steady=PLAIN_TEST)
    plain = pytester.runpytest(f"--llm-endpoint={sim.url}", "test_steady.py")
    plain.assert_outcomes(passed=1)
    assert summary.read_text() == text_now


@pytest.mark.parametrize(
    ("given", "path", "step_summary"),
    [
        (None, None, True),
        ("out/s.md", "out/s.md", True),
        ("off", None, False),
        ("OFF", None, False),
    ],
)
def test_the_option_is_a_path_or_off(
    given: str | None, path: str | None, step_summary: bool
) -> None:
    options = LlmPerfOptions.resolve(lambda o: given if o.flag == "--llm-markdown" else None)
    assert (options.markdown, options.step_summary) == (path, step_summary)


def test_a_step_summary_that_cannot_be_written_is_a_red_line_and_loses_nothing(
    pytester: pytest.Pytester, sim: SimProcess, monkeypatch: pytest.MonkeyPatch
) -> None:
    (pytester.path / "a_directory").mkdir()
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(pytester.path / "a_directory"))
    pytester.makepyfile(ONE_TEST)
    result = pytester.runpytest(
        f"--llm-endpoint={sim.url}", "--llm-json=r.json", "--llm-markdown=s.md"
    )
    assert result.ret == pytest.ExitCode.INTERNAL_ERROR
    said = "llmperf: the Markdown summary was not written to $GITHUB_STEP_SUMMARY"
    result.stdout.fnmatch_lines([f"{said} (*a_directory): Is a directory"])
    assert json.loads((pytester.path / "r.json").read_text())["tests"]
    assert (pytester.path / "s.md").read_text().startswith("## ✅ pytest-llmperf: passed\n")


# -- trends --------------------------------------------------------------------------------

HISTORY_SESSIONS, STEP_AT, BEFORE = 20, 10, 1.5  # the first 10 stored sessions 50% slower


def test_a_history_with_a_step_shows_sparklines_and_the_change_point(
    pytester: pytest.Pytester, sim: SimProcess
) -> None:
    pytester.makepyfile(ONE_TEST)
    # a first session measures the test: its runs, keyed as the plugin keys them, become
    # 20 stored sessions with a step down at the 11th (slower before), a little noise
    first = pytester.runpytest(f"--llm-endpoint={sim.url}", "--llm-json=first.json")
    first.assert_outcomes(passed=1)
    measured = json.loads((pytester.path / "first.json").read_text())
    (test,) = measured["tests"]
    (run,) = test["runs"]
    endpoint = clean_endpoint(measured["endpoint"])
    key = comparison_key(endpoint["model"], endpoint["api"], run["load"], run["workload"])
    stored = []
    with HistoryStore.open(str(pytester.path / "h.sqlite")) as store:
        for i in range(HISTORY_SESSIONS):
            factor = (BEFORE if i < STEP_AT else 1.0) * (1 + 0.01 * (-1) ** i)
            metrics = json.loads(json.dumps(run["metrics"]))
            for metric in ("ttft", "tpot", "itl", "e2e"):
                metrics[metric] = {
                    k: v * factor if isinstance(v, float) else v for k, v in metrics[metric].items()
                }
            stored.append(metrics)
            record = RunRecord(test["nodeid"], "run0", "passed", key, run["counts"], metrics, {})
            store.append_session(
                SessionRecord(
                    started_at=f"2026-11-01T{i:02d}:00:00.000+00:00",
                    finished_at=f"2026-11-01T{i:02d}:30:00.000+00:00",
                    tag=f"main@{i:04x}",
                    endpoint=endpoint,
                    machine={},
                    options={},
                    runs=[record],
                )
            )
    result = pytester.runpytest(
        f"--llm-endpoint={sim.url}",
        "--llm-history=h.sqlite",
        "--llm-history-tag=pr@head",
        "--llm-json=r.json",
        "--llm-markdown=s.md",
    )
    result.assert_outcomes(passed=1)
    report = json.loads((pytester.path / "r.json").read_text())
    markdown = (pytester.path / "s.md").read_text()
    found = blocks(markdown)
    header, rows = table_after(found, f"{test['nodeid']} [run0] · key {key}")
    assert header == ["statistic", "latest", "last runs (oldest → latest)", "range", "change point"]
    got = {r["statistic"]: r for r in as_dicts(header, rows)}
    assert list(got)[:6] == ["TTFT p50", "TTFT p99", "TPOT p50", "TPOT p99", "ITL p50", "ITL p99"]
    now = report["tests"][0]["runs"][0]["metrics"]
    for title, metric, stat in (("TTFT p50", "ttft", "p50"), ("TPOT p99", "tpot", "p99")):
        row = got[title]
        series = [m[metric][stat] for m in stored] + [now[metric][stat]]
        values = series[-20:]
        assert row["latest"] == format_value(now[metric][stat], "ms") + " (this run)"
        # 20 blocks, the last 20 runs; a bar before the 10th: the first run of the new level
        line = row["last runs (oldest → latest)"]
        assert len(line) == 21 and line[9] == "│", line
        assert line.replace("│", "") == sparkline(values)
        # the stored runs before the step stand above those after it (this run, measured on
        # a machine as busy as it is, may land anywhere)
        level = "▁▂▃▄▅▆▇█".index
        assert min(map(level, line[:9])) > max(map(level, line[10:-1])), line
        low, high = min(values), max(values)
        assert row["range"] == f"{format_value(low, 'ms')} – {format_value(high, 'ms')}"
        # the change point: the 11th of 21 runs, stored session 11's tag, the means either side
        cp = row["change point"]
        assert cp.startswith(f"run {STEP_AT + 1} of {HISTORY_SESSIONS + 1} (main@{STEP_AT:04x}, ")
        before = sum(series[:STEP_AT]) / STEP_AT
        after = sum(series[STEP_AT:]) / (len(series) - STEP_AT)
        said = f"{format_value(before, 'ms')} → {format_value(after, 'ms')}"
        assert f"{said} ({format_change(after / before - 1)})" in cp, cp
    # the JSON report carries what the Markdown shows, so the command line writes it again
    digest = report["trends"]["tests"][test["nodeid"]][0]["series"][0]
    assert (digest["metric"], digest["stat"], digest["first"], digest["count"]) == (
        "ttft",
        "p50",
        2,
        21,
    )
    assert [cp["run"] for cp in digest["change_points"]] == [STEP_AT + 1]
    assert build_markdown(report) == markdown
    # the history's own Markdown export: the same series, this session now stored too
    out = pytester.path / "export.md"
    assert history_main(["h.sqlite", "export", "--format", "markdown", "--out", str(out)]) == 0
    exported = blocks(out.read_text())
    header, rows = table_after(exported, f"· key {key}")
    row = as_dicts(header, rows)[0]
    assert row["statistic"] == "TTFT p50" and row["latest"].startswith(
        format_value(now["ttft"]["p50"], "ms")
    )
    assert row["change point"].startswith(f"run {STEP_AT + 1} of {HISTORY_SESSIONS + 1} (main@")
    sessions = table_after(exported, "Sessions (newest first)")[1]
    assert [r[0] for r in sessions][:2] == [str(HISTORY_SESSIONS + 1), str(HISTORY_SESSIONS)]
    assert sessions[0][2] == "pr@head"


# -- the size cap --------------------------------------------------------------------------


def _synthetic_report(n: int, *, failing: int, staged: bool = False) -> dict[str, Any]:
    """A report of ``n`` tests (the first ``failing`` failing), each one run of 40 requests."""
    data = SessionData()
    for i in range(n):
        run = synthetic_run(30 + i % 7, 40, seed=i, rate=20, label="run0")
        slo = "ttft.p50 < 1ms" if i < failing else "ttft.p50 < 5s"
        nodeid = f"tests/perf/test_suite_{i // 50}.py::test_case[rate={i}|model=<m{i}>]"
        body = payload([run], [slo, "error_rate < 5%"])
        if staged:
            body["runs"][0]["stages"] = [
                {
                    "index": k,
                    "planned_rate": 10.0 * (k + 1),
                    "achieved_rate": 10.0 * (k + 1),
                    "counts": run.counts,
                    "metrics": run.accumulator.summary(),
                }
                for k in range(3)
            ]
        data.add(nodeid, "failed" if i < failing else "passed", body)
    endpoint = next(iter(data.tests.values())).endpoint
    return build_report(data, endpoint=endpoint, session={"exitstatus": 1 if failing else 0})


def test_a_300_test_session_stays_under_the_cap_and_says_what_it_left_out() -> None:
    report = _synthetic_report(300, failing=4, staged=True)
    full = build_markdown(report, limit=10**9)
    assert len(full) > 3 * CHAR_LIMIT  # far over: the cap has work to do
    markdown = build_markdown(report)
    assert len(markdown) <= CHAR_LIMIT
    assert markdown.startswith("## ❌ pytest-llmperf: 4 tests failed\n")
    note = next(line for line in markdown.splitlines() if "Shortened" in line)
    assert note.startswith("> ✂️ **Shortened** to stay under 60,000 characters: left out ")
    assert "296 passing tests' tables" in note and "300 per-stage/per-turn tables" in note
    found = blocks(markdown)
    # every failing test's table kept; the failing tests' runs first in the runs table
    for test in report["tests"][:4]:
        assert any(b[0] == "h3" and test["nodeid"] in b[1] for b in found)
    _, rows = table_after(found, "Gated runs")
    shown = [r[0] for r in rows]
    assert shown[:4] == [t["nodeid"] for t in report["tests"][:4]]
    left = int(note.split(" rows of the gated-runs table")[0].rsplit(" ", 1)[1])
    assert len(shown) + left == 300
    # the parts that are never left out
    assert "### Endpoint and server" in markdown and "### Load generator self-check" in markdown
    assert markdown.rstrip().endswith("</sub>")
    # a small limit keeps the verdict and says it cut
    tiny = build_markdown(report, limit=3_000)
    assert len(tiny) <= 3_000 and tiny.startswith("## ❌ pytest-llmperf: 4 tests failed\n")


# -- the building blocks -------------------------------------------------------------------


def test_cells_escape_markup_and_sparklines_scale_to_the_blocks() -> None:
    odd = "a|b <b>x</b> *y* _z_ [l](u) `c` & \\ #1"
    md = table(["plain", "code"], [[text(odd), code(odd)], [text("two\nlines"), "-"]])
    (block,) = blocks(md)
    assert block[1] == ["plain", "code"]
    assert block[2] == [[odd, odd], ["two\nlines", "-"]]
    assert sparkline([1, 2, 3, 4, 5, 6, 7, 8]) == "▁▂▃▄▅▆▇█"
    assert sparkline([5.0, 5.0, 5.0]) == "▄▄▄"
    assert sparkline([10, 10, 0, 0], breaks=[2]) == "██│▁▁"
    assert sparkline([1.0, None, 3.0]) == "▁ █"
    # the scale spans at least a tenth of the values: a percent of noise stays flat-ish
    assert set(sparkline([100.0, 101.0, 99.0, 100.5])) <= set("▃▄▅")
    assert sparkline([100.0, 100.0, 130.0, 130.0]) == "▁▁██"


def test_baseline_comparisons_fill_the_compared_column() -> None:
    report = _synthetic_report(1, failing=0)
    test = report["tests"][0]
    check = {
        "metric": "ttft",
        "stat": "p50",
        "name": "ttft.p50",
        "baseline": 20.0,
        "current": 26.0,
        "change": 0.3,
        "threshold": 0.1,
        "p_value": 0.001,
        "mde": 0.18,
        "level": 0.002,
        "verdict": "regressed",
        "run": "run0",
        "compared_with": "history (last 5 runs)",
        "reason": "",
        "comparable": True,
        "differs": [],
    }
    report = {**report, "tests": [{**test, "baseline": [check], "outcome": "failed"}]}
    found = blocks(build_markdown(report))
    (slo_row, _) = as_dicts(*table_after(found, test["nodeid"]))
    assert slo_row["history"] == format_value(20.0, "ms") and slo_row["change"] == "+30.0%"
    header, rows = table_after(found, "Compared with the history (history (last 5 runs))")
    assert header == [
        "statistic",
        "run",
        "this run",
        "history",
        "change",
        "allowed",
        "p",
        "detects",
        "verdict",
    ]
    row = ["ttft.p50", "run0", "26.0 ms", "20.0 ms", "+30.0%", "+10%", "0.001", "≥ +18.0%"]
    assert rows == [[*row, "❌ regressed"]]
    assert found[0][1].startswith("❌ pytest-llmperf: 1 test failed")
    heading = next(b[1] for b in found if b[0] == "h3")
    assert heading.endswith("(1 statistic(s) regressed (history))")


def test_an_interrupted_or_empty_session_still_renders() -> None:
    empty = build_report(SessionData(), endpoint={"url": None, "simulator": "fixed"}, session={})
    markdown = build_markdown(empty)
    assert markdown.startswith("## ✅ pytest-llmperf: passed\n")
    assert "no test measured anything" in markdown
    report = _synthetic_report(2, failing=0)
    report["session"]["interrupted"] = True
    assert build_markdown(report).startswith("## ⏹️ pytest-llmperf: interrupted\n")
