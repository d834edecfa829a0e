"""Reports: verdict tables, JUnit properties, JSON, and the session's collected data."""

from pytest_llmperf.reports.json_report import build_report, write_json_report
from pytest_llmperf.reports.junit import junit_properties
from pytest_llmperf.reports.session_data import SessionData, TestEntry
from pytest_llmperf.reports.table import format_value, verdict_table

__all__ = [
    "SessionData",
    "TestEntry",
    "build_report",
    "format_value",
    "junit_properties",
    "verdict_table",
    "write_json_report",
]
