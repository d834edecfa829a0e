"""The GPU suite: energy per token and GPU memory, read from a DCGM exporter's page.

Endpoint: the embedded simulator's ``gpu-2`` profile (Llama-3.1-8B on two simulated
H100s), chosen for this directory by overriding the ``llm_endpoint`` fixture, as
``fleet/`` does. The simulator serves its GPUs as NVIDIA's DCGM exporter would
(``/llmperf/dcgm/metrics``, listed in ``/llmperf/fleet`` with role ``gpu``:
docs/simulator.md, "GPU page"); ``--llm-server-metrics=auto`` (the default) reads it
beside the simulator's own ``/metrics``. Against a real server, name its node's
exporter (docs/gpu.md)::

    pytest example_suites/gpu --llm-endpoint=http://vllm:8000 \\
      --llm-server-metrics=replica=http://vllm:8000/metrics,gpu=http://node:9400/metrics

or, on the GPU machine itself, let NVML read them (``--llm-gpu=auto``, the default).
"""

from __future__ import annotations

import pytest

from pytest_llmperf import Endpoint
from pytest_llmperf.plugin.endpoints import EndpointPool

GPU_PROFILE = "sim:gpu-2"


@pytest.fixture(scope="session")
def llm_endpoint(llm_endpoints: EndpointPool) -> Endpoint:
    return llm_endpoints.get(GPU_PROFILE)
