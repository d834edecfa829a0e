"""``discover=URL``: ask a router which workers it has, and make a page of each.

Asked once, at preflight, in this order (the first that answers a list wins):

- ``GET /llmperf/fleet``, the embedded simulator's listing: ``{"router": "<policy>",
  "pages": [{"role": "replica", "name": "0", "metrics": "/replicas/0/metrics"}, ...]}``
  (``metrics`` relative to the server's root, or a whole URL; ``role`` one of
  :class:`~pytest_llmperf.specs.fleet_names.PageRole`; ``name`` what the replica's
  ``x-replica-id`` says);
- ``GET /workers``, vLLM's router (vllm-project/router ``src/server.rs``,
  ``list_workers_rest``) and SGLang's model gateway (sgl-router / smg): ``{"workers":
  [{"url": "http://w1:8001", "worker_type": "regular"|"prefill"|"decode", ...}], ...}``;
  each worker's page is its ``url`` + ``/metrics`` (role replica, prefill or decode);
- ``GET /list_workers``, the same routers' older listing: ``{"urls": [...]}`` (role
  replica).

Neither router serves its own Prometheus page on its API port (both export on a
separate ``--prometheus-port``), so a router found by ``/workers`` adds no router page:
the notes say how to add it (``router=http://host:PORT/metrics``). A server that lists
nothing gets a note saying so and its own ``/metrics`` as the one page (role router; for
``discover`` alone, which asks the endpoint itself, role replica: a single server).
Never raises: what went wrong is a note.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urljoin

from pytest_llmperf.client.blocking_metadata import BlockingMetadataClient
from pytest_llmperf.client.endpoint import Endpoint, redact_url
from pytest_llmperf.client.metadata import Answer, MetadataCallError, server_root
from pytest_llmperf.server_metrics.fleet import PageSpec
from pytest_llmperf.server_metrics.page_list import page_name
from pytest_llmperf.server_metrics.source import PROBE_LIMIT_S, metrics_client
from pytest_llmperf.specs.fleet_names import PageRole

__all__ = ["SIM_LISTING", "Discovery", "discover_pages"]

SIM_LISTING = "/llmperf/fleet"
_WORKER_ROLES = {
    "regular": PageRole.REPLICA,
    "prefill": PageRole.PREFILL,
    "decode": PageRole.DECODE,
}


@dataclass
class Discovery:
    """What a router said: its ``pages``, how they were found (``said``: ``"sim router
    (round_robin) at http://h:8000"``) and ``notes``."""

    pages: list[PageSpec] = field(default_factory=list)
    said: str = ""
    notes: list[str] = field(default_factory=list)


def discover_pages(
    endpoint: Endpoint,
    url: str,
    *,
    limit_s: float = PROBE_LIMIT_S,
    unlisted: PageRole = PageRole.ROUTER,
) -> Discovery:
    """The pages of the router at ``url`` (its base URL; a trailing ``/v1`` is dropped), each
    listing asked within ``limit_s`` (module docstring). ``unlisted``: the role of its own
    page when it lists nothing (``discover`` alone asks the endpoint, most often one server:
    then a replica)."""
    root = server_root(url).rstrip("/")
    shown = redact_url(root)
    tried: list[str] = []
    with metrics_client(endpoint, root + "/metrics", limit_s) as client:
        answer = _get_json(client, root + SIM_LISTING, tried)
        if isinstance(answer, dict) and isinstance(answer.get("pages"), list):
            return _sim(root, answer, shown)
        answer = _get_json(client, root + "/workers", tried)
        if isinstance(answer, dict) and isinstance(answer.get("workers"), list):
            return _workers(root, answer["workers"], shown, "GET /workers")
        answer = _get_json(client, root + "/list_workers", tried)
        if isinstance(answer, dict) and isinstance(answer.get("urls"), list):
            workers = [{"url": u} for u in answer["urls"]]
            return _workers(root, workers, shown, "GET /list_workers")
    return Discovery(
        [PageSpec(unlisted, page_name(root), root + "/metrics")],
        f"{shown} (no worker list)",
        [
            f"{shown} lists no workers ({'; '.join(tried)}): its own /metrics only, as a "
            f"{unlisted.value} page; name the workers' pages (replica=http://w1:8001/metrics,...)"
        ],
    )


def _get_json(client: BlockingMetadataClient, url: str, tried: list[str]) -> Any:
    """The JSON ``url`` answers, or None (why is added to ``tried``)."""
    path = url[url.find("/", url.find("//") + 2) :]
    try:
        answer: Answer = client.call("GET", url, retry=False)
    except MetadataCallError as exc:
        tried.append(f"GET {path}: {exc.message}")
        return None
    except Exception as exc:  # discovery never fails a session: it says why
        tried.append(f"GET {path}: {type(exc).__name__}: {exc}")
        return None
    if answer.status != 200:
        tried.append(f"GET {path}: {answer.status}")
        return None
    try:
        return answer.json()
    except ValueError:
        tried.append(f"GET {path}: not JSON")
        return None


def _sim(root: str, listing: dict[str, Any], shown: str) -> Discovery:
    out = Discovery(said=f"sim router ({listing.get('router', '?')}) at {shown}")
    for entry in listing["pages"]:
        if not isinstance(entry, dict) or not entry.get("metrics"):
            out.notes.append(f"{SIM_LISTING}: an entry without a metrics path: {entry!r}")
            continue
        try:
            role = PageRole(str(entry.get("role", "replica")))
        except ValueError:
            out.notes.append(f"{SIM_LISTING}: unknown role {entry.get('role')!r}: left out")
            continue
        url = urljoin(root + "/", str(entry["metrics"]).lstrip("/"))
        if str(entry["metrics"]).startswith(("http://", "https://")):
            url = str(entry["metrics"])
        out.pages.append(PageSpec(role, str(entry.get("name") or page_name(url)), url))
    return _unique(out)


def _workers(root: str, workers: list[Any], shown: str, how: str) -> Discovery:
    out = Discovery(said=f"router at {shown} ({how})")
    for worker in workers:
        spec = worker.get("spec") if isinstance(worker, dict) else None
        info = spec if isinstance(spec, dict) and "url" in spec else worker
        url = info.get("url") if isinstance(info, dict) else worker
        if not isinstance(url, str) or not url.startswith(("http://", "https://")):
            out.notes.append(f"{how}: a worker without an http(s) URL: {worker!r}"[:200])
            continue
        kind = info.get("worker_type", "regular") if isinstance(info, dict) else "regular"
        if isinstance(kind, dict):  # {"Prefill": {"bootstrap_port": ...}}
            kind = next(iter(kind), "regular")
        role = _WORKER_ROLES.get(str(kind).lower(), PageRole.REPLICA)
        page = server_root(url).rstrip("/") + "/metrics"
        out.pages.append(PageSpec(role, page_name(page), page))
    out.notes.append(
        f"the router at {shown} serves no Prometheus page of its own on its API port "
        "(--prometheus-port): add router=http://HOST:PORT/metrics to read it"
    )
    return _unique(out)


def _unique(found: Discovery) -> Discovery:
    """Two workers of one name: the second gets ``#2`` (a listing may name a page twice)."""
    seen: dict[str, int] = {}
    pages = []
    for page in found.pages:
        n = seen[page.name] = seen.get(page.name, 0) + 1
        pages.append(page if n == 1 else PageSpec(page.role, f"{page.name}#{n}", page.url))
    found.pages = pages
    return found
