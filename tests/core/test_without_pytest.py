"""The library imports without pytest: only the plugin (and the hook specifications)
need it. A fresh interpreter with ``pytest`` and ``_pytest`` blocked by a meta-path
finder imports the package, its public names and every library subpackage."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest_llmperf

ROOT = Path(pytest_llmperf.__file__).resolve().parent
PYTEST_SIDE = {"plugin", "hooks"}  # the pytest plugin and its hook specifications
LIBRARY = sorted(
    p.stem if p.is_file() else p.name
    for p in ROOT.iterdir()
    if ((p.suffix == ".py" and p.stem != "__init__") or (p / "__init__.py").exists())
    and (p.stem if p.is_file() else p.name) not in PYTEST_SIDE | {"__main__"}
)

CHILD = """
import importlib, pkgutil, sys

class NoPytest:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in ("pytest", "_pytest"):
            raise ImportError(f"{name} is blocked: the library must import without pytest")
        return None

sys.meta_path.insert(0, NoPytest())
import pytest_llmperf
for name in pytest_llmperf.__all__:
    getattr(pytest_llmperf, name)
for name in sys.argv[1:]:
    module = importlib.import_module("pytest_llmperf." + name)
    for info in pkgutil.walk_packages(getattr(module, "__path__", []), module.__name__ + "."):
        if not info.name.endswith("__main__"):
            importlib.import_module(info.name)
assert not any(m.split(".")[0] in ("pytest", "_pytest") for m in sys.modules), "pytest loaded"
print("ok")
"""


def test_the_library_imports_with_pytest_blocked() -> None:
    assert {"loadgen", "client", "metrics", "errors", "sim"} <= set(LIBRARY)
    done = subprocess.run(
        [sys.executable, "-c", CHILD, *LIBRARY], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr[-3000:]


def test_the_blocker_does_block() -> None:
    """The check above would pass vacuously if the blocker let pytest through."""
    done = subprocess.run(
        [sys.executable, "-c", CHILD, "plugin"], capture_output=True, text=True, timeout=120
    )
    assert done.returncode != 0 and "is blocked" in done.stderr
