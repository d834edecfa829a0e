"""SLO verdicts as JUnit testcase properties.

pytest's ``--junitxml`` writes ``item.user_properties`` as ``<property>``
elements under each ``<testcase>`` (valid under the default ``junit_family``
xunit2 as well as xunit1), which CI dashboards (GitLab, Jenkins, Azure,
GitHub annotations) display beside the test.
"""

from __future__ import annotations

from collections.abc import Iterable

from pytest_llmperf.reports.table import format_value
from pytest_llmperf.slo.verdicts import SloVerdict

__all__ = ["junit_properties"]


def junit_properties(verdicts: Iterable[SloVerdict]) -> list[tuple[str, str]]:
    """``(name, value)`` pairs: per SLO its verdict, observed value and target."""
    props: list[tuple[str, str]] = []
    for v in verdicts:
        name = f"llm_slo[{v.expr}]" + (f"[{v.run}]" if v.run else "")
        props.append((f"{name}.verdict", v.verdict))
        props.append((f"{name}.observed", format_value(v.observed, v.unit)))
        props.append((f"{name}.target", format_value(v.target, v.unit)))
        if v.reason:
            props.append((f"{name}.reason", v.reason))
    return props
