"""``discover=URL``: a router asked for its workers, each worker's page probed at preflight.

A stub router on 127.0.0.1 (aiohttp) answers each router's listing as its source
writes it: the simulator's ``GET /llmperf/fleet``, vLLM's router / SGLang's gateway
``GET /workers`` and the older ``GET /list_workers``, or nothing at all; its workers'
pages are vLLM pages (prom_pages.py), one of them 404.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from aiohttp import web
from loopback import ServeApp, aiohttp_apps
from prom_pages import VllmPage

from pytest_llmperf.client.endpoint import Endpoint
from pytest_llmperf.server_metrics.fleet import PageSpec
from pytest_llmperf.server_metrics.fleet_source import resolve_fleet, resolve_metrics
from pytest_llmperf.server_metrics.source import ServerMetricsSource
from pytest_llmperf.server_metrics.summary import ServerFamily
from pytest_llmperf.specs.fleet_names import PageRole


def router_app(listing: str) -> web.Application:
    """A router whose ``listing`` is ``sim``, ``workers``, ``list_workers`` or ``none``; its
    workers ``/w/0`` and ``/w/1`` (vLLM pages) and ``/w/gone`` (404) on the same port."""
    pages = {"0": VllmPage(started=1.0).text(), "1": VllmPage(started=2.0).text()}
    app = web.Application()

    async def page(request: web.Request) -> web.Response:
        text = pages.get(request.match_info["k"])
        if text is None:
            return web.Response(status=404, text="Not Found")
        return web.Response(text=text, content_type="text/plain")

    def base(request: web.Request) -> str:
        return f"http://{request.host}"

    async def sim(request: web.Request) -> web.Response:
        return web.json_response(
            {
                "router": "round_robin",
                "pages": [
                    {"role": "replica", "name": "0", "metrics": "/w/0/metrics"},
                    {"role": "replica", "name": "1", "metrics": "w/1/metrics"},
                    {"role": "replica", "name": "2", "metrics": "/w/gone/metrics"},
                    {"role": "tpu", "name": "g", "metrics": "/g"},
                ],
            }
        )

    async def workers(request: web.Request) -> web.Response:
        b = base(request)
        return web.json_response(
            {
                "workers": [
                    {"url": f"{b}/w/0", "worker_type": "prefill", "bootstrap_port": 8998},
                    {"spec": {"url": f"{b}/w/1", "worker_type": "decode"}},
                    {"url": 7},
                ],
                "total": 3,
            }
        )

    async def list_workers(request: web.Request) -> web.Response:
        return web.json_response({"urls": [f"{base(request)}/w/0"]})

    app.router.add_get("/w/{k}/metrics", page)
    if listing == "sim":
        app.router.add_get("/llmperf/fleet", sim)
    if listing == "workers":
        app.router.add_get("/workers", workers)
    if listing == "list_workers":
        app.router.add_get("/list_workers", list_workers)
    return app


@pytest.fixture
def start() -> Iterator[ServeApp]:
    with aiohttp_apps() as serve:
        yield serve


def endpoint(url: str) -> Endpoint:
    return Endpoint(url + "/v1")


def test_the_simulators_listing_gives_each_replica_its_page(start: ServeApp) -> None:
    root = start(router_app("sim"))
    fleet = resolve_fleet(endpoint(root), f"discover={root}/v1,0.5")
    assert fleet.discovered == f"sim router (round_robin) at {root}"
    assert [(p.spec.role, p.spec.name) for p in fleet.pages] == [
        (PageRole.REPLICA, "0"),
        (PageRole.REPLICA, "1"),
        (PageRole.REPLICA, "2"),
    ]
    zero, one, two = fleet.pages
    assert zero.source == ServerMetricsSource(f"{root}/w/0/metrics", 0.5, ServerFamily.VLLM)
    assert one.source is not None and one.source.url == f"{root}/w/1/metrics"
    assert two.source is None and two.failure is not None and "404" in two.failure
    assert any("unknown role 'tpu'" in n for n in fleet.notes)
    said = fleet.describe()
    assert said.startswith(f"fleet of 3 pages (discovered: sim router (round_robin) at {root}): ")
    assert "replica 0 (vllm), replica 1 (vllm), replica 2 (none: GET " in said
    assert said.endswith(" every 0.5 s")


def test_vllm_routers_workers_list_gives_roles_and_given_pages_come_first(start: ServeApp) -> None:
    root = start(router_app("workers"))
    given = f"decode:mine={root}/w/1/metrics"
    source, note = resolve_metrics(endpoint(root), f"{given},discover={root}")
    assert source is not None and note == source.describe()
    assert [p.spec for p in source.pages] == [  # type: ignore[union-attr]
        PageSpec(PageRole.DECODE, "mine", f"{root}/w/1/metrics"),
        PageSpec(PageRole.PREFILL, root.removeprefix("http://"), f"{root}/w/0/metrics"),
        PageSpec(PageRole.DECODE, f"{root.removeprefix('http://')}#2", f"{root}/w/1/metrics"),
    ]
    notes = source.notes  # type: ignore[union-attr]
    assert any("without an http(s) URL" in n for n in notes)
    assert any("--prometheus-port" in n for n in notes)
    assert source.discovered == f"router at {root} (GET /workers)"  # type: ignore[union-attr]


def test_the_older_list_workers_and_a_router_that_lists_nothing(start: ServeApp) -> None:
    root = start(router_app("list_workers"))
    fleet = resolve_fleet(endpoint(root), f"discover={root}")
    assert [p.spec.role for p in fleet.pages] == [PageRole.REPLICA]
    assert fleet.pages[0].source is not None
    bare = start(router_app("none"))
    fleet = resolve_fleet(endpoint(root), f"discover={bare}")
    (own,) = fleet.pages
    assert own.spec == PageSpec(PageRole.ROUTER, bare.removeprefix("http://"), f"{bare}/metrics")
    assert own.source is None and own.failure is not None and "404" in own.failure
    (note,) = fleet.notes
    assert f"{bare} lists no workers" in note and "as a router page" in note
    assert "GET /llmperf/fleet: 404" in note and "GET /list_workers: 404" in note
    # discover alone asks the endpoint itself: a server that lists nothing is one replica
    (own,) = resolve_fleet(endpoint(bare), "discover").pages
    assert own.spec == PageSpec(PageRole.REPLICA, bare.removeprefix("http://"), f"{bare}/metrics")
