"""The simulator's shape (issue 38): no class over 300 lines.

A class that size holds several jobs (the old ``SimApp`` was the routes, the
body reading, every API's framing, admission, faults, the back end and the token
timing in 685 lines); the server is split by job instead: the HTTP surface
(server.py) over the bridge to the engine (bridge.py) and the token paths
(token_paths.py). Read from the source with :mod:`ast`, so a class grown past the
limit fails here, not in review.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest_llmperf.sim

SIM = Path(pytest_llmperf.sim.__file__).resolve().parent
MAX_CLASS_LINES = 300


def _classes(path: Path) -> list[tuple[str, int]]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return [
        (node.name, (node.end_lineno or node.lineno) - node.lineno + 1)
        for node in ast.walk(tree)
        if isinstance(node, ast.ClassDef)
    ]


def test_no_class_over_300_lines() -> None:
    too_long = [
        f"{path.relative_to(SIM)}:{name} ({lines} lines)"
        for path in sorted(SIM.rglob("*.py"))
        for name, lines in _classes(path)
        if lines > MAX_CLASS_LINES
    ]
    assert not too_long, f"classes over {MAX_CLASS_LINES} lines: {too_long}"


def test_the_scan_sees_the_classes() -> None:
    """The scan finds the server's classes (a test that scans nothing passes nothing)."""
    names = {name for path in SIM.rglob("*.py") for name, _ in _classes(path)}
    assert {"SimApp", "EngineBridge", "TokenPaths"} <= names
