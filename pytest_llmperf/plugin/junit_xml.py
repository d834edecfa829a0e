"""pytest's JUnit XML writer (``--junitxml``), as the plugin reaches it: its object in the
stash, and where a test case's properties may go."""

from __future__ import annotations

from typing import Any

import pytest

__all__ = ["junit_testcase_properties", "junit_xml"]


def junit_testcase_properties(config: pytest.Config) -> bool:
    """xunit1 allows ``<properties>`` in a testcase; xunit2 (the default) only in the suite."""
    try:
        return config.getini("junit_family") in ("xunit1", "legacy")
    except ValueError:
        return False


def junit_xml(config: pytest.Config) -> Any:
    """pytest's ``LogXML`` of this session (None without ``--junitxml``)."""
    try:
        from _pytest.junitxml import xml_key
    except ImportError:  # pragma: no cover - pytest moved it
        return None
    return config.stash.get(xml_key, None)
