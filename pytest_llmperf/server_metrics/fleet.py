"""A fleet's server metrics: one :class:`~.summary.ServerMetrics` per ``/metrics`` page,
each with its role and name, and what they say together.

A deployment of several processes is scraped page by page, each page under the
one-process rule of a single page (docs/server-metrics.md): a page is one process
or it has no numbers. What the pages say together is computed from the pages'
own summaries (:mod:`.fleet_merge`), never from adding scrapes of different
processes: counters are summed, latency histograms merged bucket by bucket, gauges
taken over all pages. ``runs[].server_metrics`` is that whole (so an SLO on
``server.ttft.p99`` judges the fleet); ``runs[].fleet`` (only where a list of pages
was given) keeps each page and each role's pool (docs/fleets.md).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pytest_llmperf.server_metrics.summary import ServerMetrics
from pytest_llmperf.specs.fleet_names import PageRole

__all__ = ["FleetMetrics", "PageMetrics", "PageSpec"]


@dataclass(frozen=True, slots=True)
class PageSpec:
    """One page of the list: its ``role``, its ``name`` (as the reports say it, and as a
    response header names the replica that served a request where the server says so)
    and its ``url``."""

    role: PageRole
    name: str
    url: str


@dataclass
class PageMetrics:
    """One page's view of a run: a single page's :class:`ServerMetrics`, with its place."""

    role: PageRole
    name: str
    metrics: ServerMetrics

    def to_dict(self) -> dict[str, Any]:
        return {
            "role": self.role.value,
            "name": self.name,
            "server_metrics": self.metrics.to_dict(),
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> PageMetrics:
        return cls(
            role=PageRole(data["role"]),
            name=str(data["name"]),
            metrics=ServerMetrics.from_dict(data.get("server_metrics") or {}),
        )


@dataclass
class FleetMetrics:
    """A run's pages, its pools and fleet-wide figures (``runs[].fleet``).

    ``pages``: every page in the order given (a page whose scrapes failed keeps its
    ``missing``). ``roles``: each role's pages together (only roles with pages).
    ``whole``: every page together, what ``runs[].server_metrics`` holds (not written a
    second time under ``fleet``). ``prefix_hit_rate``: prefix-cache hits over lookups,
    summed over the pages that count them (None: none did). ``requests``: each page's
    completed requests (``server.requests``), by name, where the page counts them.
    ``discovered``: how the list was found (``"vllm-router at http://r:8000"``), None when
    given. ``notes``: what a reader should know (a page that had no numbers, different
    bucket bounds that could not be merged).
    """

    pages: list[PageMetrics] = field(default_factory=list)
    roles: dict[str, ServerMetrics] = field(default_factory=dict)
    whole: ServerMetrics | None = None
    prefix_hit_rate: float | None = None
    requests: dict[str, float] = field(default_factory=dict)
    discovered: str | None = None
    notes: list[str] = field(default_factory=list)

    def page(self, name: str) -> PageMetrics | None:
        """The page named ``name`` (None: no such page)."""
        return next((p for p in self.pages if p.name == name), None)

    def role(self, role: str) -> ServerMetrics | None:
        """The pool of ``role``'s pages together (None: no page has that role)."""
        return self.roles.get(role)

    def to_dict(self) -> dict[str, Any]:
        """The JSON report's ``runs[].fleet``."""
        return {
            "pages": [p.to_dict() for p in self.pages],
            "roles": {k: v.to_dict() for k, v in self.roles.items()},
            "prefix_hit_rate": self.prefix_hit_rate,
            "requests": dict(self.requests),
            "discovered": self.discovered,
            "notes": list(self.notes),
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any], whole: ServerMetrics | None = None) -> FleetMetrics:
        """Back from :meth:`to_dict` (``whole``: the run's ``server_metrics``)."""
        return cls(
            pages=[PageMetrics.from_dict(p) for p in data.get("pages") or ()],
            roles={k: ServerMetrics.from_dict(v) for k, v in (data.get("roles") or {}).items()},
            whole=whole,
            prefix_hit_rate=data.get("prefix_hit_rate"),
            requests={str(k): float(v) for k, v in (data.get("requests") or {}).items()},
            discovered=data.get("discovered"),
            notes=[str(n) for n in data.get("notes") or ()],
        )
