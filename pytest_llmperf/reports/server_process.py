"""A run's server process (``runs[].server_process``) in words, for every report.

The block (written by the plugin from :mod:`pytest_llmperf.managed_server`; see
docs/json-report.md) holds the server the gate started: its name, redacted command,
pid, log file, startup times, the resources sampled over the run, and ``exit`` when it
died. Each report shows it its own way, from these helpers:

- :func:`process_line`: the terminal's and Markdown's one line
  (``server: ready 41.2 s, RSS max 830 MB (+8.5), CPU 1.9 ms/token``);
- :func:`process_rows`: the HTML's small table (label, value);
- :func:`exit_message` / :func:`exit_tail`: the death, said in red where a report can;
- :func:`log_uri`: the log as a ``file://`` link.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pytest_llmperf.specs.process_names import format_process_value, process_value

__all__ = [
    "exit_message",
    "exit_tail",
    "log_uri",
    "process_line",
    "process_parts",
    "process_rows",
]


def _num(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)


def _mb(value: float | None) -> str:
    return "-" if value is None else format_process_value("server.rss_max_mb", value)


def _signed_mb(value: float | None) -> str:
    return "-" if value is None else f"{value:+.1f} MB"


def exit_message(block: Mapping[str, Any] | None) -> str:
    """``server exited with signal 9 (SIGKILL) at 12.3 s into run0``; ``""`` while it
    lives (or for a block without one)."""
    found = (block or {}).get("exit")
    if not isinstance(found, Mapping):
        return ""
    message = found.get("message")
    if message:
        return str(message)
    code, signal = found.get("code"), found.get("signal")
    what = f"signal {signal}" if signal is not None else f"code {code}"
    name = f" ({found['signal_name']})" if found.get("signal_name") else ""
    oom = ", out of memory" if found.get("oom") else ""
    return f"server exited with {what}{name}{oom}"


def exit_tail(block: Mapping[str, Any] | None) -> str:
    """The log's last lines as the block kept them at the exit (redacted), else ``""``."""
    found = (block or {}).get("exit")
    return str(found.get("log_tail") or "") if isinstance(found, Mapping) else ""


def log_uri(path: Any) -> str:
    """The log path as a ``file://`` URI (an absolute path; a relative one as it is)."""
    if not path:
        return ""
    text = str(path)
    try:
        return Path(text).as_uri()
    except ValueError:  # relative
        return text


def process_parts(block: Mapping[str, Any] | None, label: str = "") -> list[str]:
    """:func:`process_line` as its clauses (for a terminal line broken at a clause): the
    head with the first figure, then one per figure; ``[]`` without a block."""
    if not block:
        return []
    parts: list[str] = []
    ready = process_value(block, "startup.ready_s")
    if ready is not None:
        first = process_value(block, "startup.first_token_s")
        tail = f" (first token {first:.1f} s)" if first is not None else ""
        parts.append(f"ready {ready:.1f} s{tail}")
    rss = process_value(block, "server.rss_max_mb")
    if rss is not None:
        growth = process_value(block, "server.rss_growth_mb")
        parts.append(f"RSS max {_mb(rss)}" + (f" ({growth:+.1f})" if growth is not None else ""))
    gpu = process_value(block, "server.gpu_mem_max_mb")
    if gpu is not None:
        parts.append(f"GPU {_mb(gpu)}")
    per_token = process_value(block, "server.cpu_ms_per_output_token")
    cpu = process_value(block, "server.cpu_s")
    if per_token is not None:
        parts.append(f"CPU {per_token:.3g} ms/token")
    elif cpu is not None:
        parts.append(f"CPU {cpu:.3g} s")
    name = block.get("name")
    head = "server" + (f" {name}" if name else "") + (f" [{label}]" if label else "") + ":"
    if not parts:
        return [f"{head} nothing measured"]
    return [f"{head} {parts[0]}", *parts[1:]]


def process_line(block: Mapping[str, Any] | None, label: str = "") -> str:
    """``server vllm [run0]: ready 41.2 s, RSS max 830 MB (+8.5), CPU 1.9 ms/token`` (what
    was measured, in that order; ``""`` without a block). The exit is not in it: said
    apart (:func:`exit_message`)."""
    return ", ".join(process_parts(block, label))


def process_rows(block: Mapping[str, Any]) -> list[tuple[str, str]]:
    """The HTML's "Server process" table: ``(label, value)`` rows, formatted."""
    startup = block.get("startup") or {}
    res = block.get("resources") or {}
    rows: list[tuple[str, str]] = []
    name = block.get("name")
    if name or block.get("pid") is not None:
        rows.append(("server", f"{name or '-'} (pid {block.get('pid', '-')})"))
    if block.get("cmd"):
        rows.append(("command", str(block["cmd"])))
    if block.get("restart"):
        rows.append(("restarted per", str(block["restart"])))
    ready, first = _num(startup.get("ready_s")), _num(startup.get("first_token_s"))
    if ready is not None or first is not None:
        rows.append(
            (
                "startup",
                f"ready {format_process_value('startup.ready_s', ready)}, first token "
                f"{format_process_value('startup.first_token_s', first)} (from spawn)",
            )
        )
    if res:
        start, end = _num(res.get("rss_start_mb")), _num(res.get("rss_end_mb"))
        top, growth = _num(res.get("rss_max_mb")), _num(res.get("rss_growth_mb"))
        rows.append(
            (
                "RSS (process tree)",
                f"start {_mb(start)}, end {_mb(end)}, max {_mb(top)}, growth {_signed_mb(growth)}",
            )
        )
        cpu, per = _num(res.get("cpu_s")), _num(res.get("cpu_ms_per_output_token"))
        per_text = "-" if per is None else f"{per:.3g} ms per output token"
        cpu_text = format_process_value("server.cpu_s", cpu)
        rows.append(("CPU (user+system)", f"{cpu_text}, {per_text}"))
        gpu = _num(res.get("gpu_mem_max_mb"))
        if gpu is not None:
            rows.append(("GPU memory max", _mb(gpu)))
        elif res.get("gpu_note"):
            rows.append(("GPU memory", f"not measured: {res['gpu_note']}"))
        if res.get("samples") is not None:
            rows.append(("samples", str(res["samples"])))
    return rows
