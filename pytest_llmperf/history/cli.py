"""``python -m pytest_llmperf.history PATH|URL COMMAND`` (also ``llmperf-history``).

Commands:

- ``list [--test TEST]``: one line per stored run and test: session, when, tag,
  test, run label, key (short), completed/issued, ttft p50/p99; and one per session
  that stopped before load (``the gate did not run: ...``, docs/gate-states.md)
- ``show SESSION``: a session's identity and its runs in detail (or why it stopped)
- ``trend TEST METRIC [--stat p50] [--html]`` and ``detect [--test T] [--metric M]
  [--stat S] [--alpha A]``: from :mod:`pytest_llmperf.history.trends`; METRIC is ``ttft``
  with ``--stat p99``, or ``ttft.p99`` as an SLO spells it, or a value per run such as
  ``request_throughput`` or the server process's ``startup.ready_s``, ``server.rss_max_mb``,
  ``server.rss_growth_mb``, ``server.cpu_ms_per_output_token``
- ``export --format json|csv|markdown [--out FILE]``: every stored run (JSON: sessions
  with their runs, accumulator states included; CSV: one row per run, metrics flattened;
  Markdown: per test and comparison key each statistic's latest value, last values as a
  sparkline and change point, then the sessions: :mod:`pytest_llmperf.history.markdown`)

Exit status: 0, or 2 for a bad target, an unknown test or session, a bad argument.
"""

from __future__ import annotations

import argparse
import importlib
import re
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pytest_llmperf.gate_states import did_not_run_line
from pytest_llmperf.history.errors import HistoryError
from pytest_llmperf.history.export import export_csv, export_json, export_markdown
from pytest_llmperf.history.records import SessionInfo, StoredRun
from pytest_llmperf.history.store import HistoryStore
from pytest_llmperf.specs.fleet_names import FLEET_METRICS, POOL_SCOPES
from pytest_llmperf.specs.gpu_names import GPU_METRICS
from pytest_llmperf.specs.process_names import PROCESS_METRICS

__all__ = ["main", "main_entry"]


class CommandError(Exception):
    """A clear message for the user, exit status 2."""


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="llmperf-history",
        description="Read a pytest-llmperf history (--llm-history): a SQLite file or a "
        "postgresql:// URL.",
    )
    parser.add_argument("target", metavar="PATH|URL", help="the history store")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    listing = commands.add_parser("list", help="one line per stored run and test")
    listing.add_argument("--test", help="only this test (node id)")
    show = commands.add_parser("show", help="one session's runs in detail")
    show.add_argument("session", type=int, metavar="SESSION", help="session id (see list)")
    trend = commands.add_parser("trend", help="a test's metric over the stored runs")
    trend.add_argument("test", metavar="TEST")
    trend.add_argument(
        "metric",
        metavar="METRIC",
        help="e.g. ttft, ttft.p99 (an SLO's spelling), e2e, request_throughput",
    )
    trend.add_argument("--stat", help="p50, p90, p99, mean, ... (default p50)")
    trend.add_argument("--html", action="store_true", help="an HTML page instead of a table")
    detect = commands.add_parser("detect", help="change points in the stored series")
    detect.add_argument("--test", help="only this test (node id)")
    detect.add_argument("--metric", default="ttft", help="ttft (default), or ttft.p99 ...")
    detect.add_argument("--stat", help="p50, p90, p99, mean, ... (default p50)")
    detect.add_argument("--alpha", type=float, default=0.05, help="significance (0.05)")
    export = commands.add_parser(
        "export", help="every stored run as JSON or CSV, or the trends as Markdown"
    )
    export.add_argument("--format", choices=("json", "csv", "markdown"), default="json")
    export.add_argument("--out", metavar="FILE", help="write here instead of stdout")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """The CLI; returns the exit status."""
    args = _parser().parse_args(argv)
    try:
        with HistoryStore.open(args.target, create=False) as store:
            text = _run(store, args)
    except (HistoryError, CommandError) as exc:
        print(f"llmperf-history: {exc}", file=sys.stderr)
        return 2
    if text:
        sys.stdout.write(text if text.endswith("\n") else text + "\n")
    return 0


def _run(store: HistoryStore, args: argparse.Namespace) -> str:
    if args.command == "list":
        if args.test is not None and args.test not in store.tests():
            raise CommandError(f"no test {args.test!r} in {store.where}")
        stopped = [] if args.test is not None else [s for s in store.sessions() if s.stopped]
        return list_runs(store.runs(args.test), stopped)
    if args.command == "show":
        return show_session(store, args.session)
    if args.command == "export":
        exports = {"json": export_json, "csv": export_csv, "markdown": export_markdown}
        text = exports[args.format](store)
        if args.out:
            Path(args.out).write_text(text, encoding="utf-8")
            return f"llmperf-history: wrote {len(store.runs())} runs to {args.out}"
        return text
    trends = _trends()
    metric, stat = metric_and_stat(args.metric, args.stat)
    if args.command == "trend":
        if args.test not in store.tests():
            raise CommandError(f"no test {args.test!r} in {store.where}")
        return str(trends.trend_table(store, args.test, metric, stat=stat, html=args.html))
    if args.test is not None and args.test not in store.tests():
        raise CommandError(f"no test {args.test!r} in {store.where}")
    return str(
        trends.detect_command(store, test=args.test, metric=metric, stat=stat, alpha=args.alpha)
    )


# the prefixes a kept metric's name may carry before its own name (history/records.py)
_SCOPE = re.compile(
    r"^(?:server|conversation|" + "|".join(POOL_SCOPES) + r")\.|^replica\[[^\]]*\]\."
)


