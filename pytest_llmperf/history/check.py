"""``--llm-history`` checked when the session starts, not only when it ends.

The session's append happens at its very end, after all the load: a typo in
a URL, a server that is down, a foreign file or a store written by a newer
pytest-llmperf found only then costs a whole run's place in the history. So
the plugin calls :func:`check_history_target` at configure time: it opens the
target, reads its schema version in a read-only transaction and closes it.
Nothing is written (no file created, no migration, no WAL switch, no lock
that a writer would wait for), so it never races the other sessions that
append to the same store. What it cannot see (a store that breaks during the
session) is still reported at the end, with the other outputs kept.
"""

from __future__ import annotations

import os
from pathlib import Path

from pytest_llmperf.history.backends import is_url, open_database, target_label
from pytest_llmperf.history.errors import HistoryError
from pytest_llmperf.history.schema import usable_version

__all__ = ["OPTION", "check_history_target"]

OPTION = "--llm-history"


def check_history_target(target: str) -> int:
    """Check that the session can append to ``target`` (a SQLite path or a
    ``postgresql://`` URL); returns the schema version found (0: a new store).

    Raises :class:`HistoryError` located at ``--llm-history TARGET`` (a URL without
    its credentials): psycopg missing, a server that does not answer or refuses,
    a file that is not SQLite or a directory, a database of another program, a
    newer schema version, a missing file whose folder cannot be created."""
    target = target.strip()
    if not target:
        raise HistoryError(
            "empty history target (a SQLite path or a postgresql:// URL)", where=OPTION
        )
    where = f"{OPTION} {target_label(target)}"
    try:
        if not is_url(target) and not Path(target).exists():
            _check_creatable(Path(target))
            return 0
        db = open_database(target, create=False, read_only=True)
        try:
            return db.read(lambda q: usable_version(db, q))
        finally:
            db.close()
    except HistoryError as exc:
        raise HistoryError(exc.message, where=where) from None


def _check_creatable(path: Path) -> None:
    """The append will create ``path`` and its missing folders: the nearest existing
    ancestor must be a folder this process can write in."""
    folder = path.absolute().parent
    while not folder.exists():
        folder = folder.parent
    if not folder.is_dir():
        raise HistoryError(f"cannot create it: {str(folder)!r} is not a folder")
    if not os.access(folder, os.W_OK | os.X_OK):
        raise HistoryError(f"cannot create it: no write permission in {str(folder)!r}")
