"""The GPU suite: energy per token and GPU memory, read from a DCGM exporter's page.

Endpoint: the embedded simulator's ``gpu-2`` profile (Llama-3.1-8B on two simulated
H100s), chosen for this directory by overriding the ``llm_endpoint`` fixture, as
``fleet/`` does. The simulator serves its GPUs as NVIDIA's DCGM exporter would
(``/llmperf/dcgm/metrics``, listed in ``/llmperf/fleet`` with role ``gpu``:
docs/simulator.md, "GPU page"), which the session reads where it reads a list of pages::

    pytest example_suites/gpu --llm-server-metrics=discover

Without a page list (``pytest example_suites`` alone reads the endpoint's own
``/metrics`` only) there are no GPU figures to judge: the suite is skipped, saying how
to run it. Against a real server, name its node's exporter (docs/gpu.md)::

    pytest example_suites/gpu --llm-endpoint=http://vllm:8000 \\
      --llm-server-metrics=replica=http://vllm:8000/metrics,gpu=http://node:9400/metrics

or, on the GPU machine itself, let NVML read them (``--llm-gpu=auto``, the default).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_llmperf import Endpoint
from pytest_llmperf.plugin.endpoints import EndpointPool
from pytest_llmperf.plugin.state import STATE_KEY
from pytest_llmperf.server_metrics.source import parse_option

GPU_PROFILE = "sim:gpu-2"
HOW = "pytest example_suites/gpu --llm-server-metrics=discover"


@pytest.fixture(scope="session")
def llm_endpoint(llm_endpoints: EndpointPool) -> Endpoint:
    return llm_endpoints.get(GPU_PROFILE)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Skip this directory's tests where the session reads no page list (no GPU page)."""
    if parse_option(config.stash[STATE_KEY].options.server_metrics).mode == "fleet":
        return
    here = Path(__file__).parent
    skip = pytest.mark.skip(reason=f"no GPU page read: run {HOW}")
    for item in items:
        if here in item.path.parents:
            item.add_marker(skip)
