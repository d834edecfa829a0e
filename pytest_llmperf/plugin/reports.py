"""Reports: the terminal header, and at session end the session ruleset, JSON, HTML,
Markdown (and GitHub's step summary), baseline, history and the terminal summary.
"""

from __future__ import annotations

import os
from typing import Any

import pytest

from pytest_llmperf.client.endpoint import Endpoint, redact_url
from pytest_llmperf.gate_states import JUNIT_CLASSNAME, StopPhase, junit_case, stop_words
from pytest_llmperf.hook_calls import (
    call_session_finished,
    call_update_json,
)
from pytest_llmperf.options import InconclusivePolicy, LlmPerfOptions, SummaryDetail, WorkerBackend
from pytest_llmperf.plugin.base import PluginBase
from pytest_llmperf.plugin.endpoints import several_endpoints
from pytest_llmperf.reports.baseline import (
    build_baseline,
    write_baseline,
)
from pytest_llmperf.reports.html import write_html_report
from pytest_llmperf.reports.json_report import build_report, write_json_report
from pytest_llmperf.reports.junit import (
    add_error_case,
    junit_properties,
)
from pytest_llmperf.reports.markdown import (
    STEP_SUMMARY_ENV,
    append_step_summary,
    build_markdown,
    write_markdown,
)
from pytest_llmperf.reports.terminal import write_terminal_summary
from pytest_llmperf.slo.multiplicity import (
    multiple_comparisons_line,
    session_comparisons,
    session_summary,
)
from pytest_llmperf.slo.regression import DEFAULT_ALPHA
from pytest_llmperf.slo.session import evaluate_session
from pytest_llmperf.slo.verdicts import Verdict


