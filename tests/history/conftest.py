"""Fixtures for the history store: a real throwaway PostgreSQL server, and a target of
each backend, so every store test runs against SQLite and PostgreSQL alike.

The server: ``initdb`` into a fresh folder, ``pg_ctl start`` on a free 127.0.0.1
port (trust authentication, fsync off), one database per test, stopped at the
end of the test session. PostgreSQL refuses to run as root, so as root (CI
runs as root) the folder is given to ``nobody`` and every server command runs
through ``runuser -u nobody``. The binaries are looked up on PATH, then in
Debian's ``/usr/lib/postgresql/*/bin``; without them or without psycopg the
PostgreSQL cases are skipped with that reason, or fail with it when
``LLMPERF_REQUIRE_POSTGRESQL=1`` (for CI, where a skip would hide that the
PostgreSQL path went untested).
"""

from __future__ import annotations

import glob
import os
import shutil
import socket
import subprocess
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import NoReturn

import pytest

# Imported now, before any pytester snapshot of sys.modules: a psycopg first imported
# inside a test that uses pytester is dropped from sys.modules after it, and imported
# again it gets new exception classes that its C driver (loaded once) does not raise.
try:
    import psycopg
except ImportError:  # the PostgreSQL cases skip, with the reason
    psycopg = None


def _pg_binary(name: str) -> str | None:
    found = shutil.which(name)
    if found:
        return found
    for folder in sorted(glob.glob("/usr/lib/postgresql/*/bin"), reverse=True):
        candidate = Path(folder) / name
        if candidate.is_file():
            return str(candidate)
    return None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class PgServer:
    def __init__(self, folder: Path, port: int, as_user: list[str]) -> None:
        self.folder = folder
        self.port = port
        self.as_user = as_user
        self.base_url = f"postgresql://postgres@127.0.0.1:{port}"

    def new_database(self) -> str:
        assert psycopg is not None
        name = "h_" + uuid.uuid4().hex[:12]
        with psycopg.connect(f"{self.base_url}/postgres", autocommit=True) as conn:
            conn.execute(f"CREATE DATABASE {name}")
        return f"{self.base_url}/{name}"


def _unavailable(reason: str) -> NoReturn:
    """Skip the PostgreSQL cases with ``reason``; fail them where they are required."""
    if os.environ.get("LLMPERF_REQUIRE_POSTGRESQL") == "1":
        pytest.fail(f"LLMPERF_REQUIRE_POSTGRESQL=1 but {reason}", pytrace=False)
    pytest.skip(reason)


@pytest.fixture(scope="session")
def pg_server() -> Iterator[PgServer]:
    if psycopg is None:
        _unavailable("psycopg is not installed (pip install 'pytest-llmperf[postgres]')")
    initdb, pg_ctl = _pg_binary("initdb"), _pg_binary("pg_ctl")
    if not initdb or not pg_ctl:
        _unavailable(
            "PostgreSQL server binaries (initdb, pg_ctl) not found: apt-get install postgresql"
        )
    folder = Path(tempfile.mkdtemp(prefix="llmperf-pg-"))
    as_user: list[str] = []
    if os.geteuid() == 0:  # postgres will not run as root
        runuser = shutil.which("runuser")
        if not runuser:
            _unavailable("running as root without runuser: cannot start PostgreSQL unprivileged")
        import pwd

        nobody = pwd.getpwnam("nobody")
        os.chown(folder, nobody.pw_uid, nobody.pw_gid)
        as_user = [runuser, "-u", "nobody", "--"]
    folder.chmod(0o700)
    data = folder / "data"
    port = _free_port()

    def run(*cmd: str) -> None:
        done = subprocess.run(
            [*as_user, *cmd], capture_output=True, text=True, timeout=120, check=False, cwd="/"
        )
        if done.returncode != 0:
            log = folder / "log"
            tail = log.read_text(errors="replace")[-2000:] if log.exists() else ""
            pytest.fail(f"{cmd[0]} failed ({done.returncode}): {done.stderr[-2000:]}\n{tail}")

    try:
        run(initdb, "-D", str(data), "-U", "postgres", "-A", "trust", "-E", "UTF8", "--no-sync")
        options = f"-p {port} -k {folder} -c listen_addresses=127.0.0.1 -c fsync=off"
        run(pg_ctl, "-D", str(data), "-o", options, "-l", str(folder / "log"), "-w", "start")
        yield PgServer(folder, port, as_user)
    finally:
        if (data / "postmaster.pid").exists():
            subprocess.run(
                [*as_user, pg_ctl, "-D", str(data), "-m", "immediate", "-w", "stop"],
                capture_output=True,
                timeout=60,
                check=False,
                cwd="/",
            )
        shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture
def pg_url(pg_server: PgServer) -> str:
    """A fresh, empty PostgreSQL database on the throwaway server."""
    return pg_server.new_database()


@pytest.fixture(params=["sqlite", "postgresql"])
def target(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A new, empty history target of each backend: a SQLite path (not yet created) or
    a ``postgresql://`` URL of a new database on the session's one server. Every test
    that takes it runs on both, the PostgreSQL case skipped (with the reason) where
    the server binaries or psycopg are missing."""
    if request.param == "sqlite":
        return str(tmp_path / "history.sqlite")
    url: str = request.getfixturevalue("pg_url")
    return url