def metric_and_stat(metric: str, stat: str | None) -> tuple[str, str]:
    """``ttft.p99`` as an SLO spells it, or ``ttft`` with ``--stat p99`` (default ``p50``):
    ``(metric, stat)``. A server or conversation metric keeps its prefix
    (``server.queue_time.p99``, ``conversation.makespan_excl_tools.p90``), and so do a
    fleet's (``decode.kv_cache_usage.max``, ``replica[0].ttft.p99``). Two
    different statistics, one in each place, are an error naming both. A process metric
    (``startup.ready_s``, ``server.rss_max_mb``), a fleet's figure (``fleet.imbalance``) or
    a GPU figure (``energy_per_output_token_j``)
    is one value per run: ``(name, "value")``."""
    if metric in PROCESS_METRICS or metric in FLEET_METRICS or metric in GPU_METRICS:
        return metric, "value"
    scoped = _SCOPE.match(metric)
    prefix = scoped[0] if scoped else ""
    base, _, named = metric[len(prefix) :].partition(".")
    if named and stat is not None and named != stat:
        raise CommandError(
            f"{metric!r} names the statistic {named!r} and --stat {stat!r}: give one"
        )
    return prefix + base, named or stat or "p50"


def _trends() -> Any:
    try:
        return importlib.import_module("pytest_llmperf.history.trends")
    except ModuleNotFoundError as exc:
        if exc.name != "pytest_llmperf.history.trends":
            raise
        raise CommandError("trend and detect are not available yet") from None


def _ms(value: Any) -> str:
    return f"{value:.1f}" if isinstance(value, (int, float)) else "-"


def _short(when: str) -> str:
    return when[:19].replace("T", " ")


def list_runs(runs: Sequence[StoredRun], stopped: Sequence[SessionInfo] = ()) -> str:
    """The ``list`` table: one line per stored run, and per ``stopped`` session (one that
    stopped before load, so stored no run) one saying so, in session order."""
    header = (
        "session",
        "when (UTC)",
        "tag",
        "test",
        "run",
        "key",
        "done/issued",
        "ttft p50",
        "p99",
    )
    rows: list[tuple[int, tuple[str, ...]]] = []
    for run in runs:
        ttft = run.metrics.get("ttft") or {}
        cells = (
            str(run.session_id),
            _short(run.when),
            run.tag or "-",
            run.test,
            run.label,
            run.key[:8],
            f"{run.counts.get('completed', 0)}/{run.counts.get('issued', 0)}",
            _ms(ttft.get("p50")),
            _ms(ttft.get("p99")),
        )
        rows.append((run.session_id, cells))
    # a stopped session's line: its first three columns, then why (not a column's width)
    rows += [
        (s.id, (str(s.id), _short(s.started_at), s.tag or "-", did_not_run_line(s.stopped or {})))
        for s in stopped
    ]
    if not rows:
        return "no runs stored"
    table = [header, *(cells for _, cells in rows)]
    widths = [max(len(r[i]) for r in table if len(r) == len(header)) for i in range(len(header))]
    rows.sort(key=lambda pair: pair[0])  # stable: a session's runs keep their order
    return "\n".join(
        "  ".join(c.ljust(w) for c, w in zip(r, widths, strict=False)).rstrip()
        for r in [header, *(cells for _, cells in rows)]
    )


_DETAIL_METRICS = ("ttft", "ttfo", "tpot", "itl", "e2e")


def show_session(store: HistoryStore, session_id: int) -> str:
    """The ``show`` text: the session's identity, then each run's counts and metrics."""
    try:
        info = store.session(session_id)
    except HistoryError:
        raise CommandError(f"no session {session_id} in {store.where}") from None
    ep = info.endpoint
    lines = [
        f"session {info.id}: {info.started_at} .. {info.finished_at}  tag {info.tag or '-'}",
        f"  endpoint {ep.get('url') or ep.get('simulator') or '-'}  model {ep.get('model') or '-'}"
        f"  api {ep.get('api') or '-'}  server {ep.get('server_version') or '-'}",
        f"  machine {info.machine.get('hostname', '-')} ({info.machine.get('platform', '-')}, "
        f"{info.machine.get('cpu_count', '-')} CPUs, Python {info.machine.get('python', '-')})",
        f"  options {info.options}",
    ]
    if info.stopped:
        said = info.stopped.get("server_says")
        lines.append(f"  {did_not_run_line(info.stopped)}")
        lines.append(f"    reason: {info.stopped.get('reason')}")
        lines.append(f"    the server says: {said}" if said else "    the server said nothing")
    for run in store.runs(session_id=session_id):
        c = run.counts
        m = run.metrics
        lines.append(f"{run.test} [{run.label}] {run.outcome}  key {run.key}")
        lines.append(f"  load {run.load}  workload {run.workload}")
        lines.append(
            f"  issued {c.get('issued', 0)}  completed {c.get('completed', 0)}  "
            f"failed {c.get('failed', 0)}  incomplete {c.get('incomplete', 0)}  "
            f"cancelled {c.get('cancelled', 0)}  blank {c.get('blank', 0)}"
        )
        for name in _DETAIL_METRICS:
            h = m.get(name) or {}
            lines.append(
                f"  {name:<5} p50 {_ms(h.get('p50'))}  p90 {_ms(h.get('p90'))}  "
                f"p99 {_ms(h.get('p99'))}  mean {_ms(h.get('mean'))} ms  (n={h.get('count', 0)})"
            )
        lines.append(
            f"  throughput {m.get('request_throughput', 0)} req/s, "
            f"{m.get('output_throughput', 0)} tok/s; error rate {m.get('error_rate', 0)}"
        )
    return "\n".join(lines)


def main_entry() -> None:
    """The ``llmperf-history`` console script."""
    sys.exit(main())