class ReportsPart(PluginBase):
    """The header, and at session end the session verdicts and every report."""

    markdown_error = ""  # the Markdown summary could not be written (a red line, not a crash)
    stopped = ""  # pytest stopped the session early, not interrupted: its words (the reason)
    multiple_comparisons: dict[str, Any] | None = None  # the session's comparisons, corrected

    def pytest_report_header(self, config: pytest.Config) -> list[str]:
        opts = self.options
        if opts.server is not None:  # --llm-server-cmd: started by the gate
            where = f"{opts.server.describe()['cmd']} (started by the gate)"
        elif opts.endpoint_url is None:
            # started on first use; "(default)": nothing configured, say where it comes from
            how = " (default)" if not opts.endpoint_given else ""
            where = f"embedded simulator, profile {opts.sim_profile}{how}"
        else:
            where = Endpoint(opts.endpoint_url).label
        lines = [f"llmperf: endpoint under test: {where}"]
        if opts.reference_url or opts.reference_sim_profile or opts.reference_server:
            ref = (
                f"{opts.reference_server.describe()['cmd']} (started by the gate)"
                if opts.reference_server
                else Endpoint(opts.reference_url).label
                if opts.reference_url
                else f"embedded simulator, profile {opts.reference_sim_profile} (own process)"
            )
            lines.append(f"llmperf: A/B reference endpoint: {ref}")
        lines.append(
            f"llmperf: api={opts.api} model={opts.model or 'auto (GET /v1/models)'} "
            f"timeout={opts.timeouts.total:g}s scale={opts.scale:g}" + _workers_word(opts)
        )
        metrics = {
            "auto": "auto (the endpoint's /metrics where it answers, every 1 s)",
            "off": "off",
        }.get(opts.server_metrics, opts.server_metrics)
        if opts.server_metrics not in ("auto", "off") and not opts.server_metrics.startswith(
            "http"
        ):
            metrics = f"the endpoint's /metrics every {opts.server_metrics} s"
        lines.append(
            f"llmperf: server metrics: {metrics}; prefix-cache reset before gated runs: "
            + ("auto" if opts.reset_cache else "off")
        )
        if self.ruleset:
            lines.append(f"llmperf: ruleset {self.ruleset.name} ({self.ruleset.source})")
        return lines

    def pytest_keyboard_interrupt(self, excinfo: pytest.ExceptionInfo[BaseException]) -> None:
        """Ctrl-C, SIGTERM (plugin/interrupts.py) or a KeyboardInterrupt in a test: the
        session is interrupted. pytest calls this hook too when it stops the session itself
        (``Session.Interrupted``: errors during collection, a plugin's stop) or on
        ``pytest.exit`` (a usage error found mid-session): nobody interrupted the runs, so
        the session is not marked interrupted, and only why it stopped is kept."""
        error = excinfo.value
        # (xdist ends a session that a worker stopped, its server gone, with an interrupt)
        stopped = isinstance(error, pytest.Session.Interrupted | pytest.exit.Exception)
        if stopped or self._stopped_mid_session():
            self.stopped = _stop_reason(error)
        else:
            self.data.interrupted = True

    def _stopped_mid_session(self) -> bool:
        """The session's started server exited and the session stopped (servers.py)."""
        return bool(self.stop and self.stop.get("phase") == StopPhase.SERVER_EXITED.value)

    @pytest.hookimpl(tryfirst=True)
    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        # the servers the gate started, stopped now: the reports say how each ended
        servers = self.servers_at_end()
        if hasattr(self.config, "workerinput"):
            return  # an xdist worker: its reports travel to the controller, which aggregates
        if self._stopped_mid_session() and session.exitstatus == pytest.ExitCode.INTERRUPTED:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED  # xdist's way to stop: not ^C
        add_server = getattr(self.data, "add_server", None)
        for described in servers:
            if add_server is not None:
                add_server(described)
        groups = self.data.groups()
        # A session ruleset judges the runs of the tests that used llm_loadgen: none ran
        # (--collect-only, a selection of unit tests) is nothing to judge, not a failure;
        # some that measured nothing fail it (slo/session.py).
        if self.ruleset and self.data.tests and not self.config.option.collectonly:
            self.session_verdicts = evaluate_session(
                groups, self.ruleset, confidence=self.options.confidence
            )
            failing = {Verdict.FAIL} | (
                {Verdict.INCONCLUSIVE}
                if self.options.inconclusive == InconclusivePolicy.FAIL
                else set()
            )
            if any(v.verdict in failing for v in self.session_verdicts) and session.exitstatus == 0:
                session.exitstatus = pytest.ExitCode.TESTS_FAILED
            xml = self._junit_xml()
            if xml is not None:
                for name, value in junit_properties(self.session_verdicts, prefix="llm_session"):
                    xml.add_global_property(name, value)
        endpoint = self._report_endpoint()
        session_info = {
            "ruleset": self.ruleset.describe() if self.ruleset else None,
            "slos": [v.to_dict() for v in self.session_verdicts],
            "baseline": {
                "compared_with": self.baseline.path if self.baseline else None,
                "baseline_created_at": self.baseline.created_at if self.baseline else None,
                "baseline_endpoint": self.baseline.endpoint if self.baseline else None,
                "thresholds": self.thresholds.describe(),
                "saved_to": self.options.baseline_save,
                **(self.comparability or {}),
            },
            "multiple_comparisons": self._multiple_comparisons(),
            "fingerprint": endpoint.get("fingerprint"),
            "options": self._run_options(),
            "exitstatus": int(session.exitstatus),
            "stopped": self.stop,  # a stop before load (gate_states.py), else None
            "worker_lost": list(self.worker_lost),
        }
        if add_server is None:  # session.servers: every server the session started
            session_info["servers"] = servers
        if self.options.baseline_save:
            document = build_baseline(
                self.data,
                endpoint=endpoint,
                options=self._run_options(),
                fingerprint=endpoint.get("fingerprint"),
            )
            self.written.append(str(write_baseline(self.options.baseline_save, document)))
        report, failure = call_update_json(
            self.config, lambda: build_report(self.data, endpoint=endpoint, session=session_info)
        )
        self._junit_session_case(report["session"])
        step_summary = self._step_summary(report)
        trends = None
        if self.options.history and (
            self.options.json or self.options.html or self.options.markdown or step_summary
        ):
            # one query of the history for every report: the HTML draws its series, the
            # JSON carries their digest (``trends``), from which the Markdown is written
            trends = _report_trends(self.options.history, report)
            report["trends"] = _trend_digest(trends)
        if self.options.json:
            self.written.append(str(write_json_report(self.options.json, report)))
        if self.options.html:
            html = write_html_report(self.options.html, report, self.data, _html_trends(trends))
            self.written.append(str(html))
        if self.options.markdown or step_summary:
            self._write_markdown(report, step_summary)
        failures = [failure, call_session_finished(session, report)]
        self.hook_failures = [f for f in failures if f is not None]
        if (self.hook_failures or self.markdown_error) and session.exitstatus == pytest.ExitCode.OK:
            session.exitstatus = pytest.ExitCode.INTERNAL_ERROR
        self._append_history(session)

    def _junit_session_case(self, session: dict[str, Any]) -> None:
        """A session that stopped before load, or was interrupted, adds one test case with
        an ``<error>`` to the JUnit file (``--junitxml``): without it the file reads
        ``tests="0" failures="0"``, green to a dashboard, though nothing was judged."""
        case = junit_case(session)
        if case is not None and not session.get("stopped") and not self._measuring():
            return  # an interrupted session of plain tests: not ours to mark
        xml = self._junit_xml()
        if case is not None and xml is not None:
            add_error_case(xml, JUNIT_CLASSNAME, *case)

    @pytest.hookimpl(optionalhook=True)
    def pytest_handlecrashitem(self, crashitem: str, report: Any, sched: Any) -> None:
        """pytest-xdist: the worker running ``crashitem`` died (its test fails, xdist says
        so); the session's reports name it (JSON ``session.worker_lost``)."""
        node = getattr(report, "node", None)
        worker = getattr(getattr(node, "gateway", None), "id", None)
        self.worker_lost.append({"nodeid": crashitem, "worker": str(worker or "?")})

    def _multiple_comparisons(self) -> dict[str, Any] | None:
        """The session's baseline and A/B comparisons under Holm and BH (None: none made)."""
        checks, tests = session_comparisons(
            (t.nodeid, t.baseline, t.runs) for t in self.data.tests.values()
        )
        if not checks:
            return None
        self.multiple_comparisons = session_summary(
            checks, alpha=DEFAULT_ALPHA, tests=tests or self.measuring_tests
        )
        return self.multiple_comparisons

    def _step_summary(self, report: dict[str, Any]) -> str | None:
        """``$GITHUB_STEP_SUMMARY``'s file when the summary goes there: it is set, not
        ``--llm-markdown=off``, and the session measured something or judged session-wide
        targets (a session of plain tests in a job adds nothing to its summary)."""
        path = os.environ.get(STEP_SUMMARY_ENV, "").strip()
        if not path or not self.options.step_summary or self.config.option.collectonly:
            return None
        session = report.get("session") or {}
        measured = report.get("tests") or session.get("slos") or session.get("stopped")
        return path if measured or (session.get("interrupted") and self._measuring()) else None

    def _measuring(self) -> bool:
        """The session measured, or had tests that could (an interrupt may come first)."""
        return bool(self.data.tests or self.measuring_tests)

    def _write_markdown(self, report: dict[str, Any], step_summary: str | None) -> None:
        """``--llm-markdown=PATH``: the summary, written; and appended to the step summary.
        A failure is a red line in the terminal summary and exit status 3, and loses no
        other report."""
        where = self.options.markdown or ""
        try:
            markdown = build_markdown(report)
            if self.options.markdown:
                self.written.append(str(write_markdown(self.options.markdown, markdown)))
            if step_summary:
                where = f"${STEP_SUMMARY_ENV} ({step_summary})"
                target = append_step_summary(step_summary, markdown)
                self.written.append(f"{target} (${STEP_SUMMARY_ENV}, appended)")
        except Exception as exc:  # never cost the session its other reports and history
            why = f"{exc.strerror}" if isinstance(exc, OSError) and exc.strerror else repr(exc)
            self.markdown_error = (
                f"llmperf: the Markdown summary was not written{' to ' + where if where else ''}: "
                f"{why}"
            )

    def _append_history(self, session: pytest.Session) -> None:
        """``--llm-history``: append the session, after every other output is written (a
        failure is a red line and exit status 3, like a failing hook, and loses nothing)."""
        if not self.options.history or self.config.option.collectonly:
            return
        from pytest_llmperf.history.session import history_at_session_end

        self.history = history_at_session_end(
            self.options.history,
            self.data.measured_tests(),
            endpoint=self._report_endpoint(),
            options=self._run_options(),
            started_at=self._started_at,
            tag=self.options.history_tag,
            rootdir=self.config.rootpath,
            fingerprint=self._report_endpoint().get("fingerprint"),
            stopped=self.stop,
        )
        if self.history.error and session.exitstatus == pytest.ExitCode.OK:
            session.exitstatus = pytest.ExitCode.INTERNAL_ERROR

    def _report_endpoint(self) -> dict[str, Any]:
        """What the tests measured (under xdist: the workers' endpoints); with several
        endpoints no single one is claimed (each test's ``endpoint`` says which)."""
        measured = [dict(t.endpoint) for t in self.data.measured_tests() if t.endpoint]
        several = several_endpoints(measured)
        if several is not None:
            return several
        if measured:
            return measured[0]
        if self._endpoint is not None:
            return self.endpoints.describe(self._endpoint)
        return self._planned_endpoint()

    def _planned_endpoint(self) -> dict[str, Any]:
        opts = self.options
        url = redact_url(opts.endpoint_url) if opts.endpoint_url else None
        return {"url": url, "simulator": opts.sim_profile, "api": opts.api}

    def _run_options(self) -> dict[str, Any]:
        """The options that shape measurements (never the key, only its variable's name)."""
        opts = self.options
        return {
            "api": opts.api,
            "model": opts.model,
            "scale": opts.scale,
            "workers": opts.workers,
            "worker_backend": opts.worker_backend.value,
            "timeout_s": opts.timeouts.total,
            "inconclusive": opts.inconclusive.value,  # plain data for hooks and the JSON
            "ruleset": opts.ruleset,
            "api_key_env": opts.api_key_env,
            "tokenizer": opts.tokenizer,
            "ab_threshold": opts.ab_threshold
            if self.options.reference_url
            or self.options.reference_sim_profile
            or self.options.reference_server
            else None,
            "ab_blocks": opts.ab_blocks,
        }

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        write_terminal_summary(
            terminalreporter,
            self.data,
            self.session_verdicts,
            self.written,
            errors=[f.message() for f in self.hook_failures]
            + ([self.markdown_error] if self.markdown_error else [])
            + ([self.history.error] if self.history and self.history.error else [])
            + (
                [f"pytest-llmperf: {stop_words(self.stop)}"]
                if self.stop_said_here and self.stop
                else []
            ),
            stopped=self.stopped,
            brief=self._brief_summary(),
        )
        if self.history and self.history.note:
            terminalreporter.write_line(self.history.note)
        if self.multiple_comparisons:
            terminalreporter.write_line(multiple_comparisons_line(self.multiple_comparisons))

    def _brief_summary(self) -> bool:
        """``--llm-summary``: brief, or auto under ``-q``."""
        detail = self.options.summary
        if detail is SummaryDetail.AUTO:
            return bool(self.config.get_verbosity() < 0)
        return detail is SummaryDetail.BRIEF


