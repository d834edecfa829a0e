"""A fleet run's JUnit properties: per replica (the client's figures and its page's), per
pool and the fleet's own figures, named as a served model's are and formatted as the
other reports format them (:mod:`.fleet_words`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pytest_llmperf.reports.fleet_view import fleet_view, server_stat
from pytest_llmperf.reports.fleet_words import (
    REPLICA_HEADER,
    bound_cell,
    ratio_cell,
    replica_cells,
    server_cell,
)
from pytest_llmperf.reports.time_split import format_server_value

__all__ = ["fleet_properties"]


def fleet_properties(run: Mapping[str, Any]) -> list[tuple[str, str]]:
    """JUnit ``(name, value)`` pairs of a run's fleet, named as a served model's are:
    ``llm_run[run0][replica 0].issued`` (``.completed``, ``.failed``),
    ``llm_run[ttft.p99][run0][replica 0]`` = ``45.0 ms`` (ttft p50/p99, e2e p99,
    ``error_rate``); the page's ``llm_server[server.queue_time.p99][run0][replica 0]`` =
    ``≤ 50.0 ms`` (``server.requests``, ``server.kv_cache_usage.max``,
    ``server.prefix_cache_hit_rate``, ``server.preemptions``); a pool's
    ``llm_server[...][run0][pool prefill]``; and ``llm_fleet[run0].imbalance`` =
    ``1.10``, ``.busy_imbalance``, ``.prefix_hit_rate``, ``.not_attributed``, ``.pages``,
    ``.replicas``, ``llm_fleet[kv_transfer.p99][run0]``."""
    view = fleet_view(run)
    if view is None:
        return []
    label = view.label
    props: list[tuple[str, str]] = []
    for row in view.rows:
        where = f"[{label}][{row.role or 'replica'} {row.name}]"
        cells = dict(zip(REPLICA_HEADER, replica_cells(row), strict=True))
        if row.client is not None:
            counts = row.client.get("counts") or {}
            for key in ("issued", "completed", "failed"):
                props.append((f"llm_run{where}.{key}", str(int(counts.get(key) or 0))))
            for name, column in (
                ("ttft.p50", "TTFT p50"),
                ("ttft.p99", "TTFT p99"),
                ("e2e.p99", "E2E p99"),
                ("error_rate", "errors"),
            ):
                props.append((f"llm_run[{name}]{where}", cells[column]))
        if row.server is not None:
            props += _server_props(row.server, where)
    for pool in view.pools:
        props += _server_props(pool.server, f"[{label}][pool {pool.role}]")
    name = f"llm_fleet[{label}]"
    props += [(f"{name}.replicas", str(len(view.replicas))), (f"{name}.pages", str(view.pages))]
    if view.imbalance is not None:
        props.append((f"{name}.imbalance", ratio_cell(view.imbalance)))
    if view.busy_imbalance is not None:
        props.append((f"{name}.busy_imbalance", ratio_cell(view.busy_imbalance)))
    if view.prefix_hit_rate is not None:
        rate = format_server_value("server.prefix_cache_hit_rate", view.prefix_hit_rate)
        props.append((f"{name}.prefix_hit_rate", rate))
    props.append((f"{name}.not_attributed", str(view.unattributed if view.attributed else "all")))
    if view.kv_transfer is not None:
        kv = {"metrics": {"server.kv_transfer": view.kv_transfer}}
        for stat in ("p50", "p99"):
            props.append(
                (
                    f"llm_fleet[kv_transfer.{stat}][{label}]",
                    bound_cell(kv, "server.kv_transfer", stat),
                )
            )
    return props


_SERVER_PROPS = (
    ("server.requests", "value"),
    ("server.queue_time", "p99"),
    ("server.kv_cache_usage", "max"),
    ("server.prefix_cache_hit_rate", "value"),
    ("server.preemptions", "value"),
)


def _server_props(server: Mapping[str, Any], where: str) -> list[tuple[str, str]]:
    props = []
    for metric, stat in _SERVER_PROPS:
        named = metric if stat == "value" else f"{metric}.{stat}"
        if metric == "server.queue_time":
            value = bound_cell(server, metric, stat)
        elif server_stat(server, metric, stat) is None:
            continue
        else:
            value = server_cell(server, metric, stat)
        if value != "-":
            props.append((f"llm_server[{named}]{where}", value))
    if server.get("missing") and not server.get("metrics"):
        props.append((f"llm_server{where}.missing", str(server["missing"])))
    return props
