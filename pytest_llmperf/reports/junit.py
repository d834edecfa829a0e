"""SLO verdicts and baseline comparisons as JUnit properties.

Where they go depends on pytest's ``junit_family``:

- ``xunit1`` / ``legacy``: ``<property>`` elements under each ``<testcase>``
  (pytest writes ``item.user_properties`` there);
- ``xunit2`` (pytest's default): its schema allows ``<properties>`` only on
  the ``<testsuite>``, so the plugin adds them there, each name prefixed with
  the test id (``tests/test_x.py::test_chat::llm_slo[ttft.p99 < 500ms].verdict``).

Each run also carries its counts and key figures (``llm_run[run0].issued``,
``llm_run[ttft.p99][run0]``, …: :func:`run_properties`), formatted as the terminal
and HTML reports show them; with checked outputs, served models or compared outputs,
those too (``llm_run[valid_rate][run0]``, ``llm_run[run0][model sim-lora-1].issued``,
``llm_output_match[run0].share``).

Either way a failing SLO also fails its testcase, whose ``<failure>`` message
holds the verdict table, which is what CI dashboards (GitLab, Jenkins,
Azure, GitHub annotations) show first.

A test whose managed server exited, or whose runs had failed requests against one,
also carries the server's log tail (redacted) in its testcase's ``<system-err>``
(:func:`add_server_log`), whatever ``junit_logging`` says.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any
from xml.etree import ElementTree

from pytest_llmperf.reports.conversation_view import conversation_properties
from pytest_llmperf.reports.fleet_junit import fleet_properties
from pytest_llmperf.reports.gpu_words import gpu_properties
from pytest_llmperf.reports.model_view import model_entries
from pytest_llmperf.reports.output_words import (
    compared_outputs,
    invalid_sample_lines,
    mismatched,
    parting_words,
    validity,
)
from pytest_llmperf.reports.server_process import exit_message
from pytest_llmperf.reports.table import error_sample_lines, format_value, verdict_model
from pytest_llmperf.reports.time_split import (
    cache_reset_word,
    format_server_value,
    metric_unit,
    time_split,
)
from pytest_llmperf.slo.ab_comparison import AbComparison
from pytest_llmperf.slo.regression import RegressionCheck
from pytest_llmperf.slo.verdicts import SloVerdict
from pytest_llmperf.specs.process_names import PROCESS_METRICS, format_process_value, process_value
from pytest_llmperf.specs.server_names import MetricKind, metric_kind

__all__ = [
    "ab_properties",
    "add_error_case",
    "add_server_log",
    "error_properties",
    "junit_properties",
    "regression_properties",
    "run_properties",
    "server_properties",
]

# A JUnit <error> message attribute is kept short (pytest shortens its own the same way);
# the whole text is the element's body.
_MESSAGE_LIMIT = 1000


def add_error_case(xml: Any, classname: str, name: str, message: str, detail: str) -> None:
    """Add a test case ``classname``/``name`` holding one ``<error>`` to pytest's JUnit
    writer ``xml`` (its ``LogXML``, before it writes the file at session end): a session
    that judged nothing (stopped before load, interrupted) must not read green. The
    counts follow (``tests``, ``errors``), as for pytest's own internal-error case."""
    reporter = xml.node_reporter(f"{classname}::{name}")
    reporter.attrs.update(classname=classname, name=name)
    short = message if len(message) <= _MESSAGE_LIMIT else message[: _MESSAGE_LIMIT - 1] + "…"
    error = ElementTree.Element("error", message=_xml_text(short))
    error.text = _xml_text(detail)
    reporter.append(error)


def add_server_log(xml: Any, report: Any, log: Mapping[str, str]) -> None:
    """Append the server's log tail (``log``: the test's ``server_log``, ``{"path",
    "tail"}``, redacted already) to the ``<system-err>`` of ``report``'s testcase in
    pytest's JUnit writer ``xml`` (its ``LogXML``): the server's own words beside the
    failure, where CI dashboards show a test's output."""
    reporter = xml.node_reporter(report)
    element = ElementTree.Element("system-err")
    head = f"server log {log.get('path') or ''}, last lines:"
    element.text = _xml_text(f"{head}\n{log.get('tail') or ''}")
    reporter.append(element)