def _stop_reason(error: BaseException) -> str:
    """Why pytest stopped the session, its first line: ``1 error during collection``,
    ``stopping after 1 failures`` (xdist), a ``pytest.exit`` reason."""
    msg = getattr(error, "msg", None)  # pytest.exit's reason
    text = str(msg if msg is not None else error).strip()
    return text.splitlines()[0] if text else type(error).__name__


def _report_trends(target: str, report: Any) -> Any:
    """``--llm-history``: the report's trend sections, the statistics the HTML draws and
    the Markdown summary shows (never raises)."""
    from pytest_llmperf.history.markdown import TREND_SERIES
    from pytest_llmperf.history.trends import report_trends

    return report_trends(target, report, series=TREND_SERIES)


def _trend_digest(trends: Any) -> dict[str, Any]:
    """The JSON report's ``trends``: every series' last values and change points."""
    from pytest_llmperf.history.markdown import trend_digest

    digest: dict[str, Any] = trend_digest(trends)
    return digest


def _html_trends(trends: Any) -> Any:
    """The HTML report's trends: the sections with the series it draws (its charts as
    before the Markdown summary's statistics joined the query)."""
    if trends is None:
        return None
    import dataclasses

    from pytest_llmperf.history.trends import REPORT_SERIES

    sections = {}
    for nodeid, runs in trends.sections.items():
        kept = []
        for section in runs:
            pairs = [
                (s, svg)
                for s, svg in zip(section.series, section.charts, strict=True)
                if (s.metric, s.stat) in REPORT_SERIES
            ]
            if pairs:
                kept.append(
                    dataclasses.replace(
                        section, series=[p[0] for p in pairs], charts=[p[1] for p in pairs]
                    )
                )
        if kept:
            sections[nodeid] = kept
    if trends.sections and not sections:
        note = "no stored run comparable with this session's runs yet"
        return dataclasses.replace(trends, sections={}, note=note)
    return dataclasses.replace(trends, sections=sections)


def _workers_word(opts: LlmPerfOptions) -> str:
    """`` workers=ray:2`` for the header, nothing for the default single process."""
    if opts.worker_backend is WorkerBackend.RAY:
        return f" workers=ray:{'auto' if opts.workers_auto else opts.workers}"
    return f" workers={opts.workers}" if opts.workers > 1 else ""
