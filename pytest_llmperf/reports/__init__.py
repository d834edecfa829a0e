"""Reports: verdict tables, JUnit properties, JSON, HTML, baselines and the session's data."""

from pytest_llmperf.reports.baseline import Baseline, build_baseline, load_baseline, write_baseline
from pytest_llmperf.reports.html import build_html_report, write_html_report
from pytest_llmperf.reports.json_report import REPORT_VERSION, build_report, write_json_report
from pytest_llmperf.reports.junit import error_properties, junit_properties, regression_properties
from pytest_llmperf.reports.minimum_report import minimum_viable_report
from pytest_llmperf.reports.session_data import SessionData, TestEntry
from pytest_llmperf.reports.table import format_value, regression_table, verdict_table

__all__ = [
    "REPORT_VERSION",
    "Baseline",
    "SessionData",
    "TestEntry",
    "build_baseline",
    "build_html_report",
    "build_report",
    "error_properties",
    "format_value",
    "junit_properties",
    "load_baseline",
    "minimum_viable_report",
    "regression_properties",
    "regression_table",
    "verdict_table",
    "write_baseline",
    "write_html_report",
    "write_json_report",
]
