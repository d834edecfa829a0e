"""Fixtures for report tests."""

from __future__ import annotations

import pytest
from synthetic_session import make_session_data

from pytest_llmperf.reports.session_data import SessionData


@pytest.fixture
def session_data() -> SessionData:
    return make_session_data()
