"""A package's public names, each imported on first use (PEP 562 ``__getattr__``).

Several packages are imported for one name by a process that needs little else: a
load-generator worker (``loadgen``: never the generator or the pools), the orphan
watchdog (``managed_server``: never the server or ``http.client``), every pytest
process's option parser (``sim``: the profile names, never the real-time server and
aiohttp). Each lists where its names live and takes its ``__getattr__`` and
``__dir__`` from here. (The package's own front door, ``pytest_llmperf/__init__.py``,
keeps a copy of its own: ``import pytest_llmperf`` must load no other module.)
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping

__all__ = ["lazy_names"]


def lazy_names(
    package: str, homes: Mapping[str, str]
) -> tuple[Callable[[str], object], Callable[[], list[str]]]:
    """``__getattr__`` and ``__dir__`` for ``package``, whose public name ``n`` lives in
    the module ``homes[n]`` (full module names, so the layer test sees the imports)."""
    namespace = sys.modules[package].__dict__

    def __getattr__(name: str) -> object:
        home = homes.get(name)
        if home is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(home), name)
        namespace[name] = value  # once: later lookups skip __getattr__
        return value

    def __dir__() -> list[str]:
        return sorted({*namespace, *namespace.get("__all__", ())})

    return __getattr__, __dir__
