"""ManagedServer: one started server, from spawn through readiness to its stop.

:meth:`ManagedServer.start` fills the command's ``{host}``/``{port}``, opens its log
(:mod:`~pytest_llmperf.managed_server.log_file`), spawns it in its own session
(:mod:`~pytest_llmperf.managed_server.process`), tells the watchdog
(:mod:`~pytest_llmperf.managed_server.guard`), and polls its readiness URL
(:mod:`~pytest_llmperf.managed_server.readiness`) until ready, exited or past the
deadline. One daemon thread per server waits for its exit (blocked in ``waitpid``:
no polling), so :meth:`poll` is a read of what that thread saw and an exit is known
the moment it happens.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import subprocess
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import psutil

from pytest_llmperf.errors import StopCause
from pytest_llmperf.managed_server import guard
from pytest_llmperf.managed_server.command import ServerCommand, free_port
from pytest_llmperf.managed_server.exits import (
    ServerExit,
    ServerStartError,
    cgroup_of,
    oom_kills,
    was_oom,
)
from pytest_llmperf.managed_server.log_file import open_log, read_tail
from pytest_llmperf.managed_server.process import (
    descendants,
    exit_status,
    spawn,
    terminate_tree,
)
from pytest_llmperf.managed_server.readiness import next_delay, probe
from pytest_llmperf.managed_server.secrets import command_secrets, join_argv
from pytest_llmperf.redaction import scrub

__all__ = ["STOPPED_BY_US", "ManagedServer"]

STOPPED_BY_US = "pytest-llmperf"  # describe()["stopped_by"] when stop() ended a live server
_FIRST_PROGRESS_S = 2.0
_PROGRESS_EVERY_S = 5.0
_UNLISTED_FOR_S = 30.0  # a model list that keeps lacking the named model: stop waiting
_TAIL_LINES = 30


class ManagedServer:
    """A server this process started (see :meth:`start`)."""

    def __init__(
        self,
        command: ServerCommand,
        *,
        argv: tuple[str, ...],
        port: int | None,
        ready_url: str,
        log_path: Path,
        pid: int,
        spawn_ns: int,
        secrets: list[str],
        api_key: str | None,
    ) -> None:
        self.command = command
        self.argv = argv
        self.port = port
        self.ready_url = ready_url
        self.log_path = log_path
        self.pid = pid
        self.spawn_ns = spawn_ns
        self.ready_s: float = float("nan")
        self.first_token_s: float | None = None
        self.first_token_note: str | None = None
        self.stopped_by: str | None = None
        self._secrets = secrets
        self._api_key = api_key
        self._exit: ServerExit | None = None
        self._exited = threading.Event()
        self._stop_lock = threading.Lock()
        self._stopping = False
        self._stopped = threading.Event()
        self._seen: dict[int, psutil.Process] = {}
        self._proc: subprocess.Popen[bytes] | None = None

    # -- starting -------------------------------------------------------------------------

    @classmethod
    def start(
        cls,
        command: ServerCommand,
        *,
        log_dir: Path,
        model: str | None = None,
        progress: Callable[[str], None] | None = None,
        api_key_env: str | None = "OPENAI_API_KEY",
    ) -> ManagedServer:
        """Spawn ``command`` and wait until it is ready (see the module's docstring).

        ``model``: the served model a model-list readiness URL must name.
        ``progress``: called every few seconds while waiting, with a one-line status.
        ``api_key_env``: the variable holding the endpoint's key (sent with the
        readiness check and the first-token request; its value is redacted).
        Raises :class:`ServerStartError`: the server exited or missed its deadline
        (cause ``SERVER_DID_NOT_START``; it was stopped), or it cannot be run (cause
        ``USAGE``: no such program, not executable, no such working directory).
        """
        where = f"server {command.name!r}"
        port = command.port
        chosen = port is None and command.has_port_placeholder
        if chosen:
            port = free_port(command.host)
        ready_url = command.ready_url_for(port)
        if port is None:
            port = urlsplit(ready_url).port
        if not chosen and port is not None and command.port_in_use(port):
            raise ServerStartError(
                f"cannot start {command.name}: something already listens on "
                f"{command.host}:{port} (a server left running?); its readiness check would "
                "ask that one",
                where=where,
                cause=StopCause.USAGE,
            )
        argv = command.filled(port)
        added_env = command.filled_env(port)
        env = {**os.environ, **added_env}
        api_key = env.get(api_key_env) if api_key_env else None
        secrets = command_secrets(argv, added_env, api_key_env)
        shown_env = " ".join(f"{k}={shlex.quote(v)}" for k, v in added_env.items())
        first_line = scrub(" ".join(filter(None, ["$", shown_env, join_argv(argv)])), *secrets)
        if command.cwd is not None and not os.path.isdir(command.cwd):
            raise ServerStartError(
                f"cannot start {command.name}: its working directory {command.cwd!r} "
                "does not exist",
                where=where,
                cause=StopCause.USAGE,
            )
        try:
            log_path, log_fd = open_log(Path(log_dir), command.name, first_line)
        except OSError as exc:
            raise ServerStartError(
                f"cannot start {command.name}: cannot write its log in {str(log_dir)!r} "
                f"({exc.strerror or exc})",
                where=where,
                cause=StopCause.USAGE,
            ) from None
        try:
            spawn_ns = time.monotonic_ns()
            try:
                proc = spawn(argv, env=env, cwd=command.cwd, log_fd=log_fd)
            except OSError as exc:
                why = _cannot_run(argv[0], exc)
                os.write(log_fd, f"pytest-llmperf: {why}\n".encode())
                raise ServerStartError(
                    f"cannot start {command.name}: {why} (log: {log_path})",
                    where=where,
                    cause=StopCause.USAGE,
                    log_path=str(log_path),
                ) from None
        finally:
            os.close(log_fd)
        server = cls(
            command,
            argv=argv,
            port=port,
            ready_url=ready_url,
            log_path=log_path,
            pid=proc.pid,
            spawn_ns=spawn_ns,
            secrets=secrets,
            api_key=api_key,
        )
        cgroup = cgroup_of(proc.pid)
        kills_at_spawn = oom_kills(cgroup)
        guard.register(proc.pid, proc.pid, command.stop_grace_s)

        server._proc = proc

        def wait_exit() -> None:
            returncode = exit_status(proc)
            at_ns = time.monotonic_ns()
            oom = False
            if not server._stopping:
                tail = read_tail(log_path, _TAIL_LINES)
                oom = was_oom(returncode, kills_at_spawn, oom_kills(cgroup), tail)
            server._exit = ServerExit.from_returncode(returncode, at_ns, oom=oom)
            server._exited.set()

        threading.Thread(target=wait_exit, name=f"llmperf-server-{proc.pid}", daemon=True).start()
        try:
            server._wait_ready(model, progress)
        except BaseException:
            server.stop()
            raise
        return server

    def _wait_ready(self, model: str | None, progress: Callable[[str], None] | None) -> None:
        name = self.command.name
        timeout_s = self.command.ready_timeout_s
        start = self.spawn_ns / 1e9
        next_progress = _FIRST_PROGRESS_S
        unlisted_since: float | None = None
        delay = 0.0
        seen = "no answer yet"
        while True:
            if self._exited.is_set():
                raise self._start_error(f"{self._exit_words()} before it was ready", exited=True)
            check = probe(self.ready_url, model=model, api_key=self._api_key)
            now = time.monotonic_ns()
            elapsed = now / 1e9 - start
            if check.ready:
                if self._exited.is_set():  # something else answered on its port
                    raise self._start_error(
                        f"{self._exit_words()} before it was ready", exited=True
                    )
                self.ready_s = round((now - self.spawn_ns) / 1e9, 6)
                self._seen.update((p.pid, p) for p in descendants(self.pid))
                return
            seen = check.seen
            if check.listed is not None:
                unlisted_since = elapsed if unlisted_since is None else unlisted_since
                if elapsed - unlisted_since >= _UNLISTED_FOR_S:
                    raise self._start_error(
                        f"{name} answers at {self.ready_url} but does not serve model "
                        f"{model!r} ({seen})",
                        cause=StopCause.USAGE,
                    )
            else:
                unlisted_since = None
            if elapsed >= timeout_s:
                raise self._start_error(
                    f"{name} was not ready within {timeout_s:g} s (deadline; {self.ready_url}: "
                    f"{seen})"
                )
            if progress is not None and elapsed >= next_progress:
                next_progress = elapsed + _PROGRESS_EVERY_S
                progress(
                    f"{name}: waiting for {self.ready_url}, {elapsed:.0f} s (log: {self.log_path})"
                )
            delay = next_delay(elapsed, delay)
            self._exited.wait(max(0.0, min(delay, timeout_s - elapsed)))

    def _exit_words(self) -> str:
        end = self._exit
        if end is None:  # pragma: no cover - only called once the exit is known
            return f"{self.command.name} exited"
        return end.describe().replace("server exited", f"{self.command.name} exited", 1)

    def _start_error(
        self, headline: str, *, cause: StopCause | None = None, exited: bool = False
    ) -> ServerStartError:
        self.stop()
        when = ""
        if exited and self._exit is not None:
            when = f"{(self._exit.at_ns - self.spawn_ns) / 1e9:.1f} s after it started; "
        tail = self.log_tail(_TAIL_LINES)
        body = "\n".join(f"    {line}" for line in tail.splitlines()) or "    (the log is empty)"
        return ServerStartError(
            f"{headline} ({when}log: {self.log_path}); its last lines:\n{body}",
            where=f"server {self.command.name!r}",
            cause=cause or StopCause.SERVER_DID_NOT_START,
            exit=self._exit,
            log_tail=tail,
            log_path=str(self.log_path),
        )

    # -- while it runs --------------------------------------------------------------------

    @property
    def url(self) -> str:
        """``http://host:port`` (no ``/v1``)."""
        parts = urlsplit(self.ready_url)
        host = self.command.host
        host = f"[{host}]" if ":" in host else host
        port = self.port if self.port is not None else parts.port
        return f"{parts.scheme or 'http'}://{host}" + (f":{port}" if port else "")

    @property
    def exit(self) -> ServerExit | None:
        """How it ended, once it has (None while it runs)."""
        return self._exit

    def poll(self) -> ServerExit | None:
        """Has it exited? Never blocks."""
        return self._exit

    def wait(self, timeout: float | None = None) -> ServerExit | None:
        """Its exit, waiting up to ``timeout`` seconds for it (None: still running)."""
        self._exited.wait(timeout)
        return self._exit

    def log_tail(self, lines: int = _TAIL_LINES) -> str:
        """The log's last ``lines`` lines, secrets redacted."""
        return scrub(read_tail(self.log_path, lines), *self._secrets)

    def scrub(self, text: str) -> str:
        """``text`` with this server's secrets redacted."""
        return scrub(text, *self._secrets)

    def exit_record(self, run_label: str = "", run_start_ns: int | None = None) -> dict[str, Any]:
        """The JSON ``exit`` block of a run this server died in (None fields if it did not:
        call it once :meth:`poll` says it exited)."""
        end = self._exit
        if end is None:
            return {}
        return end.to_dict(run_label, run_start_ns, self.log_tail(_TAIL_LINES))

    def measure_first_token(
        self, model: str | None, api: str = "chat", *, timeout_s: float = 120.0
    ) -> float | None:
        """One streamed one-token request (``api``: chat, completions, ...; embeddings: the
        first answer; ``model`` None: the first the server lists), within ``timeout_s``;
        seconds from spawn to its first token, also kept in :attr:`first_token_s`. None
        when it failed (why: :attr:`first_token_note`, also in :meth:`describe`)."""
        from pytest_llmperf.managed_server.first_token import first_token_ns

        at_ns, note = first_token_ns(
            self.url,
            model=model,
            api=api,
            api_key=self._api_key,
            secrets=self._secrets,
            timeout_s=timeout_s,
        )
        self.first_token_note = note
        self.first_token_s = None if at_ns is None else round((at_ns - self.spawn_ns) / 1e9, 6)
        return self.first_token_s

    # -- stopping -------------------------------------------------------------------------

    def stop(self) -> None:
        """SIGTERM to its process group and every descendant, ``stop_grace_s``, then
        SIGKILL; unregistered from the watchdog. Idempotent; never raises; bounded."""
        with self._stop_lock:
            if self._stopping:
                first = False
            else:
                self._stopping = first = True
        if not first:
            self._stopped.wait(self.command.stop_grace_s + 10.0)
            return
        try:
            if self._exit is None:
                self.stopped_by = STOPPED_BY_US
            terminate_tree(
                self.pid,
                self.command.stop_grace_s,
                self._exited.wait,
                known=list(self._seen.values()),
            )
        except Exception:  # stop() never raises: the watchdog is the backstop
            pass
        finally:
            if self._proc is not None and self._exited.is_set():
                with contextlib.suppress(Exception):
                    self._proc.wait(timeout=1.0)  # reaped only now: see exit_status()
            guard.unregister(self.pid)
            self._stopped.set()

    def __enter__(self) -> ManagedServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- reports --------------------------------------------------------------------------

    def describe(self) -> dict[str, Any]:
        """The server's block in the JSON reports: name, cmd (redacted), env (redacted),
        cwd, pid, log, url, ready_url, restart, startup {ready_s, first_token_s} (also
        flat), first_token_note, exit (None while it runs) and stopped_by."""
        ready_s = None if self.ready_s != self.ready_s else self.ready_s  # NaN: never ready
        end = self._exit
        exit_block = None
        if end is not None:
            exit_block = end.to_dict(log_tail=self.log_tail(_TAIL_LINES))
            exit_block["at_s"] = round((end.at_ns - self.spawn_ns) / 1e9, 3)
            exit_block["message"] = end.describe() + f" {exit_block['at_s']:.1f} s after start"
        return {
            "name": self.command.name,
            "cmd": scrub(join_argv(self.argv), *self._secrets),
            "env": {
                k: scrub(v, *self._secrets) for k, v in self.command.filled_env(self.port).items()
            },
            "cwd": self.command.cwd,
            "pid": self.pid,
            "log": str(self.log_path),
            "url": self.url,
            "ready_url": self.ready_url,
            "restart": str(self.command.restart),
            "startup": {"ready_s": ready_s, "first_token_s": self.first_token_s},
            "ready_s": ready_s,
            "first_token_s": self.first_token_s,
            "first_token_note": self.first_token_note,
            "exit": exit_block,
            "stopped_by": self.stopped_by,
        }

    def __repr__(self) -> str:
        return f"ManagedServer(name={self.command.name!r}, pid={self.pid}, url={self.url!r})"


def _cannot_run(program: str, exc: OSError) -> str:
    if isinstance(exc, FileNotFoundError):
        return f"program {program!r} not found" + ("" if "/" in program else " on PATH")
    if isinstance(exc, PermissionError):
        return f"program {program!r} is not executable ({exc.strerror})"
    return f"program {program!r} cannot be run ({exc.strerror or exc})"
