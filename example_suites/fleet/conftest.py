"""The fleet suites: a router in front of replicas, judged replica by replica.

Endpoint: the embedded simulator's ``replicas-2-round-robin`` profile (two engines
behind its router, each response naming its replica in ``x-replica-id``), chosen
for this directory by overriding the ``llm_endpoint`` fixture, as ``methodology/``
does; the rest of ``example_suites`` measures the profile in ``pytest.ini``.

Against a real fleet, point the session at the router and name each replica's page
(docs/fleets.md; its section "Routers" says what each router exposes)::

    pytest example_suites/fleet --llm-endpoint=http://router:8000 \\
      --llm-server-metrics=discover,router=http://router:29000/metrics

(``discover``: ask the endpoint for its workers; vLLM's router and SGLang's gateway list
them, and serve their own page on a second port, given here as ``router=``);

where the router names no replica in its responses (vLLM's router, llm-d), the
``replica.*`` SLOs are inconclusive and say so: the fleet is judged as one.
"""

from __future__ import annotations

import pytest

from pytest_llmperf import Endpoint
from pytest_llmperf.plugin.endpoints import EndpointPool

FLEET_PROFILE = "sim:replicas-2-round-robin"


@pytest.fixture(scope="session")
def llm_endpoint(llm_endpoints: EndpointPool) -> Endpoint:
    return llm_endpoints.get(FLEET_PROFILE)
