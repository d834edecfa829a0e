"""SLO verdicts and baseline comparisons as JUnit properties.

Where they go depends on pytest's ``junit_family``:

- ``xunit1`` / ``legacy``: ``<property>`` elements under each ``<testcase>``
  (pytest writes ``item.user_properties`` there);
- ``xunit2`` (pytest's default): its schema allows ``<properties>`` only on
  the ``<testsuite>``, so the plugin adds them there, each name prefixed with
  the test id (``tests/test_x.py::test_chat::llm_slo[ttft.p99 < 500ms].verdict``).

Either way a failing SLO also fails its testcase, whose ``<failure>`` message
holds the verdict table, which is what CI dashboards (GitLab, Jenkins,
Azure, GitHub annotations) show first.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from pytest_llmperf.methodology.reference import AbComparison
from pytest_llmperf.reports.table import error_sample_lines, format_value
from pytest_llmperf.slo.regression import RegressionCheck
from pytest_llmperf.slo.verdicts import SloVerdict

__all__ = ["ab_properties", "error_properties", "junit_properties", "regression_properties"]


def junit_properties(
    verdicts: Iterable[SloVerdict], *, prefix: str = "llm_slo"
) -> list[tuple[str, str]]:
    """``(name, value)`` pairs: per SLO its verdict, observed value, target and sample count.

    A verdict on one stage of a staged run is named ``llm_slo[<expr>][<run>][stage <k>]``
    and adds ``.stage_load`` (``40 req/s``).
    """
    props: list[tuple[str, str]] = []
    for v in verdicts:
        name = f"{prefix}[{v.expr}]" + (f"[{v.run}]" if v.run else "")
        if v.stage is not None:
            name += f"[stage {v.stage}]"
        props.append((f"{name}.verdict", v.verdict.value))
        if v.stage_load:
            props.append((f"{name}.stage_load", v.stage_load))
        props.append((f"{name}.observed", format_value(v.observed, v.unit)))
        props.append((f"{name}.target", format_value(v.target, v.unit)))
        props.append((f"{name}.samples", str(v.samples)))
        if v.reason:
            props.append((f"{name}.reason", v.reason))
    return props


def regression_properties(checks: Iterable[RegressionCheck]) -> list[tuple[str, str]]:
    """``(name, value)`` pairs per baseline comparison: verdict, baseline, current, change."""
    props: list[tuple[str, str]] = []
    for c in checks:
        name = f"llm_baseline[{c.name}][{c.run}]"
        props.append((f"{name}.verdict", c.verdict.value))
        if c.baseline is not None or c.current is not None:
            props.append((f"{name}.baseline", format_value(c.baseline, "ms")))
            props.append((f"{name}.current", format_value(c.current, "ms")))
        props += _change_properties(name, c.change, c.p_value, c.reason)
    return props


def ab_properties(comparisons: Iterable[AbComparison]) -> list[tuple[str, str]]:
    """``(name, value)`` pairs per A/B statistic (``--llm-reference-endpoint``), e.g.
    ``llm_ab[ttft.p50][run0].verdict`` = ``unchanged``, ``.candidate``, ``.reference``,
    ``.change``, ``.p_value``; plus ``llm_ab[run0].reference_endpoint``."""
    props: list[tuple[str, str]] = []
    for ab in comparisons:
        where = ab.reference_endpoint.get("url") or ab.reference_endpoint.get("simulator") or ""
        props.append((f"llm_ab[{ab.run}].reference_endpoint", str(where)))
        props.append((f"llm_ab[{ab.run}].verdict", ab.verdict.value))
        props.append((f"llm_ab[{ab.run}].blocks", str(ab.blocks)))
        props.append((f"llm_ab[{ab.run}].allowed", ab.allowed))
        for c in ab.checks:
            name = f"llm_ab[{c.name}][{c.run}]"
            props.append((f"{name}.verdict", c.verdict.value))
            props.append((f"{name}.candidate", format_value(c.candidate, "ms")))
            props.append((f"{name}.reference", format_value(c.reference, "ms")))
            props.append((f"{name}.threshold", f"+{c.threshold * 100:g}%"))
            props += _change_properties(name, c.change, c.p_value, c.reason)
    return props


def _change_properties(
    name: str, change: float | None, p_value: float | None, reason: str
) -> list[tuple[str, str]]:
    """A comparison's ``.change`` (``+12.3%``), ``.p_value`` and ``.reason``, where known:
    the baseline gate and the A/B comparison report them alike."""
    props: list[tuple[str, str]] = []
    if change is not None:
        props.append((f"{name}.change", f"{change * 100:+.1f}%"))
    if p_value is not None:
        props.append((f"{name}.p_value", f"{p_value:.4g}"))
    if reason:
        props.append((f"{name}.reason", reason))
    return props


def error_properties(
    runs: Iterable[tuple[str, Iterable[Mapping[str, Any]]]],
) -> list[tuple[str, str]]:
    """``(name, value)`` per distinct failure of each ``(run label, error_samples)``, e.g.
    ``llm_errors[run0][0]`` = ``http_error x12: HTTP 422: body.ignore_eos: Extra inputs...``."""
    props: list[tuple[str, str]] = []
    for label, samples in runs:
        lines = error_sample_lines(list(samples))
        props.extend((f"llm_errors[{label}][{i}]", line) for i, line in enumerate(lines))
    return props
