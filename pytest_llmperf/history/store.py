"""The history store: every session's runs, appended, read back by test and key.

``HistoryStore.open(target)``: a path is a SQLite file (created with its
folders when missing), a ``postgresql://`` URL a PostgreSQL database (psycopg
3, the ``[postgres]`` extra). The schema is versioned and migrated on open
(:mod:`pytest_llmperf.history.schema`); a foreign or corrupt target is a
:class:`~pytest_llmperf.history.errors.HistoryError` naming it.

Reading API (what the gate, the trend pages and the CLI code against):

- :meth:`HistoryStore.sessions` -> ``list[SessionInfo]``, oldest first
- :meth:`HistoryStore.runs` -> ``list[StoredRun]``, oldest first, optionally one test's
- :meth:`HistoryStore.comparable` -> the last ``n`` runs of a test with a comparison
  key, newest last, optionally only from sessions before a given one
- :meth:`HistoryStore.series` -> one metric statistic per stored run, in time order

"Oldest first" is append order (session id, then the run's order in its
session): a session is appended when it finishes.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import fields
from typing import Any, TypeVar

from pytest_llmperf.history.backends import Database, Query, open_database, target_label
from pytest_llmperf.history.errors import HistoryError
from pytest_llmperf.history.records import (
    SeriesPoint,
    SessionInfo,
    SessionRecord,
    StoredRun,
    metric_value,
)
from pytest_llmperf.history.schema import SCHEMA_VERSION, ensure_schema
from pytest_llmperf.specs.process_names import PROCESS_METRICS

__all__ = ["HistoryStore"]

T = TypeVar("T")
# A row becomes a SessionInfo or a StoredRun field by field, in the dataclass's order
# (its base's fields first); these columns hold JSON text.
_JSON_FIELDS = frozenset(
    {
        *("endpoint", "machine", "options", "counts", "metrics", "load", "workload"),
        *("fingerprint", "stopped", "process"),
    }
)
_SESSION_COLUMNS = (
    "s.started_at, s.finished_at, s.tag, s.endpoint, s.machine, s.options, s.id, "
    "(SELECT COUNT(*) FROM runs r WHERE r.session_id = s.id), s.fingerprint, s.stopped"
)
_RUN_COLUMNS = (
    "r.test, r.label, r.outcome, r.run_key, r.counts, r.metrics, "
    "r.session_id, s.started_at, s.tag, r.load_desc, r.workload_desc, r.state, s.fingerprint, "
    "r.process"
)
_RUN_FROM = "FROM runs r JOIN sessions s ON s.id = r.session_id"
_ORDER = "ORDER BY r.session_id, r.id"


def _dumps(value: Any) -> str:
    return json.dumps(value, sort_keys=True, allow_nan=False, default=str)


def _build(make: type[T], row: Sequence[Any]) -> T:
    names = [f.name for f in fields(make) if f.init]  # type: ignore[arg-type]
    return make(
        **{
            n: json.loads(v) if n in _JSON_FIELDS and v is not None else v
            for n, v in zip(names, row, strict=True)
        }
    )


class HistoryStore:
    """A history database, open. Use :meth:`open`; :meth:`close` when done (also a
    context manager)."""

    def __init__(self, db: Database, *, migrated_from: int) -> None:
        self._db = db
        self.where = db.where  # printable: the path, or the URL without credentials
        self.dialect = db.dialect
        self.migrated_from = migrated_from  # the schema version found (0: a new store)
        self.schema_version = SCHEMA_VERSION

    @classmethod
    def open(cls, target: str, *, create: bool = True) -> HistoryStore:
        """Open (and create or migrate) the store at ``target``: a SQLite path or a
        ``postgresql://`` URL. ``create=False``: a missing SQLite file is an error.
        Raises :class:`HistoryError` naming the target and what is wrong."""
        if not target or not target.strip():
            raise HistoryError("empty history target", where="--llm-history")
        db = open_database(target.strip(), create=create)
        try:
            found = ensure_schema(db)
        except BaseException:
            db.close()
            raise
        return cls(db, migrated_from=found)

    def __enter__(self) -> HistoryStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Close the connection (idempotent)."""
        self._db.close()

    # -- writing -----------------------------------------------------------------

    def append_session(self, record: SessionRecord) -> int:
        """Store one session and all its runs in ONE transaction; returns its session id.
        Concurrent writers (xdist controllers, parallel CI jobs) each get their own id and
        lose nothing."""
        session_row = (
            record.started_at,
            record.finished_at,
            record.tag,
            _dumps(record.endpoint),
            _dumps(record.machine),
            _dumps(record.options),
            _dumps(record.fingerprint) if record.fingerprint else None,
            _dumps(record.stopped) if record.stopped else None,
        )
        runs = [
            (
                run.test,
                run.label,
                run.outcome,
                run.key,
                _dumps(run.counts),
                _dumps(run.metrics),
                _dumps(run.state),
                _dumps(run.load),
                _dumps(run.workload),
                _dumps(run.process) if run.process else None,
            )
            for run in record.runs
        ]

        def append(q: Query) -> int:
            (row,) = q(
                "INSERT INTO sessions (started_at, finished_at, tag, endpoint, machine, options, "
                "fingerprint, stopped) VALUES (?, ?, ?, ?, ?, ?, ?, ?) RETURNING id",
                session_row,
            )
            session_id = int(row[0])
            for values in runs:
                q(
                    "INSERT INTO runs (session_id, test, label, outcome, run_key, counts, "
                    "metrics, state, load_desc, workload_desc, process) "
                    "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    (session_id, *values),
                )
            return session_id

        return self._db.transact(append)

    # -- reading -----------------------------------------------------------------

    def sessions(self) -> list[SessionInfo]:
        """Every stored session, oldest first, with its run count."""
        rows = self._db.query(f"SELECT {_SESSION_COLUMNS} FROM sessions s ORDER BY s.id")
        return [_build(SessionInfo, r) for r in rows]

    def session(self, session_id: int) -> SessionInfo:
        """One session; :class:`HistoryError` if there is none with that id."""
        for info in self.sessions():
            if info.id == session_id:
                return info
        raise HistoryError(f"no session {session_id} in this history", where=self.where)

    def runs(self, test: str | None = None, *, session_id: int | None = None) -> list[StoredRun]:
        """Every stored run (of ``test``, of session ``session_id``), oldest first."""
        where, params = self._filters(test=test, session_id=session_id)
        return self._runs(f"SELECT {_RUN_COLUMNS} {_RUN_FROM}{where} {_ORDER}", params)

    def tests(self) -> list[str]:
        """The test node ids with stored runs, sorted."""
        return sorted(str(r[0]) for r in self._db.query("SELECT DISTINCT test FROM runs"))

    def comparable(
        self, test: str, key: str, n: int, before_session: int | None = None
    ) -> list[StoredRun]:
        """The last ``n`` runs of ``test`` with comparison key ``key`` (same endpoint model,
        API, load and workload: :func:`~pytest_llmperf.history.records.comparison_key`),
        newest last; with ``before_session``, only runs of sessions stored before it."""
        if n <= 0:
            return []
        where, params = self._filters(test=test, key=key, before_session=before_session)
        rows = self._runs(
            f"SELECT {_RUN_COLUMNS} {_RUN_FROM}{where} "
            "ORDER BY r.session_id DESC, r.id DESC LIMIT ?",
            [*params, n],
        )
        return rows[::-1]

    def series(
        self, test: str, metric: str, stat: str, key: str | None = None
    ) -> list[SeriesPoint]:
        """``metric``'s ``stat`` (``ttft``/``p50``; a rate such as ``request_throughput``
        or a process metric such as ``startup.ready_s`` ignores ``stat``) for every stored
        run of ``test`` (with ``key``), in time order. Runs without a value (metric absent,
        empty histogram, a server the gate did not start) are left out."""
        where, params = self._filters(test=test, key=key)
        column = "r.process" if metric in PROCESS_METRICS else "r.metrics"
        rows = self._db.query(
            f"SELECT r.session_id, s.started_at, s.tag, {column}, r.label, r.run_key "
            f"{_RUN_FROM}{where} {_ORDER}",
            params,
        )
        points: list[SeriesPoint] = []
        for r in rows:
            value = metric_value(json.loads(r[3]) if r[3] else {}, metric, stat)
            if value is not None:
                points.append(SeriesPoint(int(r[0]), r[1], r[2], value, r[4], r[5]))
        return points

    # -- helpers -----------------------------------------------------------------

    @staticmethod
    def _filters(
        *,
        test: str | None = None,
        key: str | None = None,
        session_id: int | None = None,
        before_session: int | None = None,
    ) -> tuple[str, list[Any]]:
        clauses: list[str] = []
        params: list[Any] = []
        for clause, value in (
            ("r.test = ?", test),
            ("r.run_key = ?", key),
            ("r.session_id = ?", session_id),
            ("r.session_id < ?", before_session),
        ):
            if value is not None:
                clauses.append(clause)
                params.append(value)
        return (" WHERE " + " AND ".join(clauses) if clauses else ""), params

    def _runs(self, sql: str, params: Sequence[Any]) -> list[StoredRun]:
        return [_build(StoredRun, r) for r in self._db.query(sql, params)]


def describe_target(target: str) -> str:
    """``target`` as it may be printed (a URL loses its credentials)."""
    return target_label(target)
