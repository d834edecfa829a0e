"""Trends over a history store: series per comparison key, change points, text and HTML.

Every store here is the ``target`` fixture's: a SQLite file and a database on the
throwaway PostgreSQL server alike (conftest.py)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest

from pytest_llmperf.history.errors import HistoryError
from pytest_llmperf.history.records import RunRecord, SessionRecord
from pytest_llmperf.history.store import HistoryStore
from pytest_llmperf.history.trends import (
    detect_command,
    report_trends,
    trend_sections,
    trend_series,
    trend_table,
)

TEST = "tests/test_chat.py::test_latency"


def _metrics(ttft: float) -> dict[str, object]:
    return {
        "ttft": {"p50": ttft, "p99": ttft * 2, "count": 100},
        "tpot": {"p50": 5.0, "p99": 7.0, "count": 100},
        "request_throughput": 4.0,
    }


def store_history(
    target: str,
    values: Sequence[float],
    *,
    test: str = TEST,
    key: str = "k1",
    tag: str = "main@abc",
) -> None:
    """One session per value: ``test``'s run ``run0`` with TTFT p50 = value."""
    with HistoryStore.open(target) as store:
        for i, value in enumerate(values):
            run = RunRecord(test, "run0", "passed", key, {"completed": 100}, _metrics(value), {})
            store.append_session(
                SessionRecord(
                    started_at=f"2026-11-{1 + i // 24:02d}T{i % 24:02d}:00:00.000+00:00",
                    finished_at=f"2026-11-{1 + i // 24:02d}T{i % 24:02d}:30:00.000+00:00",
                    tag=f"{tag}{i}",
                    endpoint={"model": "m"},
                    machine={},
                    options={},
                    runs=[run],
                )
            )


def stepped(n: int, at: int, factor: float = 1.10, cv: float = 0.02, seed: int = 0) -> list[float]:
    rng = np.random.default_rng(seed)
    return [
        float(v) for v in 50.0 * np.where(np.arange(n) >= at, factor, 1.0) * rng.lognormal(0, cv, n)
    ]


@pytest.fixture
def history(target: str) -> str:
    store_history(target, stepped(20, 12))
    return target


def test_series_has_the_stored_values_in_order_and_the_change_point(history: str) -> None:
    with HistoryStore.open(history) as store:
        (series,) = trend_series(store, TEST, "ttft", "p50")
    assert [p.value for p in series.points] == pytest.approx(stepped(20, 12))
    assert [cp.index for cp in series.change_points] == [12]
    (cp,) = series.change_points
    assert cp.relative_change == pytest.approx(0.10, abs=0.03)


def test_runs_with_different_keys_are_separate_series(target: str) -> None:
    store_history(target, [50.0] * 6, key="k1")
    store_history(target, [80.0] * 4, key="k2")
    with HistoryStore.open(target) as store:
        series = trend_series(store, TEST, "ttft", "p50")
    assert [(s.key, len(s.points)) for s in series] == [("k1", 6), ("k2", 4)]
    assert all(not s.change_points for s in series)  # a mixed series would show one at 6


def test_trend_table_marks_the_change_point(history: str) -> None:
    with HistoryStore.open(history) as store:
        text = trend_table(store, TEST, "ttft")
    lines = text.splitlines()
    assert lines[0] == f"{TEST} · TTFT p50 (ms) · run run0 · key k1"
    assert lines[1].split() == [
        "#",
        "session",
        "when",
        "(UTC)",
        "tag",
        "run",
        "value",
        "change",
        "point",
    ]
    rows = lines[3:-1]
    assert len(rows) == 20
    marked = [r for r in rows if "▲" in r]
    assert len(marked) == 1 and marked[0].split()[0] == "13"  # run 13 = index 12
    assert "main@abc12" in marked[0] and "+" in marked[0] and "p=" in marked[0]
    assert lines[-1] == "1 change point in 20 runs (significance 0.05)"


def test_trend_table_of_a_rate_and_of_a_percentile(history: str) -> None:
    with HistoryStore.open(history) as store:
        rate = trend_table(store, TEST, "request_throughput")
        p99 = trend_table(store, TEST, "ttft", stat="p99")
    assert "request_throughput (/s)" in rate.splitlines()[0] and "4.000 /s" in rate
    assert "TTFT p99" in p99.splitlines()[0] and "▲" in p99


def test_trend_table_of_nothing_is_an_error(history: str) -> None:
    with HistoryStore.open(history) as store, pytest.raises(HistoryError, match="no stored"):
        trend_table(store, TEST, "e2e")


