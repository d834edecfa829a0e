"""What to start: a server's command line as a template, and how it is shown.

``ServerCommand.argv`` is a template: ``{port}`` and ``{host}`` are filled when the
server starts (:meth:`ServerCommand.filled`); a shell-like string is split with
:mod:`shlex` (never run through a shell). Only those two placeholders are filled:
any other brace in the command line (a JSON argument, say) is left as it is.
"""

from __future__ import annotations

import os
import shlex
import socket
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any
from urllib.parse import urlsplit

from pytest_llmperf.errors import LlmPerfUsageError
from pytest_llmperf.managed_server.secrets import (
    command_secrets,
    scrub_command_text,
    shown_command,
)

__all__ = ["DEFAULT_READY_URL", "Restart", "ServerCommand", "fill", "free_port"]

DEFAULT_READY_URL = "http://{host}:{port}/v1/models"


class Restart(StrEnum):
    """How long one started server lives: a test, a module, or the whole session."""

    TEST = "test"
    MODULE = "module"
    SESSION = "session"


def fill(template: str, host: str, port: int | None) -> str:
    """``template`` with ``{host}`` and ``{port}`` replaced (nothing else touched)."""
    text = template.replace("{host}", host)
    return text if port is None else text.replace("{port}", str(port))


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port on ``host`` that nothing listens on right now."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        port: int = sock.getsockname()[1]
        return port


_SHELLS = frozenset({"sh", "bash", "dash", "zsh"})
_LAUNCHERS = frozenset({"env", "nohup", "exec", "time", "taskset", "numactl", "uv", "uvx"})


def program_name(argv: Sequence[str]) -> str:
    """The name a report gives a server whose command names none: the program that
    serves, not the interpreter or wrapper that starts it. ``python -m vllm.entrypoints…``
    is ``vllm``; ``sh -c "sleep 4 && exec llama-server …"`` is ``llama-server``;
    ``docker run … IMAGE`` is the image's name; otherwise the program's file name."""
    words = list(argv)
    while words:
        base = os.path.basename(words[0])
        if base.startswith("python") and "-m" in words[1:-1]:
            return words[words.index("-m", 1) + 1].split(".")[0]
        if base.startswith("python") and len(words) > 1 and words[1].endswith(".py"):
            return os.path.basename(words[1])
        if base in _SHELLS and "-c" in words[1:-1]:
            script = shlex_words(words[words.index("-c", 1) + 1])
            after_exec = [w for i, w in enumerate(script) if i and script[i - 1] == "exec"]
            if not after_exec:
                return base
            words = script[script.index(after_exec[-1]) :]
            continue
        if base in _LAUNCHERS:  # env K=V …, nohup …, uv run …: the program comes after
            rest = words[1:]
            while rest and (rest[0].startswith("-") or "=" in rest[0] or rest[0] == "run"):
                rest = rest[1:]
            if not rest:
                return base
            words = rest
            continue
        if base in ("docker", "podman") and "run" in words[1:2]:
            image = _docker_image(words[2:])
            if image:
                return image.rsplit("/", 1)[-1].split(":")[0].split("@")[0]
        return base or words[0]
    return "server"


def shlex_words(script: str) -> list[str]:
    """A shell script's words (``&&``, ``;`` kept as words); [] where it does not split."""
    try:
        return shlex.split(script.replace(";", " ; "))
    except ValueError:
        return []


# docker/podman run options that take a value as the next word (the image follows them)
_DOCKER_VALUED = frozenset(
    {
        "-p",
        "--publish",
        "-e",
        "--env",
        "-v",
        "--volume",
        "--name",
        "--gpus",
        "--network",
        "--shm-size",
        "--ipc",
        "-w",
        "--workdir",
        "--entrypoint",
        "-u",
        "--user",
        "--env-file",
        "--runtime",
        "--platform",
        "--cpus",
        "-m",
        "--memory",
        "--mount",
        "--device",
        "--label",
        "-l",
        "--add-host",
        "--ulimit",
        "--hostname",
        "-h",
    }
)


def _docker_image(words: Sequence[str]) -> str | None:
    skip = False
    for word in words:
        if skip:
            skip = False
        elif word in _DOCKER_VALUED:
            skip = True
        elif not word.startswith("-"):
            return word
    return None


