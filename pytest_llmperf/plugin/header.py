"""The terminal header: the endpoint under test, the A/B reference, the options that shape
measurements, the server metrics and the ruleset, before any test runs."""

from __future__ import annotations

import pytest

from pytest_llmperf.client.endpoint import Endpoint
from pytest_llmperf.options import LlmPerfOptions, WorkerBackend
from pytest_llmperf.plugin.state import SessionState
from pytest_llmperf.server_metrics.page_list import is_page_list

__all__ = ["HeaderHooks", "header_lines"]


class HeaderHooks:
    """``pytest_report_header``: the session's llmperf lines."""

    def __init__(self, state: SessionState) -> None:
        self.state = state

    def pytest_report_header(self, config: pytest.Config) -> list[str]:
        return header_lines(self.state)


def header_lines(state: SessionState) -> list[str]:
    """The ``llmperf:`` lines of pytest's header."""
    opts = state.options
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
    if is_page_list(opts.server_metrics):  # each page's probe: the endpoint's line, at preflight
        metrics = f"a fleet of pages ({opts.server_metrics})"
    elif opts.server_metrics not in ("auto", "off") and not opts.server_metrics.startswith("http"):
        metrics = f"the endpoint's /metrics every {opts.server_metrics} s"
    lines.append(
        f"llmperf: server metrics: {metrics}; prefix-cache reset before gated runs: "
        + ("auto" if opts.reset_cache else "off")
    )
    if state.gpus is not None:  # --llm-gpu: said once, here (no GPU: one note, no failure)
        lines.append(f"llmperf: GPUs: {state.gpus.note}")
    if state.ruleset:
        lines.append(f"llmperf: ruleset {state.ruleset.name} ({state.ruleset.source})")
    return lines


def _workers_word(opts: LlmPerfOptions) -> str:
    """`` workers=ray:2`` for the header, nothing for the default single process."""
    if opts.worker_backend is WorkerBackend.RAY:
        return f" workers=ray:{'auto' if opts.workers_auto else opts.workers}"
    return f" workers={opts.workers}" if opts.workers > 1 else ""
