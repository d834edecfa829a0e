"""Which per-read path the client runs: compiled (``_speedups``, Cython) or pure Python.

The compiled extension is built when the package is installed (setup.py; optional:
an install where it cannot be built gets the pure-Python twin, ``_speedups_py``).
It is chosen here, once, at import: the compiled one when it imports, unless
``LLMPERF_PURE_PYTHON=1`` is set (the tests run both). The two give the same
records on the same bytes; the compiled one takes less CPU per read
(benchmarks/README.md, "Issue 42, item 3"). :func:`speedups_in_use` says which one this
process runs, and the session header prints it.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

__all__ = [
    "MAX_HEAD_BYTES",
    "PURE_PYTHON_ENV",
    "ConnectionReads",
    "SinkReads",
    "speedups_in_use",
    "text_events",
]

PURE_PYTHON_ENV = "LLMPERF_PURE_PYTHON"  # "1": the pure-Python per-read path, built or not


def _pure_forced() -> bool:
    return os.environ.get(PURE_PYTHON_ENV, "").strip().lower() in ("1", "true", "yes", "on")


if TYPE_CHECKING or _pure_forced():
    from pytest_llmperf.client._speedups_py import (
        COMPILED,
        MAX_HEAD_BYTES,
        ConnectionReads,
        SinkReads,
        text_events,
    )
else:
    try:
        from pytest_llmperf.client._speedups import (
            COMPILED,
            MAX_HEAD_BYTES,
            ConnectionReads,
            SinkReads,
            text_events,
        )
    except ImportError:  # not built (no compiler at install time): the same API in Python
        from pytest_llmperf.client._speedups_py import (
            COMPILED,
            MAX_HEAD_BYTES,
            ConnectionReads,
            SinkReads,
            text_events,
        )


def speedups_in_use() -> bool:
    """Whether this process reads responses through the compiled extension."""
    return COMPILED