def test_trend_page_is_standalone_html_with_a_chart(history: str) -> None:
    with HistoryStore.open(history) as store:
        page = trend_table(store, TEST, "ttft", html=True)
    assert page.startswith("<!DOCTYPE html>") and page.rstrip().endswith("</html>")
    for external in ("<script", "<link", " src=", "url("):
        assert external not in page.lower()
    assert page.count('<svg class="plot" data-kind="trend"') == 1
    assert page.count('class="band-edge"') == 1  # one change point: one dashed line
    assert page.count('<tr class="change-point">') == 1
    assert "main@abc12" in page


def test_detect_command_lists_change_points_per_test(target: str) -> None:
    store_history(target, stepped(20, 12))
    store_history(target, stepped(20, 30, seed=5), test="tests/test_chat.py::test_flat")
    with HistoryStore.open(target) as store:
        text = detect_command(store)
        only = detect_command(store, test="tests/test_chat.py::test_flat", alpha=0.01)
    lines = text.splitlines()
    flat = "tests/test_chat.py::test_flat [key k1] TTFT p50"
    assert lines[0] == f"{flat}: no change point in 20 runs (alpha 0.05)"
    assert lines[1] == f"{TEST} [key k1] TTFT p50: 1 change point in 20 runs (alpha 0.05)"
    assert lines[2].startswith("  from run 13 (session 13, 2026-11-01 12:00:00, main@abc12): ")
    assert "→" in lines[2] and "p=0.005" in lines[2]
    assert only.splitlines() == [
        "tests/test_chat.py::test_flat [key k1] TTFT p50: no change point in 20 runs (alpha 0.01)"
    ]


def test_detect_command_names_a_test_without_the_metric(history: str) -> None:
    with HistoryStore.open(history) as store:
        assert detect_command(store, metric="e2e") == f"{TEST}: no stored value of e2e p50"


def _report_test(ttft: float, *, model: str = "m") -> dict[str, object]:
    return {
        "nodeid": TEST,
        "endpoint": {"model": model, "api": "chat"},
        "runs": [{"label": "run0", "load": {}, "workload": {}, "metrics": _metrics(ttft)}],
    }


def _key(model: str = "m") -> str:
    from pytest_llmperf.history.records import comparison_key

    return comparison_key(model, "chat", {}, {})


def test_trend_sections_append_the_current_run_marked(target: str) -> None:
    store_history(target, stepped(15, 8), key=_key())
    with HistoryStore.open(target) as store:
        sections = trend_sections(store, [_report_test(61.0)], {"model": "m", "api": "chat"})
    (section,) = sections[TEST]
    assert (section.label, section.key) == ("run0", _key())
    titles = [s.title for s in section.series]
    assert titles == ["TTFT p50", "TTFT p99", "TPOT p50"]  # no e2e stored: not drawn
    ttft = section.series[0]
    assert len(ttft.points) == 16 and ttft.current == 15 and ttft.points[-1].value == 61.0
    assert [cp.index for cp in ttft.change_points] == [8]
    assert len(section.charts) == 3
    assert 'data-series="this run"' in section.charts[0]


def test_trend_sections_draw_the_last_stored_runs(target: str) -> None:
    store_history(target, [50.0 + i for i in range(8)], key=_key())
    with HistoryStore.open(target) as store:
        sections = trend_sections(
            store, [_report_test(70.0)], {"model": "m", "api": "chat"}, last=5
        )
    ttft = sections[TEST][0].series[0]
    assert [p.value for p in ttft.points] == [53.0, 54.0, 55.0, 56.0, 57.0, 70.0]
    assert ttft.current == 5


def test_trend_sections_leave_out_runs_without_comparable_history(target: str) -> None:
    store_history(target, [50.0] * 5, key=_key("other-model"))
    with HistoryStore.open(target) as store:
        assert trend_sections(store, [_report_test(50.0)], {"model": "m", "api": "chat"}) == {}


def test_report_trends_never_raises(tmp_path: Path, target: str) -> None:
    report = {"tests": [_report_test(50.0)], "endpoint": {"model": "m", "api": "chat"}}
    missing = report_trends(str(tmp_path / "none.sqlite"), report)
    assert missing.sections == {} and "first" in missing.note and not missing.error
    assert not (tmp_path / "none.sqlite").exists()  # reading never creates the store
    corrupt = tmp_path / "corrupt.sqlite"
    corrupt.write_bytes(b"not a database at all" * 100)
    bad = report_trends(str(corrupt), report)
    assert bad.error and bad.sections == {}
    store_history(target, [50.0, 51.0, 49.0], key=_key())
    good = report_trends(target, report)
    assert list(good.sections) == [TEST] and not good.error
