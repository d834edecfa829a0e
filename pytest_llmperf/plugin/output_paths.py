"""Output paths are checked when the session starts, not when it ends.

A report is written after every measurement is done; a typo in ``--llm-json``
or a read-only directory found only then would lose a whole run's figures
behind an internal error. So each output option's location is checked (its
directory created, a probe file written and removed) before any load, and a
problem is a usage error naming the option and the path.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterable
from pathlib import Path

from pytest_llmperf.errors import LlmPerfUsageError

__all__ = ["check_output_dir", "check_output_file", "check_output_paths"]


def check_output_dir(flag: str, directory: str | os.PathLike[str]) -> Path:
    """``directory`` exists (created if needed) and accepts new files."""
    path = Path(directory)
    try:
        path.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=path, prefix=".llmperf-probe-"):
            pass
    except OSError as exc:
        reason = exc.strerror or type(exc).__name__
        raise LlmPerfUsageError(f"cannot write in {str(path)!r}: {reason}", where=flag) from None
    return path


def check_output_file(flag: str, file: str | os.PathLike[str]) -> Path:
    """``file`` can be written later: its directory is writable and it is not a directory."""
    path = Path(file)
    if path.is_dir():
        raise LlmPerfUsageError(f"{str(path)!r} is a directory, not a file", where=flag)
    check_output_dir(flag, path.parent)
    return path


def check_output_paths(
    files: Iterable[tuple[str, str | None]], dirs: Iterable[tuple[str, str | None]]
) -> None:
    """Check every given ``(flag, path)``; ``None`` paths are skipped."""
    for flag, file in files:
        if file:
            check_output_file(flag, file)
    for flag, directory in dirs:
        if directory:
            check_output_dir(flag, directory)
