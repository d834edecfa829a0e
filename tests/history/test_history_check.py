"""``--llm-history`` is checked when the session starts: an unusable target is a usage
error naming the option and the target (never its password) before any load runs.

The pytester sessions point ``--llm-endpoint`` at a listening socket that must never
see a connection (the pattern of tests/hardening/test_usage_errors.py), so "before any
load" is checked, not assumed. Each case that both backends can have runs on both
(the ``target`` fixture, conftest.py).
"""

from __future__ import annotations

import socket
import sqlite3
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from history_workers import Untouchable, execute, run_record, session_record

from pytest_llmperf.history import SCHEMA_VERSION, HistoryError, HistoryStore
from pytest_llmperf.history.backends import Query, open_database, target_label
from pytest_llmperf.history.check import check_history_target
from pytest_llmperf.history.schema import _PG_LOCK as MIGRATION_LOCK
from pytest_llmperf.history.schema import migrations

SUITE = """
import pytest

@pytest.mark.llm_workload("synthetic", input_tokens=8, output_tokens=4, requests=4)
@pytest.mark.llm_load("concurrency", concurrency=2)
async def test_perf(llm_loadgen):
    await llm_loadgen.run()
"""


@pytest.fixture
def watched_endpoint() -> Iterator[str]:
    """The session's endpoint: nothing may connect to it."""
    with Untouchable() as endpoint:
        yield endpoint.url
        assert not endpoint.touched(), "the load reached the endpoint"


