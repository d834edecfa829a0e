"""The history's schema, versioned, and the migrations that bring a store up to date.

``schema_version`` holds one row: ``('pytest-llmperf', N)``. Opening a store
applies every migration after N in order, in one transaction that also takes
the write lock (SQLite ``BEGIN IMMEDIATE``; a PostgreSQL advisory lock), so
two processes opening a new store at once create it once. A store with tables
but no ``schema_version`` row of ours is foreign; one with a version above
:data:`SCHEMA_VERSION` was written by a newer pytest-llmperf: both are
:class:`~pytest_llmperf.history.errors.HistoryError`, and nothing is changed.

Versions:

1. ``sessions`` (id, started_at, finished_at, tag, endpoint, machine, options:
   JSON text) and ``runs`` (id, session_id, test, label, outcome, run_key,
   counts, metrics, state: JSON text).
2. ``runs.load_desc`` and ``runs.workload_desc`` (JSON; ``{}`` for runs stored
   at version 1) and the indexes that ``comparable`` and ``series`` read.
3. ``sessions.fingerprint`` (JSON, NULL for sessions stored before: no
   fingerprint, so their comparisons are ``comparable: null``): the session's
   server and machine fingerprint (:mod:`pytest_llmperf.server_metrics.fingerprint`).
4. ``sessions.stopped`` (JSON, NULL for a session that ran its tests): why a session
   stopped before load, as the JSON report's ``session.stopped`` (docs/gate-states.md).
5. ``runs.process`` (JSON, NULL for a run whose server the gate did not start, and for
   runs stored before): the server process's values over the run, ``{"name",
   "startup.ready_s", "startup.first_token_s", "server.rss_max_mb", "server.rss_growth_mb",
   "server.gpu_mem_max_mb", "server.cpu_s", "server.cpu_ms_per_output_token", "exit"}``
   (:func:`~pytest_llmperf.history.records.process_values`), so that they have trends and
   change points like any metric.
"""

from __future__ import annotations

from pytest_llmperf.history.backends import Database, Query
from pytest_llmperf.history.errors import HistoryError

__all__ = [
    "APP",
    "SCHEMA_VERSION",
    "current_version",
    "ensure_schema",
    "migrations",
    "usable_version",
]

APP = "pytest-llmperf"
SCHEMA_VERSION = 5
_PG_LOCK = 7_263_520_114  # pg_advisory_xact_lock key: "migrating an llmperf history"


def migrations(dialect: str) -> dict[int, list[str]]:
    """The statements that take a store from version ``v - 1`` to ``v``."""
    serial = "INTEGER PRIMARY KEY AUTOINCREMENT" if dialect == "sqlite" else "BIGSERIAL PRIMARY KEY"
    ref = "INTEGER" if dialect == "sqlite" else "BIGINT"
    return {
        1: [
            "CREATE TABLE schema_version (app TEXT NOT NULL, version INTEGER NOT NULL)",
            f"INSERT INTO schema_version (app, version) VALUES ('{APP}', 0)",
            f"CREATE TABLE sessions (id {serial}, started_at TEXT NOT NULL, "
            "finished_at TEXT NOT NULL, tag TEXT NOT NULL, endpoint TEXT NOT NULL, "
            "machine TEXT NOT NULL, options TEXT NOT NULL)",
            f"CREATE TABLE runs (id {serial}, session_id {ref} NOT NULL REFERENCES sessions(id), "
            "test TEXT NOT NULL, label TEXT NOT NULL, outcome TEXT NOT NULL, "
            "run_key TEXT NOT NULL, counts TEXT NOT NULL, metrics TEXT NOT NULL, "
            "state TEXT NOT NULL)",
        ],
        2: [
            "ALTER TABLE runs ADD COLUMN load_desc TEXT NOT NULL DEFAULT '{}'",
            "ALTER TABLE runs ADD COLUMN workload_desc TEXT NOT NULL DEFAULT '{}'",
            "CREATE INDEX runs_by_test_key ON runs (test, run_key, session_id)",
            "CREATE INDEX runs_by_session ON runs (session_id)",
        ],
        3: ["ALTER TABLE sessions ADD COLUMN fingerprint TEXT"],
        4: ["ALTER TABLE sessions ADD COLUMN stopped TEXT"],
        5: ["ALTER TABLE runs ADD COLUMN process TEXT"],
    }


def _tables(db: Database, q: Query) -> set[str]:
    if db.dialect == "sqlite":
        rows = q("SELECT name FROM sqlite_master WHERE type = 'table'", ())
        return {r[0] for r in rows if not str(r[0]).startswith("sqlite_")}
    rows = q(
        "SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema()",
        (),
    )
    return {str(r[0]) for r in rows}


def current_version(db: Database, q: Query) -> int:
    """The store's version: 0 for an empty database; HistoryError if it is not ours."""
    tables = _tables(db, q)
    if "schema_version" not in tables:
        if tables:
            raise HistoryError(
                "not a pytest-llmperf history: it has tables "
                f"({', '.join(sorted(tables)[:5])}) but no schema_version",
                where=db.where,
            )
        return 0
    try:
        rows = q("SELECT app, version FROM schema_version", ())
    except HistoryError:
        raise
    except Exception as exc:  # a schema_version table of some other program
        raise HistoryError(
            f"not a pytest-llmperf history (its schema_version table: {exc})", where=db.where
        ) from None
    if len(rows) != 1 or rows[0][0] != APP or not isinstance(rows[0][1], int):
        raise HistoryError(
            "not a pytest-llmperf history (schema_version is not ours)", where=db.where
        )
    return int(rows[0][1])


def usable_version(db: Database, q: Query) -> int:
    """:func:`current_version`, refused when a newer pytest-llmperf wrote it."""
    found = current_version(db, q)
    if found > SCHEMA_VERSION:
        raise HistoryError(
            f"history schema version {found} is newer than this pytest-llmperf's "
            f"({SCHEMA_VERSION}): upgrade pytest-llmperf to write to it",
            where=db.where,
        )
    return found


def ensure_schema(db: Database) -> int:
    """Bring ``db`` to :data:`SCHEMA_VERSION` (one transaction); returns the version it had."""

    def migrate(q: Query) -> int:
        if db.dialect == "postgresql":
            q("SELECT pg_advisory_xact_lock(?)", (_PG_LOCK,))
        found = usable_version(db, q)
        steps = migrations(db.dialect)
        for version in range(found + 1, SCHEMA_VERSION + 1):
            for statement in steps[version]:
                q(statement, ())
        if found < SCHEMA_VERSION:
            q("UPDATE schema_version SET version = ?", (SCHEMA_VERSION,))
        return found

    return db.transact(migrate)
