"""Two test modules with one basename break collection of the whole suite.

The test tree has no ``__init__.py`` files (rootdir-relative imports, ``loopback``
and friends on ``sys.path``), so pytest imports each test module by its basename:
a second ``test_x.py`` anywhere under ``tests/`` is an "import file mismatch" that
stops ``pytest tests`` before a single test runs — in CI, where the conformance
modules are collected (and skipped) with the rest.
"""

from __future__ import annotations

import re
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


# pytester.makepyfile(name=SOURCE) / makepyfile(**{"name": SOURCE}): the inner file's name
_INNER = re.compile(r"makepyfile\(\s*(?:\*\*\{\s*)?[\"']?(\w+)[\"']?\s*[=:]")


def test_no_inner_session_module_is_named_like_a_test_module() -> None:
    """A session run in process (``pytester.runpytest``) imports its files by basename in
    the worker's interpreter: an inner ``test_affinity.py`` collides with
    ``tests/client/test_affinity.py`` wherever xdist put both in one worker."""
    modules = {p.stem for p in TESTS.rglob("test_*.py") if "__pycache__" not in p.parts}
    clashes = sorted(
        f"{path.relative_to(TESTS)}: {name}"
        for path in TESTS.rglob("*.py")
        if "__pycache__" not in path.parts
        for name in _INNER.findall(path.read_text(encoding="utf-8"))
        if name in modules
    )
    assert not clashes, f"inner session files named like test modules: {clashes}"