def _xml_text(text: str) -> str:
    """``text`` without the characters XML 1.0 cannot hold (a server may send any byte)."""
    return "".join(
        c for c in text if c in "\t\n\r" or " " <= c <= "\ud7ff" or "\ue000" <= c <= "\U0010ffff"
    )


# per server metric kind, the statistics a run's properties carry (all of them: the JSON)
_SERVER_STATS = {MetricKind.LATENCY: ("p50", "p99"), MetricKind.GAUGE: ("max", "mean")}


def junit_properties(
    verdicts: Iterable[SloVerdict], *, prefix: str = "llm_slo"
) -> list[tuple[str, str]]:
    """``(name, value)`` pairs: per SLO its verdict, observed value, target and sample count.

    A verdict on one stage of a staged run is named ``llm_slo[<expr>][<run>][stage <k>]``
    and adds ``.stage_load`` (``40 req/s``); one on a served model's requests
    (``per_model=True``), ``llm_slo[<expr>][<run>][model <name>]``; one on a replica's
    requests (``replica.ttft.p99 < 500ms``), ``llm_slo[<expr>][<run>][replica <name>]``.
    """
    props: list[tuple[str, str]] = []
    for v in verdicts:
        name = f"{prefix}[{v.expr}]" + (f"[{v.run}]" if v.run else "")
        if v.stage is not None:
            name += f"[stage {v.stage}]"
        said = v.to_dict()
        if model := verdict_model(said):
            name += f"[model {model}]"
        if replica := said.get("replica"):  # replica.ttft.p99: judged on each replica alone
            name += f"[replica {replica}]"
        props.append((f"{name}.verdict", v.verdict.value))
        if v.stage_load:
            props.append((f"{name}.stage_load", v.stage_load))
        props.append((f"{name}.observed", format_value(v.observed, v.unit)))
        props.append((f"{name}.target", format_value(v.target, v.unit)))
        props.append((f"{name}.samples", str(v.samples)))
        if v.reason:
            props.append((f"{name}.reason", v.reason))
    return props


# a run's figures as properties: what the terminal, HTML and Markdown reports show of it
_RUN_COUNTS = ("issued", "completed", "failed")
_RUN_STATS = (
    ("ttft", "p50"),
    ("ttft", "p99"),
    ("tpot", "p50"),
    ("tpot", "p99"),
    ("itl", "p50"),
    ("itl", "p99"),
)
_RUN_RATES = (
    ("request_throughput", "req/s"),
    ("output_throughput", "tok/s"),
    ("error_rate", "fraction"),
    ("goodput", "fraction"),
)


def _figures(name: str, where: str, entry: Mapping[str, Any]) -> list[tuple[str, str]]:
    """A run's (or one of its models') counts and key figures: ``name`` ``llm_run``,
    ``where`` ``[run0]`` (``[run0][model sim-lora-1]``)."""
    props: list[tuple[str, str]] = []
    counts = entry.get("counts") or {}
    metrics = entry.get("metrics") or {}
    cancelled = ("cancelled",) if counts.get("cancelled") else ()
    blank = ("blank",) if counts.get("blank") else ()
    for key in (*_RUN_COUNTS, *cancelled, *blank):
        props.append((f"{name}{where}.{key}", str(int(counts.get(key) or 0))))
    checked = validity(entry)
    if checked is not None or counts.get("invalid"):
        props.append((f"{name}{where}.invalid", str(int(counts.get("invalid") or 0))))
    if checked is not None:
        props.append((f"{name}{where}.checked", str(checked[1])))
    for metric, stat in _RUN_STATS:
        value = (metrics.get(metric) or {}).get(stat)
        props.append((f"{name}[{metric}.{stat}]{where}", format_value(value, "ms")))
    for rate, unit in _RUN_RATES:
        props.append((f"{name}[{rate}]{where}", format_value(metrics.get(rate), unit)))
    if blank:
        props.append(
            (f"{name}[blank_rate]{where}", format_value(metrics.get("blank_rate"), "fraction"))
        )
    if checked is not None:
        props.append((f"{name}[valid_rate]{where}", format_value(checked[2], "fraction")))
    return props


