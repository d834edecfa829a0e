"""The history store against real databases: SQLite and a throwaway PostgreSQL server
(every test here runs on both through the ``target`` fixture)."""

from __future__ import annotations

import multiprocessing
import sqlite3
from pathlib import Path

import pytest
from history_workers import KEY, append_many, run_record, session_record

from pytest_llmperf.history import SCHEMA_VERSION, HistoryError, HistoryStore, comparison_key
from pytest_llmperf.history.backends import Query, open_database, target_label
from pytest_llmperf.history.schema import migrations


def test_a_new_store_is_created_at_the_current_schema_version(target: str) -> None:
    with HistoryStore.open(target) as store:
        assert store.migrated_from == 0
        assert store.sessions() == [] and store.runs() == []
    with HistoryStore.open(target) as again:  # reopening changes nothing
        assert again.migrated_from == SCHEMA_VERSION


def test_append_and_read_back_sessions_runs_and_accumulators(target: str) -> None:
    with HistoryStore.open(target) as store:
        first = store.append_session(
            session_record("main@abc", [run_record("t::a", 10.0), run_record("t::b", 50.0)])
        )
        second = store.append_session(session_record("main@def", [run_record("t::a", 12.0)]))
        assert second > first
        sessions = store.sessions()
        assert [(s.id, s.tag, s.run_count) for s in sessions] == [
            (first, "main@abc", 2),
            (second, "main@def", 1),
        ]
        assert sessions[0].endpoint["model"] == "sim-model"
        assert sessions[0].machine == {"hostname": "test"}
        runs = store.runs("t::a")
        assert [(r.session_id, r.tag, r.label, r.key) for r in runs] == [
            (first, "main@abc", "run0", KEY),
            (second, "main@def", "run0", KEY),
        ]
        assert runs[0].load["concurrency"] == 8 and runs[0].workload["requests"] == 20
        assert runs[0].counts["completed"] == 50
        # the lossless state: the decoded histograms give the stored summary back
        acc = runs[1].accumulator()
        assert acc.summary()["ttft"] == runs[1].metrics["ttft"]
        assert runs[1].accumulator() is acc  # decoded once
        assert len(store.runs()) == 3 and store.tests() == ["t::a", "t::b"]
        assert [r.test for r in store.runs(session_id=first)] == ["t::a", "t::b"]


def test_comparable_returns_the_last_n_runs_with_the_key_newest_last(target: str) -> None:
    other = comparison_key("other-model", "chat", {}, {})
    with HistoryStore.open(target) as store:
        ids = [
            store.append_session(
                session_record(
                    f"s{i}", [run_record("t::a", 10.0 + i), run_record("t::a", 99.0, key=other)]
                )
            )
            for i in range(6)
        ]
        last3 = store.comparable("t::a", KEY, 3)
        assert [r.session_id for r in last3] == ids[3:]
        assert all(r.key == KEY for r in last3)
        before = store.comparable("t::a", KEY, 2, before_session=ids[4])
        assert [r.session_id for r in before] == ids[2:4]
        assert store.comparable("t::a", KEY, 0) == []
        assert store.comparable("t::nope", KEY, 5) == []
        assert len(store.comparable("t::a", other, 10)) == 6


def test_series_gives_one_value_per_stored_run_in_time_order(target: str) -> None:
    with HistoryStore.open(target) as store:
        for i in range(4):
            store.append_session(session_record(f"s{i}", [run_record("t::a", 10.0 * (i + 1))]))
        points = store.series("t::a", "ttft", "p50")
        assert [p.tag for p in points] == ["s0", "s1", "s2", "s3"]
        values = [p.value for p in points]
        assert values == sorted(values) and 9 < values[0] < 11 and 38 < values[-1] < 42
        assert [p.value for p in store.series("t::a", "ttft", "p50", key=KEY)] == values
        assert store.series("t::a", "ttft", "p50", key="nokey") == []
        completed = store.series("t::a", "output_tokens", "ignored")
        assert [p.value for p in completed] == [0.0] * 4
        assert store.series("t::a", "e2e", "p50") == []  # empty histograms have no value


