"""Two test modules with one basename break collection of the whole suite.

The test tree has no ``__init__.py`` files (rootdir-relative imports, ``loopback``
and friends on ``sys.path``), so pytest imports each test module by its basename:
a second ``test_x.py`` anywhere under ``tests/`` is an "import file mismatch" that
stops ``pytest tests`` before a single test runs — in CI, where the conformance
modules are collected (and skipped) with the rest.
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]


def test_no_two_test_modules_share_a_basename() -> None:
    where: dict[str, list[str]] = defaultdict(list)
    for path in TESTS.rglob("*.py"):
        if "__pycache__" not in path.parts and path.name != "conftest.py":  # pytest's own
            where[path.name].append(str(path.relative_to(TESTS)))
    shared = {name: paths for name, paths in where.items() if len(paths) > 1}
    assert not shared, f"module basenames used twice under tests/: {shared}"
