"""A session that stopped before load in the history (schema version 4): a session row
marked stopped, with no runs, read back, exported and listed; a version-3 store migrated
with its sessions kept, each ``stopped`` null. SQLite and PostgreSQL alike (``target``);
the whole session, plugin to store, is walked in tests/plugin/test_gate_states.py."""

from __future__ import annotations

import json
from dataclasses import replace

from history_workers import run_record, session_record

from pytest_llmperf.history import SCHEMA_VERSION, HistoryStore
from pytest_llmperf.history.backends import Query, open_database
from pytest_llmperf.history.cli import list_runs, show_session
from pytest_llmperf.history.export import export_json
from pytest_llmperf.history.markdown import export_markdown
from pytest_llmperf.history.schema import migrations
from pytest_llmperf.history.session import build_session_record

STOP = {
    "phase": "preflight",
    "reason": "--llm-endpoint: GET /v1/models at http://h:8000/v1 answered HTTP 503",
    "server_says": "HTTP 503: Loading model",
    "endpoint": "http://h:8000/v1",
    "state": "stopped before load: server refused",
    "exit_status": 1,
}


def test_a_stopped_session_is_a_row_marked_stopped_between_the_others(target: str) -> None:
    assert SCHEMA_VERSION >= 4  # the stop came with version 4
    with HistoryStore.open(target) as store:
        store.append_session(session_record("before", [run_record("t::a", 50.0)]))
        store.append_session(replace(session_record("broken", []), stopped=dict(STOP)))
        store.append_session(session_record("after", [run_record("t::a", 51.0)]))
        before, broken, after = store.sessions()
        assert before.stopped is None and after.stopped is None
        assert broken.stopped == STOP and broken.run_count == 0
        exported = json.loads(export_json(store))
        summary = export_markdown(store)
        listing = list_runs(store.runs(), [s for s in store.sessions() if s.stopped]).splitlines()
        shown = show_session(store, broken.id)
    assert [s["stopped"] for s in exported["sessions"]] == [None, STOP, None]
    assert [line.split()[0] for line in listing[1:]] == ["1", "2", "3"]  # in session order
    said = "the gate did not run: stopped at preflight (server refused, exit status 1)"
    assert [said in line for line in listing[1:]] == [False, True, False]
    assert "the server says: HTTP 503: Loading model" in shown
    assert summary.count("⛔ the gate did not run") == 1  # the sessions table's row


def test_the_record_of_a_stop_is_scrubbed_of_credentials() -> None:
    quoted = {**STOP, "server_says": "HTTP 503: upstream http://admin:hunter22@10.0.0.5/ down"}
    record = build_session_record(
        [], endpoint={}, options={}, started_at="2026-01-01T00:00:00", stopped=quoted
    )
    assert record.stopped is not None
    assert "hunter22" not in json.dumps(record.stopped)  # credentials the server quoted
    assert record.stopped["exit_status"] == 1 and record.stopped["phase"] == "preflight"


def test_a_version_3_store_is_migrated_and_its_sessions_ran(target: str) -> None:
    db = open_database(target)

    def make_v3(q: Query) -> None:
        for version in (1, 2, 3):
            for statement in migrations(db.dialect)[version]:
                q(statement, ())
        q("UPDATE schema_version SET version = 3", ())
        q(
            "INSERT INTO sessions (started_at, finished_at, tag, endpoint, machine, options) "
            "VALUES ('2025-01-01T00:00:00', '2025-01-01T00:01:00', 'v3', '{}', '{}', '{}')",
            (),
        )

    db.transact(make_v3)
    db.close()
    with HistoryStore.open(target) as store:
        assert store.migrated_from == 3
        (old,) = store.sessions()
        assert old.tag == "v3" and old.stopped is None
