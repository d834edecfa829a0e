"""A server's log: one file per started server, written by the server itself.

The file is opened here and handed to the server as its stdout and stderr (a file
descriptor, never a pipe: a chatty server never blocks on a reader that fell
behind, and nothing of ours copies its bytes). Its first line is the redacted
command. The tail is read from the end of the file, however long it grew.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

__all__ = ["open_log", "read_tail"]

_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")
_TAIL_CHUNK = 64 * 1024
_TAIL_MAX = 4 * 1024 * 1024  # never read more than this to find the last lines


def open_log(log_dir: Path, name: str, first_line: str) -> tuple[Path, int]:
    """A new file ``log_dir/NAME-N.log`` (N: the first number free) opened for
    appending, ``first_line`` written; its path and file descriptor (the caller
    closes it once the server holds it)."""
    log_dir.mkdir(parents=True, exist_ok=True)
    stem = _UNSAFE.sub("_", name).strip("._") or "server"
    n = 0
    while True:
        path = log_dir / f"{stem}-{n}.log"
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_APPEND, 0o644)
        except FileExistsError:
            n += 1
            continue
        break
    os.write(fd, (first_line.replace("\n", " ") + "\n").encode("utf-8", "replace"))
    return path.resolve(), fd


def read_tail(path: Path, lines: int = 30) -> str:
    """The last ``lines`` lines of ``path`` ("" if it cannot be read)."""
    if lines <= 0:
        return ""
    try:
        with path.open("rb") as f:
            end = f.seek(0, os.SEEK_END)
            data = b""
            pos = end
            while pos > 0 and data.count(b"\n") <= lines and end - pos < _TAIL_MAX:
                step = min(_TAIL_CHUNK, pos)
                pos -= step
                f.seek(pos)
                data = f.read(step) + data
    except OSError:
        return ""
    text = data.decode("utf-8", "replace").replace("\r\n", "\n")
    # a progress bar redraws its line with \r: what a terminal would show is its last form
    shown = [_last_draw(line) for line in text.rstrip("\n").split("\n")]
    return "\n".join(shown[-lines:])


def _last_draw(line: str) -> str:
    draws = [d for d in line.split("\r") if d.strip()]
    return draws[-1] if draws else ""
