"""The simulator's engines as a fleet's pages: each engine's own ``/metrics`` and the listing.

A deployment of several engines is read page by page (docs/fleets.md): each
process its own ``/metrics``. The simulator serves one page per engine beside its
own ``/metrics`` (which stays the sum over them, as before):

- ``GET /replicas/{name}/metrics``: engine ``name``'s page in vLLM's names (prometheus.py):
  its own gauges and counters, the phase histograms of the requests it ran and the
  front end's TTFT/ITL/end-to-end histograms of the requests it answered, a
  ``process_start_time_seconds`` of its own (the simulator's start plus a millisecond
  per page) and its index as the ``engine`` label, so that a reader scraping two pages
  sees two processes and one page alone always one;
- ``GET /llmperf/fleet``: the listing a discovering reader asks, ``{"router": policy,
  "pages": [{"role", "name", "metrics"}, …]}``, the metrics paths relative to the
  server's root. Names are what the answers' ``x-replica-id`` says (``"0"``, ``"1"``,
  …; disaggregated: ``"p0"``… for the prefill pool, ``"d0"``… for the decode pool). A
  one-engine simulator lists one page, role ``replica``, name ``"0"``, at ``/metrics``.
  A profile with GPUs adds their DCGM exporter's page (dcgm_page.py), role ``gpu``, name
  ``"dcgm"``: a gpu page is never an engine's.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .prometheus import ServerCounters
from .streams import Backend
from .token_paths import TokenPaths

__all__ = [
    "FLEET_PATH",
    "GPU_PAGE_NAME",
    "GPU_ROLE",
    "PAGE_PATH",
    "PAGE_START_STEP_S",
    "Placement",
    "SimPage",
    "fleet_listing",
]

FLEET_PATH = "/llmperf/fleet"
PAGE_PATH = "/replicas/{name}/metrics"
GPU_ROLE = "gpu"  # the role of the GPUs' page in the listing (the plugin's PageRole.GPU)
GPU_PAGE_NAME = "dcgm"
PAGE_START_STEP_S = 0.001  # each page's process_start_time_seconds: the simulator's + this × (i+1)


@dataclass(frozen=True, slots=True)
class Placement:
    """Where the router put a request: the page (index into the pages) whose engine
    answers it and its name (``x-replica-id``), and, disaggregated, the prefill engine's
    index in its pool and name (``x-prefill-replica-id``)."""

    page: int
    name: str
    replica: int  # the engine's index in its pool (Submission.replica, or .decode)
    prefill: int = -1
    prefill_name: str = ""


@dataclass(eq=False)
class SimPage:
    """One engine's page: its role (``replica``, ``prefill``, ``decode``), name, path, back
    end, counters and token paths (which count the front end's histograms into them)."""

    role: str
    name: str
    path: str
    backend: Backend
    counters: ServerCounters
    paths: TokenPaths
    engine: str  # the ``engine`` label of its page


def fleet_listing(router: str, pages: list[SimPage], gpu_page: str | None = None) -> dict[str, Any]:
    """The body of ``GET /llmperf/fleet``; ``gpu_page``: the path of the GPUs' page, if any."""
    listed = [{"role": p.role, "name": p.name, "metrics": p.path} for p in pages]
    if gpu_page is not None:
        listed.append({"role": GPU_ROLE, "name": GPU_PAGE_NAME, "metrics": gpu_page})
    return {"router": router, "pages": listed}