@pytest.fixture
def closed_port() -> Iterator[int]:
    """A 127.0.0.1 port that nothing listens on (bound, never listening)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        yield int(s.getsockname()[1])


def session(pytester: pytest.Pytester, endpoint: str, history: str) -> pytest.RunResult:
    pytester.makepyfile(test_check=SUITE)
    return pytester.runpytest(
        f"--llm-endpoint={endpoint}",
        "--llm-model=m",
        "-p",
        "no:cacheprovider",
        f"--llm-history={history}",
    )


def assert_usage_error(result: pytest.RunResult, *fragments: str) -> str:
    text = result.stdout.str() + result.stderr.str()
    assert result.ret == pytest.ExitCode.USAGE_ERROR, text
    assert "pytest-llmperf: --llm-history " in text, text
    for fragment in fragments:
        assert fragment in text, f"{fragment!r} not in:\n{text}"
    assert "Traceback" not in text and "passed" not in result.stdout.str(), text
    return text


# -- both backends -----------------------------------------------------------------


def test_a_foreign_database_stops_the_session_before_any_load(
    pytester: pytest.Pytester, watched_endpoint: str, target: str
) -> None:
    execute(target, "CREATE TABLE invoices (id INTEGER)")
    result = session(pytester, watched_endpoint, target)
    assert_usage_error(result, target_label(target), "not a pytest-llmperf history", "invoices")


def test_a_newer_schema_stops_the_session_before_any_load(
    pytester: pytest.Pytester, watched_endpoint: str, target: str
) -> None:
    HistoryStore.open(target).close()
    execute(target, "UPDATE schema_version SET version = 99")
    result = session(pytester, watched_endpoint, target)
    assert_usage_error(result, target_label(target), "schema version 99 is newer")


def test_a_usable_store_is_only_read_at_configure_time(
    pytester: pytest.Pytester, target: str
) -> None:
    # an old (version 1) store: opening it for writing would migrate it; the check must not
    execute(target, *migrations("postgresql" if "://" in target else "sqlite")[1])
    execute(target, "UPDATE schema_version SET version = 1")
    assert check_history_target(target) == 1
    pytester.makepyfile(test_check=SUITE)
    listed = pytester.runpytest(
        "--collect-only", "-p", "no:cacheprovider", f"--llm-history={target}"
    )
    assert listed.ret == pytest.ExitCode.OK, listed.stdout.str()
    assert check_history_target(target) == 1  # still version 1: nothing was written


def test_the_check_neither_waits_for_nor_blocks_a_writer(target: str) -> None:
    """A writer holds the store's write lock (SQLite) or the migration lock
    (PostgreSQL) in an open transaction: the read-only check still answers."""
    with HistoryStore.open(target) as store:
        store.append_session(session_record("s1", [run_record("t::a", 10.0)]))
    holding, release, done = threading.Event(), threading.Event(), threading.Event()

    def writer() -> None:
        db = open_database(target)

        def hold_the_locks(q: Query) -> None:
            if db.dialect == "postgresql":
                q("SELECT pg_advisory_xact_lock(?)", (MIGRATION_LOCK,))
            q(
                "INSERT INTO sessions (started_at, finished_at, tag, endpoint, machine, options)"
                " VALUES ('x', 'x', 'writer', '{}', '{}', '{}')",
                (),
            )
            holding.set()
            release.wait(30)

        try:
            db.transact(hold_the_locks)
        finally:
            db.close()
            done.set()

    thread = threading.Thread(target=writer, daemon=True)
    thread.start()
    try:
        assert holding.wait(30)
        assert check_history_target(target) == SCHEMA_VERSION
    finally:
        release.set()
        thread.join(30)
    assert done.is_set()


# -- PostgreSQL ----------------------------------------------------------------------


def test_an_unreachable_server_stops_the_session_without_printing_the_password(
    pytester: pytest.Pytester, watched_endpoint: str, closed_port: int
) -> None:
    pytest.importorskip("psycopg")
    url = f"postgresql://alice:s3cret-pw@127.0.0.1:{closed_port}/perf?connect_timeout=5"
    result = session(pytester, watched_endpoint, url)
    text = assert_usage_error(
        result, f"postgresql://***@127.0.0.1:{closed_port}/perf", "cannot connect"
    )
    assert "s3cret-pw" not in text and "alice" not in text


def test_a_wrong_password_is_named_without_the_password(
    pytester: pytest.Pytester, watched_endpoint: str, pg_url: str
) -> None:
    # the throwaway server trusts every login; a database that does not exist is refused
    missing = pg_url.rsplit("/", 1)[0].replace("postgres@", "postgres:hunter22@") + "/no_such_db"
    result = session(pytester, watched_endpoint, missing)
    text = assert_usage_error(result, "postgresql://***@127.0.0.1", "no_such_db")
    assert "hunter22" not in text


def test_without_psycopg_a_postgresql_url_is_a_usage_error(
    pytester: pytest.Pytester, watched_endpoint: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "psycopg", None)  # import psycopg -> ImportError
    url = "postgresql://ci:token123@db.example/perf"
    result = session(pytester, watched_endpoint, url)
    text = assert_usage_error(result, "postgresql://***@db.example/perf", "needs psycopg 3")
    assert "token123" not in text


# -- SQLite ------------------------------------------------------------------------------


def test_a_corrupt_file_stops_the_session_and_is_left_alone(
    pytester: pytest.Pytester, watched_endpoint: str, tmp_path: Path
) -> None:
    bad = tmp_path / "h.sqlite"
    bad.write_bytes(b"definitely not sqlite\n" * 100)
    result = session(pytester, watched_endpoint, str(bad))
    assert_usage_error(result, str(bad), "not a readable SQLite database")
    assert bad.read_bytes() == b"definitely not sqlite\n" * 100


@pytest.mark.parametrize("where", ["a folder", "under a file"])
def test_a_place_where_no_store_can_be_made_stops_the_session(
    pytester: pytest.Pytester, watched_endpoint: str, tmp_path: Path, where: str
) -> None:
    if where == "a folder":
        bad, message = tmp_path, "is a directory"
    else:
        (tmp_path / "plain").write_text("x")
        bad, message = tmp_path / "plain" / "sub" / "h.sqlite", "is not a folder"
    result = session(pytester, watched_endpoint, str(bad))
    assert_usage_error(result, str(bad), message)


def test_a_missing_file_is_fine_and_not_created_by_the_check(tmp_path: Path) -> None:
    path = tmp_path / "new" / "h.sqlite"
    assert check_history_target(str(path)) == 0
    assert not (tmp_path / "new").exists()
    with pytest.raises(HistoryError, match="empty history target"):
        check_history_target("  ")


def test_a_store_is_read_without_switching_its_journal(tmp_path: Path) -> None:
    path = tmp_path / "h.sqlite"
    with sqlite3.connect(path) as conn:  # a rollback-journal file: the check must keep it so
        for statement in migrations("sqlite")[1]:
            conn.execute(statement)
        conn.execute("UPDATE schema_version SET version = 1")
    assert check_history_target(str(path)) == 1
    with sqlite3.connect(path) as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "delete"