def run_properties(runs: Iterable[Mapping[str, Any]]) -> list[tuple[str, str]]:
    """``(name, value)`` per run (report dicts, ``RunResult.to_dict()``): its counts and
    key figures, formatted as every report formats them, e.g.
    ``llm_run[run0].issued`` = ``80`` (``.completed``, ``.failed``, ``.cancelled`` and
    ``.blank`` with ``llm_run[blank_rate][run0]`` when any),
    ``llm_run[ttft.p99][run0]`` = ``22.4 ms`` (ttft, tpot, itl at p50 and p99),
    ``llm_run[request_throughput][run0]`` = ``171.48 req/s``,
    ``llm_run[output_throughput][run0]`` = ``1371.83 tok/s``,
    ``llm_run[error_rate][run0]`` = ``8.75%``, ``llm_run[goodput][run0]``.

    A run whose outputs were checked adds ``llm_run[run0].invalid``, ``.checked`` and
    ``llm_run[valid_rate][run0]`` = ``95.00%``, and each distinct reason
    ``llm_invalid[run0][0]`` = ``schema x2: $.title: 'x' is too long``; a run with
    served models, the same figures per model, ``llm_run[run0][model sim-lora-1].issued``,
    ``llm_run[ttft.p99][run0][model sim-lora-1]``; a run whose outputs were compared,
    ``llm_output_match[run0].share`` = ``90.00%``, ``.compared``, ``.mismatched``,
    ``.against``, ``.compared_with``, ``.parted`` = ``#3 at token 12, #17 at token 0``
    (``llm_output_consistency`` alike), or ``.not_measured`` and why. A run with
    conversations adds their figures (``llm_conversations[makespan.p90][run0]``, ...:
    :func:`~pytest_llmperf.reports.conversation_view.conversation_properties`); a fleet's
    run, per replica and pool (``llm_run[ttft.p99][run0][replica 0]``,
    ``llm_fleet[run0].imbalance``: :func:`~pytest_llmperf.reports.fleet_junit.fleet_properties`);
    a run that read its GPUs, each GPU figure (``llm_gpu[energy_per_output_token_j][run0]`` =
    ``0.25 J``: :func:`~pytest_llmperf.reports.gpu_words.gpu_properties`)."""
    props: list[tuple[str, str]] = []
    for run in runs:
        label = str(run.get("label") or "")
        props += _figures("llm_run", f"[{label}]", run)
        for model, entry in model_entries(run):
            props += _figures("llm_run", f"[{label}][model {model}]", entry)
        props += conversation_properties(run)
        props += fleet_properties(run)
        props += gpu_properties([run])
        lines = invalid_sample_lines(run.get("invalid_samples") or ())
        props += [(f"llm_invalid[{label}][{i}]", line) for i, line in enumerate(lines)]
        for metric, match in compared_outputs(run):
            name = f"llm_{metric}[{label}]"
            compared = int(match.get("compared") or 0)
            props.append((f"{name}.share", format_value(match.get("share"), "fraction")))
            props.append((f"{name}.compared", str(compared)))
            props.append((f"{name}.mismatched", str(mismatched(match))))
            props.append((f"{name}.against", str(match.get("against") or "")))
            if match.get("compared_with"):
                props.append((f"{name}.compared_with", str(match["compared_with"])))
            if parted := parting_words(match):
                props.append((f"{name}.parted", parted))
        for metric, why in (run.get("output_notes") or {}).items():
            props.append((f"llm_{metric}[{label}].not_measured", str(why)))
    return props


def regression_properties(checks: Iterable[RegressionCheck]) -> list[tuple[str, str]]:
    """``(name, value)`` pairs per baseline comparison: verdict, baseline, current, change."""
    props: list[tuple[str, str]] = []
    for c in checks:
        name = f"llm_baseline[{c.name}][{c.run}]"
        unit = metric_unit(c.metric)  # a server metric's own unit (%, a count), else ms
        props.append((f"{name}.verdict", c.verdict.value))
        if c.baseline is not None or c.current is not None:
            props.append((f"{name}.baseline", format_value(c.baseline, unit)))
            props.append((f"{name}.current", format_value(c.current, unit)))
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
            unit = metric_unit(c.metric)
            props.append((f"{name}.candidate", format_value(c.candidate, unit)))
            props.append((f"{name}.reference", format_value(c.reference, unit)))
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


