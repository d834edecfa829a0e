"""Helpers for driving pytest-llmperf sessions with pytester (in-process pytest runs)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parents[1] / "hardening"))  # odd_servers: misbehaving servers

# A small, fast workload against the default embedded simulator ("fixed" profile).
FAST = (
    '@pytest.mark.llm_workload("synthetic", input_tokens=16, output_tokens=4, requests={n})\n'
    '@pytest.mark.llm_load("concurrency", concurrency=8)\n'
)


@pytest.fixture(scope="session")  # a constant: module-scoped sessions may use it too
def fast() -> str:
    return FAST