def test_a_v1_store_is_migrated_and_its_runs_stay_readable(target: str) -> None:
    db = open_database(target)

    def make_v1(q: Query) -> None:
        for statement in migrations(db.dialect)[1]:
            q(statement, ())
        q("UPDATE schema_version SET version = 1", ())
        q(
            "INSERT INTO sessions (started_at, finished_at, tag, endpoint, machine, options) "
            "VALUES ('2025-01-01T00:00:00', '2025-01-01T00:01:00', 'old', '{}', '{}', '{}')",
            (),
        )
        state = run_record("t::a", 10.0)
        import json

        q(
            "INSERT INTO runs (session_id, test, label, outcome, run_key, counts, metrics, state) "
            "VALUES (1, 't::a', 'run0', 'passed', ?, ?, ?, ?)",
            (KEY, json.dumps(state.counts), json.dumps(state.metrics), json.dumps(state.state)),
        )

    db.transact(make_v1)
    db.close()
    with HistoryStore.open(target) as store:
        assert store.migrated_from == 1
        (old,) = store.runs()
        assert old.tag == "old" and old.load == {} and old.workload == {}
        assert old.accumulator().counts()["completed"] == 50
        store.append_session(session_record("new", [run_record("t::a", 11.0)]))
        assert [r.tag for r in store.comparable("t::a", KEY, 5)] == ["old", "new"]
    with HistoryStore.open(target) as again:
        assert again.migrated_from == SCHEMA_VERSION


def test_a_newer_schema_version_is_refused_and_left_alone(target: str) -> None:
    HistoryStore.open(target).close()
    db = open_database(target)
    db.transact(lambda q: q("UPDATE schema_version SET version = 99", ()))
    db.close()
    with pytest.raises(HistoryError, match="schema version 99 is newer") as caught:
        HistoryStore.open(target)
    assert target_label(target) in str(caught.value)
    db = open_database(target)
    assert db.query("SELECT version FROM schema_version") == [(99,)]
    db.close()


def test_a_foreign_database_is_refused_naming_it(target: str) -> None:
    db = open_database(target)
    db.transact(lambda q: q("CREATE TABLE invoices (id INTEGER, total INTEGER)", ()))
    db.close()
    with pytest.raises(HistoryError, match=r"not a pytest-llmperf history.*invoices") as caught:
        HistoryStore.open(target)
    assert str(caught.value).startswith(target_label(target))


def test_a_foreign_schema_version_table_is_refused(target: str) -> None:
    db = open_database(target)
    db.transact(lambda q: q("CREATE TABLE schema_version (version INTEGER)", ()))
    db.close()
    with pytest.raises(HistoryError, match="not a pytest-llmperf history"):
        HistoryStore.open(target)


def test_concurrent_appends_from_several_processes_lose_nothing(target: str) -> None:
    workers, each = 4, 8
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=append_many, args=(target, w, each)) for w in range(workers)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
    assert [p.exitcode for p in procs] == [0] * workers
    with HistoryStore.open(target) as store:
        sessions = store.sessions()
        assert len(sessions) == workers * each
        assert sorted(s.tag for s in sessions) == sorted(
            f"w{w}-{i}" for w in range(workers) for i in range(each)
        )
        assert len({s.id for s in sessions}) == workers * each
        assert all(s.run_count == 2 for s in sessions)  # each session in one transaction
        assert len(store.runs("t::a")) == len(store.runs("t::b")) == workers * each


# -- SQLite only -------------------------------------------------------------------


def test_a_corrupt_file_is_an_error_naming_it(tmp_path: Path) -> None:
    bad = tmp_path / "h.sqlite"
    bad.write_bytes(b"this is not a database\n" * 200)
    with pytest.raises(HistoryError, match="not a readable SQLite database") as caught:
        HistoryStore.open(str(bad))
    assert str(bad) in str(caught.value)
    assert bad.read_bytes().startswith(b"this is not")  # left alone


def test_a_directory_or_a_missing_file_without_create_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(HistoryError, match="is a directory"):
        HistoryStore.open(str(tmp_path))
    with pytest.raises(HistoryError, match="no history file here"):
        HistoryStore.open(str(tmp_path / "none.sqlite"), create=False)
    assert not (tmp_path / "none.sqlite").exists()


def test_sqlite_store_uses_wal_and_creates_missing_folders(tmp_path: Path) -> None:
    path = tmp_path / "deep" / "er" / "h.sqlite"
    HistoryStore.open(str(path)).close()
    with sqlite3.connect(path) as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_a_url_is_printed_without_its_credentials() -> None:
    assert target_label("postgresql://me:s3cret@db.example:5432/h") == (
        "postgresql://***@db.example:5432/h"
    )
    assert target_label("h.sqlite") == "h.sqlite"


def test_an_unreachable_postgresql_server_is_a_clear_error_without_the_password() -> None:
    pytest.importorskip("psycopg")
    with socket_port() as port:
        url = f"postgresql://me:s3cret@127.0.0.1:{port}/h?connect_timeout=2"
        with pytest.raises(HistoryError, match="cannot connect") as caught:
            HistoryStore.open(url)
    assert "s3cret" not in str(caught.value)
    assert "***@127.0.0.1" in str(caught.value)


class socket_port:  # a tiny context manager: a port nothing listens on
    def __enter__(self) -> int:
        import socket

        self._s = socket.socket()
        self._s.bind(("127.0.0.1", 0))
        return int(self._s.getsockname()[1])

    def __exit__(self, *exc: object) -> None:
        self._s.close()
