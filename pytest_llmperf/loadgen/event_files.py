"""Names of the per-run event logs that ``--llm-events=DIR`` keeps.

One SQLite file per run, named after the test and the run's label plus a
timestamp, and never an existing file: a session that reruns a test, or two
runs with one label, must not overwrite (or append to) an earlier log.
"""

from __future__ import annotations

import itertools
import re
from datetime import UTC, datetime
from pathlib import Path

__all__ = ["events_file_for"]


def events_file_for(events_dir: str | Path, name: str) -> Path:
    """A new file name in ``events_dir`` for a run called ``name`` (never an existing one)."""
    slug = re.sub(r"[^A-Za-z0-9_.=-]+", "_", name).strip("_")[-120:] or "run"
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S")
    for n in itertools.count():
        path = Path(events_dir) / f"{slug}-{stamp}{f'-{n}' if n else ''}.sqlite"
        if not path.exists():
            return path
    raise AssertionError("unreachable")
