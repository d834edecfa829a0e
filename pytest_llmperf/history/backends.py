"""The two databases behind a history store, behind one small interface.

A :class:`Database` runs a unit of work in one transaction
(:meth:`Database.transact`), a unit of reads in one read-only transaction
(:meth:`Database.read`: takes no write lock, so it never waits for or races a
writer) and single reads (:meth:`Database.query`). SQL is
written once with ``?`` placeholders; the PostgreSQL backend turns them into
``%s``.

- **SQLite** (stdlib ``sqlite3``): WAL journal (readers never block the one
  writer), a busy timeout, and every write transaction opened with ``BEGIN
  IMMEDIATE`` (the write lock is taken up front, so two writers never deadlock
  upgrading a read lock); a transaction that still finds the file busy is retried.
- **PostgreSQL** (psycopg 3, the ``[postgres]`` extra): one transaction per unit of
  work; serialization failures and deadlocks are retried.
"""

from __future__ import annotations

import random
import sqlite3
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Protocol, TypeVar

from pytest_llmperf.client.endpoint import redact_url
from pytest_llmperf.history.errors import HistoryError
from pytest_llmperf.redaction import scrub

__all__ = ["Database", "Query", "open_database", "target_label"]

T = TypeVar("T")
Query = Callable[[str, Sequence[Any]], list[tuple[Any, ...]]]
RETRIES = 8
BUSY_TIMEOUT_S = 30.0


def is_url(target: str) -> bool:
    return target.startswith(("postgresql://", "postgres://"))


def target_label(target: str) -> str:
    """The target as it may be printed: a URL without its credentials."""
    return redact_url(target) if is_url(target) else target


class Database(Protocol):
    dialect: str  # "sqlite" or "postgresql"
    where: str  # printable: path, or URL without credentials

    def transact(self, work: Callable[[Query], T]) -> T: ...

    def read(self, work: Callable[[Query], T]) -> T: ...

    def query(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]: ...

    def close(self) -> None: ...


def open_database(target: str, *, create: bool = True, read_only: bool = False) -> Database:
    """A path -> SQLite; ``postgresql://`` -> PostgreSQL. Errors are :class:`HistoryError`.
    ``read_only``: a SQLite file is opened read-only and left as it is (no WAL switch);
    the caller only reads (:meth:`~Database.read`)."""
    if is_url(target):
        return PostgresDatabase(target)
    return SqliteDatabase(target, create=create and not read_only, read_only=read_only)


def _pause(attempt: int) -> None:
    time.sleep(min(2.0, 0.02 * 2**attempt) * (0.5 + random.random()))


class SqliteDatabase:
    dialect = "sqlite"

    def __init__(self, path: str, *, create: bool, read_only: bool = False) -> None:
        self.where = path
        file = Path(path)
        if file.is_dir():
            raise HistoryError("is a directory, not a history file", where=path)
        if not file.exists():
            if not create:
                raise HistoryError("no history file here", where=path)
            try:
                file.parent.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise HistoryError(f"cannot create its folder: {exc}", where=path) from None
        try:
            self._conn = sqlite3.connect(
                f"{file.resolve().as_uri()}?mode=ro" if read_only else path,
                timeout=BUSY_TIMEOUT_S,
                isolation_level=None,
                uri=read_only,
            )
        except sqlite3.Error as exc:
            raise HistoryError(f"cannot open as SQLite: {exc}", where=path) from None
        if read_only:
            return
        try:
            self._retry(lambda: self._conn.execute("PRAGMA journal_mode=WAL").fetchall())
            self._conn.execute(f"PRAGMA busy_timeout={int(BUSY_TIMEOUT_S * 1000)}")
        except HistoryError:
            self._conn.close()
            raise

    def _retry(self, work: Callable[[], T]) -> T:
        for attempt in range(RETRIES):
            try:
                return work()
            except sqlite3.OperationalError as exc:
                text = str(exc).lower()
                if ("locked" in text or "busy" in text) and attempt < RETRIES - 1:
                    _pause(attempt)
                    continue
                raise HistoryError(f"SQLite error: {exc}", where=self.where) from None
            except sqlite3.DatabaseError as exc:  # "file is not a database", malformed pages
                raise HistoryError(
                    f"not a readable SQLite database ({exc})", where=self.where
                ) from None
        raise AssertionError("unreachable")  # pragma: no cover

    def _q(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        return [tuple(row) for row in self._conn.execute(sql, tuple(params)).fetchall()]

    def transact(self, work: Callable[[Query], T]) -> T:
        def unit() -> T:
            self._conn.execute("BEGIN IMMEDIATE")
            try:
                result = work(self._q)
            except BaseException:
                self._conn.execute("ROLLBACK")
                raise
            self._conn.execute("COMMIT")
            return result

        return self._retry(unit)

    def read(self, work: Callable[[Query], T]) -> T:
        def unit() -> T:
            self._conn.execute("BEGIN DEFERRED")  # a read lock only, taken when reading
            try:
                return work(self._q)
            finally:
                self._conn.execute("ROLLBACK")

        return self._retry(unit)

    def query(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        return self._retry(lambda: self._q(sql, params))

    def close(self) -> None:
        self._conn.close()


class PostgresDatabase:
    dialect = "postgresql"

    def __init__(self, url: str) -> None:
        self.where = redact_url(url)
        self._secret = _password(url)
        try:
            import psycopg
        except ImportError:
            raise HistoryError(
                "a postgresql:// history needs psycopg 3: pip install 'pytest-llmperf[postgres]'",
                where=self.where,
            ) from None
        self._psycopg = psycopg
        try:
            self._conn = psycopg.connect(url, autocommit=True, connect_timeout=10)
        except psycopg.Error as exc:
            raise HistoryError(
                f"cannot connect: {scrub(str(exc), self._secret).strip()}", where=self.where
            ) from None

    def _q(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        cursor = self._conn.execute(sql.replace("?", "%s"), tuple(params))
        return [tuple(row) for row in cursor.fetchall()] if cursor.description else []

    def _retry(self, work: Callable[[], T]) -> T:
        errors = self._psycopg.errors
        for attempt in range(RETRIES):
            try:
                return work()
            except (errors.SerializationFailure, errors.DeadlockDetected):
                if attempt < RETRIES - 1:
                    _pause(attempt)
                    continue
                raise HistoryError(
                    "PostgreSQL kept refusing the transaction", where=self.where
                ) from None
            except self._psycopg.Error as exc:
                raise HistoryError(
                    f"PostgreSQL error: {scrub(str(exc), self._secret).strip()}", where=self.where
                ) from None
        raise AssertionError("unreachable")  # pragma: no cover

    def transact(self, work: Callable[[Query], T]) -> T:
        def unit() -> T:
            with self._conn.transaction():
                return work(self._q)

        return self._retry(unit)

    def read(self, work: Callable[[Query], T]) -> T:
        def unit() -> T:
            with self._conn.transaction():
                self._conn.execute("SET TRANSACTION READ ONLY")
                return work(self._q)

        return self._retry(unit)

    def query(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        return self._retry(lambda: self._q(sql, params))

    def close(self) -> None:
        self._conn.close()


def _password(url: str) -> str | None:
    from urllib.parse import urlsplit

    return urlsplit(url).password