def server_properties(runs: Iterable[Mapping[str, Any]]) -> list[tuple[str, str]]:
    """``(name, value)`` per run (report dicts, ``RunResult.to_dict()``) with the server's
    metrics or a TTFT split: where they came from, their key statistics in their units,
    and where the client's TTFT went, e.g.

    - ``llm_server[run0].source`` = ``http://h:8000/metrics``, ``.family`` = ``vllm``,
      ``.scrapes``, ``.missing`` (why some or all are missing), ``.cache_reset``;
    - ``llm_server[server.queue_time.p99][run0]`` = ``50.0 ms`` (latencies: p50, p99;
      gauges: max, mean: ``llm_server[server.kv_cache_usage.max][run0]`` = ``93.5%``;
      counters and ratios: ``llm_server[server.preemptions][run0]`` = ``3``), named as an
      SLO on it is written; an unknown family's own metrics are not repeated (the JSON
      report has them);
    - ``llm_ttft_split[run0].source`` = ``per request, n=1200`` or ``server histograms,
      bucket-bounded, n=1200``, and per statistic (mean, p50, p99) the client's TTFT and
      each part: ``llm_ttft_split[p50][run0].ttft`` = ``41.2 ms``, ``.server_queue``,
      ``.prefill`` (or ``.client_queue``, ``.engine`` per request), ``.remainder``;
    - the server process the gate started: ``llm_server_process[startup.ready_s][run0]`` =
      ``41.2 s`` (each process metric measured, named as an SLO on it is written),
      ``llm_server_process[run0].log`` (its log's path) and ``.exit`` (where it died).
    """
    props: list[tuple[str, str]] = []
    for run in runs:
        label = str(run.get("label") or "")
        server = run.get("server_metrics")
        if server is not None:
            name = f"llm_server[{label}]"
            props.append((f"{name}.source", str(server.get("source") or "")))
            props.append((f"{name}.family", str(server.get("family") or "unknown")))
            props.append((f"{name}.scrapes", str(int(server.get("scrapes") or 0))))
            if server.get("missing"):
                props.append((f"{name}.missing", str(server["missing"])))
            for metric, entry in (server.get("metrics") or {}).items():
                kind = metric_kind(metric)
                for stat in _SERVER_STATS.get(kind, ("value",)) if kind else ():
                    if entry.get(stat) is None:
                        continue
                    named = metric if stat == "value" else f"{metric}.{stat}"
                    props.append(
                        (f"llm_server[{named}][{label}]", format_server_value(metric, entry[stat]))
                    )
        if reset := cache_reset_word(run.get("cache_reset")):
            props.append((f"llm_server[{label}].cache_reset", reset))
        props.extend(_process_properties(label, run.get("server_process")))
        split = time_split(run)
        if split is None:
            continue
        props.append((f"llm_ttft_split[{label}].source", split.source))
        for stat in split.stats:
            name = f"llm_ttft_split[{stat}][{label}]"
            props.append((f"{name}.ttft", format_value(split.ttft.get(stat), "ms")))
            for part in split.parts:
                props.append((f"{name}.{part.key}", format_value(part.values.get(stat), "ms")))
    return props


def _process_properties(label: str, block: Mapping[str, Any] | None) -> list[tuple[str, str]]:
    """The server process's figures of one run (see :func:`server_properties`)."""
    if not isinstance(block, Mapping):
        return []
    props = [
        (f"llm_server_process[{name}][{label}]", format_process_value(name, value))
        for name in PROCESS_METRICS
        if (value := process_value(block, name)) is not None
    ]
    if block.get("log"):
        props.append((f"llm_server_process[{label}].log", str(block["log"])))
    if died := exit_message(block):
        props.append((f"llm_server_process[{label}].exit", died))
    return props
