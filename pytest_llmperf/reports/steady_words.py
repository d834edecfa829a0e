"""The steady-state window of a run in words: one line for the terminal and the Markdown
summary (``runs[].steady``; :mod:`pytest_llmperf.results.steady`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pytest_llmperf.reports.table import format_value

__all__ = ["steady_line"]


def steady_line(run: Mapping[str, Any]) -> str | None:
    """``steady 30.0-150.0 s (120.0 s): 2400 in, 300 out (ramp 300, drain 0); 20.0 req/s,
    2537.2 tok/s (whole run 17.9 req/s, 2270.7 tok/s)``, or why there is no window; None
    for a run without ``steady=``."""
    window = run.get("steady")
    if not isinstance(window, Mapping):
        return None
    if window.get("why"):
        return f"{window['why']} ({window.get('requests_out', 0)} request(s) out of it)"
    metrics = run.get("metrics") or {}
    whole = window.get("whole_run") or {}

    def rates(source: Mapping[str, Any]) -> str:
        return (
            f"{format_value(source.get('request_throughput'), 'req/s')}, "
            f"{format_value(source.get('output_throughput'), 'tok/s')}"
        )

    latency = "; latency over the window too" if window.get("latency") else ""
    return (
        f"steady {window.get('start_s', 0):.1f}-{window.get('end_s', 0):.1f} s "
        f"({window.get('duration_s', 0):.1f} s): {window.get('requests_in', 0)} in, "
        f"{window.get('requests_out', 0)} out (ramp {window.get('out_ramp', 0)}, "
        f"drain {window.get('out_drain', 0)}); {rates(metrics)} (whole run {rates(whole)})"
        f"{latency}"
    )