@dataclass(frozen=True)
class ServerCommand:
    """A server to start: its command line template, environment, working directory,
    readiness URL and deadlines (see the package's docstring)."""

    argv: tuple[str, ...]
    env: Mapping[str, str] = field(default_factory=dict)
    cwd: str | None = None
    ready_url: str | None = None
    ready_timeout_s: float = 600.0
    stop_grace_s: float = 10.0
    name: str = ""
    restart: Restart = Restart.SESSION
    host: str = "127.0.0.1"
    port: int | None = None

    def __post_init__(self) -> None:
        argv = tuple(str(a) for a in self.argv)
        if not argv or not argv[0].strip():
            raise LlmPerfUsageError("the server command is empty")
        object.__setattr__(self, "argv", argv)
        object.__setattr__(self, "env", {str(k): str(v) for k, v in dict(self.env).items()})
        object.__setattr__(self, "restart", Restart(self.restart))
        if not self.name:
            object.__setattr__(self, "name", program_name(argv))
        for what, value in (
            ("ready_timeout_s", self.ready_timeout_s),
            ("stop_grace_s", self.stop_grace_s),
        ):
            if not 0 <= float(value) < float("inf"):
                raise LlmPerfUsageError(f"{what} must be >= 0 seconds, got {value!r}")
        if self.port is not None and not 0 < int(self.port) < 65536:
            raise LlmPerfUsageError(f"port must be 1..65535, got {self.port!r}")
        if not self.has_port_placeholder and self.port is None and self.ready_url is None:
            raise LlmPerfUsageError(
                f"the server command {self.shown()!r} has no {{port}} placeholder: put "
                "{port} where the server takes its port (it is filled with a free one), "
                "or give its port or readiness URL"
            )
        if self.ready_url is not None:
            probe = fill(self.ready_url, self.host, 1)
            parts = urlsplit(probe)
            if parts.scheme not in ("http", "https") or not parts.hostname:
                raise LlmPerfUsageError(
                    f"the readiness URL must look like http://host:port/path, got "
                    f"{self.ready_url!r}"
                )

    @classmethod
    def parse(
        cls, text: str | Sequence[str], *, where: str | None = None, **fields: Any
    ) -> ServerCommand:
        """A command from a shell-like string (split with :mod:`shlex`) or a list taken as
        it is; ``fields`` are the other attributes. A bad value is a usage error naming
        ``where`` (an option, a marker)."""
        try:
            if isinstance(text, str):
                argv: tuple[str, ...] = tuple(shlex.split(text))
            else:
                argv = tuple(str(a) for a in text)
            return cls(argv=argv, **fields)
        except ValueError as exc:  # shlex: "No closing quotation"; LlmPerfUsageError too
            message = exc.message if isinstance(exc, LlmPerfUsageError) else str(exc)
            raise LlmPerfUsageError(
                f"bad server command {_cut(scrub_command_text(str(text)))!r}: {message}",
                where=where,
            ) from None

    @property
    def has_port_placeholder(self) -> bool:
        return any("{port}" in a for a in (*self.argv, *self.env.values()))

    def filled(self, port: int | None) -> tuple[str, ...]:
        """The command line with ``{host}`` and ``{port}`` filled."""
        return tuple(fill(a, self.host, port) for a in self.argv)

    def ready_url_for(self, port: int | None) -> str:
        """The readiness URL with ``{host}`` (an IPv6 address in brackets) and ``{port}``
        filled."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return fill(self.ready_url or DEFAULT_READY_URL, host, port)

    def filled_env(self, port: int | None) -> dict[str, str]:
        """The added environment, ``{host}`` and ``{port}`` filled in its values."""
        return {k: fill(v, self.host, port) for k, v in self.env.items()}

    def port_in_use(self, port: int) -> bool:
        """Whether something already answers TCP on ``host:port``."""
        try:
            with socket.create_connection((self.host, port), timeout=1.0):
                return True
        except OSError:
            return False

    def secrets(self, api_key_env: str | None = None) -> list[str]:
        """The values this command's argv and environment must never show."""
        return command_secrets(self.argv, self.env, api_key_env)

    def shown(self, argv: Sequence[str] | None = None, api_key_env: str | None = None) -> str:
        """The command line as one redacted string (``argv``: a filled one)."""
        return shown_command(argv if argv is not None else self.argv, self.env, api_key_env)

    def describe(self) -> dict[str, Any]:
        """``{"name", "cmd" (redacted, one string), "cwd", "ready_url", "restart"}``."""
        return {
            "name": self.name,
            "cmd": self.shown(),
            "cwd": self.cwd,
            "ready_url": self.ready_url or DEFAULT_READY_URL,
            "restart": str(self.restart),
        }


def _cut(text: str, limit: int = 200) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"
