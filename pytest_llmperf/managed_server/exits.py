"""How a server ended: its exit status or signal, and whether memory ran out.

Out of memory is said only where the system says it: the server was killed by
SIGKILL and its cgroup's (v2) ``memory.events`` ``oom_kill`` counter grew since
it was spawned, or its log's last lines say "Out of memory" / "Killed process"
(the kernel's words, or an allocator's). Where neither can be read, nothing is
said (``oom=False``).
"""

from __future__ import annotations

import re
import signal as signals
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pytest_llmperf.errors import LlmPerfUsageError, StopCause

__all__ = [
    "ServerExit",
    "ServerStartError",
    "cgroup_of",
    "log_says_oom",
    "oom_kills",
    "parse_memory_events",
    "signal_name",
]

_CGROUP_ROOT = Path("/sys/fs/cgroup")
_OOM_WORDS = re.compile(r"(?i)out of memory|killed process|oom-kill|oom_kill")


def signal_name(number: int | None) -> str | None:
    """``9`` -> ``"SIGKILL"`` (None for None or an unknown number)."""
    if number is None:
        return None
    try:
        return signals.Signals(number).name
    except ValueError:
        return None


@dataclass(frozen=True)
class ServerExit:
    """A server process's end: ``code`` (it exited) or ``signal`` (it was killed),
    ``oom`` (the system says memory ran out), ``at_ns`` (``time.monotonic_ns()`` when
    it was seen)."""

    code: int | None
    signal: int | None
    oom: bool
    at_ns: int

    @classmethod
    def from_returncode(cls, returncode: int, at_ns: int, *, oom: bool = False) -> ServerExit:
        """From :attr:`subprocess.Popen.returncode` (negative: the signal)."""
        if returncode < 0:
            return cls(code=None, signal=-returncode, oom=oom, at_ns=at_ns)
        return cls(code=returncode, signal=None, oom=oom, at_ns=at_ns)

    @property
    def signal_name(self) -> str | None:
        return signal_name(self.signal)

    def how(self) -> str:
        """How it ended: ``"server exited with signal 9 (SIGKILL, out of memory)"``."""
        if self.signal is not None:
            notes = [n for n in (self.signal_name, "out of memory" if self.oom else "") if n]
            what = f"signal {self.signal}" + (f" ({', '.join(notes)})" if notes else "")
        else:
            what = f"code {self.code}" + (" (out of memory)" if self.oom else "")
        return f"server exited with {what}"

    def describe(self, run_label: str = "", run_start_ns: int | None = None) -> str:
        """``"server exited with code 3"``, ``"server exited with signal 9 (SIGKILL, out
        of memory) at 12.3 s into run0"``: :meth:`how`, and when."""
        text = self.how()
        if run_start_ns is not None:
            text += f" at {max(0, self.at_ns - run_start_ns) / 1e9:.1f} s"
            if run_label:
                text += f" into {run_label}"
        elif run_label:
            text += f" during {run_label}"
        return text

    def to_dict(
        self, run_label: str = "", run_start_ns: int | None = None, log_tail: str = ""
    ) -> dict[str, Any]:
        """The JSON ``exit`` block: code, signal, signal_name, oom, at_s (from
        ``run_start_ns``; None without it), message and log_tail."""
        at_s = None if run_start_ns is None else round((self.at_ns - run_start_ns) / 1e9, 3)
        return {
            "code": self.code,
            "signal": self.signal,
            "signal_name": self.signal_name,
            "oom": self.oom,
            "at_s": at_s,
            "message": self.describe(run_label, run_start_ns),
            "log_tail": log_tail,
        }


class ServerStartError(LlmPerfUsageError):
    """The server did not become ready: it exited first, or its deadline passed
    (cause :attr:`StopCause.SERVER_DID_NOT_START`, a failed gate), or its command
    cannot be run at all (cause :attr:`StopCause.USAGE`). ``exit`` holds its end,
    ``log_tail`` its last lines (redacted), ``log_path`` its log file."""

    def __init__(
        self,
        message: str,
        *,
        where: str | None = None,
        cause: StopCause = StopCause.SERVER_DID_NOT_START,
        exit: ServerExit | None = None,
        log_tail: str = "",
        log_path: str | None = None,
    ) -> None:
        super().__init__(message, where=where, cause=cause)
        self.exit = exit
        self.log_tail = log_tail
        self.log_path = log_path

    def located(self, where: str) -> ServerStartError:
        return ServerStartError(
            self.message,
            where=self.where or where,
            cause=self.cause,
            exit=self.exit,
            log_tail=self.log_tail,
            log_path=self.log_path,
        )


def cgroup_of(pid: int, proc: Path = Path("/proc")) -> Path | None:
    """The cgroup v2 directory of ``pid`` (its ``0::/path`` line), or None (v1, gone,
    unreadable)."""
    try:
        text = (proc / str(pid) / "cgroup").read_text()
    except OSError:
        return None
    for line in text.splitlines():
        if line.startswith("0::"):
            return _CGROUP_ROOT / line[3:].lstrip("/")
    return None


def parse_memory_events(text: str) -> dict[str, int]:
    """``memory.events`` (``"low 0\\nhigh 0\\nmax 0\\noom 1\\noom_kill 1\\n"``) as a dict."""
    counts: dict[str, int] = {}
    for line in text.splitlines():
        name, _, value = line.strip().partition(" ")
        if name and value.strip().isdigit():
            counts[name] = int(value)
    return counts


def oom_kills(cgroup: Path | None) -> int | None:
    """The ``oom_kill`` count of ``cgroup``'s ``memory.events``; None where it cannot be read."""
    if cgroup is None:
        return None
    try:
        return parse_memory_events((cgroup / "memory.events").read_text()).get("oom_kill")
    except OSError:
        return None


def log_says_oom(tail: str) -> bool:
    """Whether a log's last lines say memory ran out (the kernel's or an allocator's words)."""
    return bool(_OOM_WORDS.search(tail))


def was_oom(returncode: int, kills_at_spawn: int | None, kills_now: int | None, tail: str) -> bool:
    """Whether a server that ended with ``returncode`` was killed for memory."""
    if returncode == 0:
        return False
    if (
        returncode == -signals.SIGKILL
        and kills_at_spawn is not None
        and kills_now is not None
        and kills_now > kills_at_spawn
    ):
        return True
    return log_says_oom(tail)
