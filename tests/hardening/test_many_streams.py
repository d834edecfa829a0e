"""Scale: a thousand concurrent streams in one process, without leaks.

The 10,000-stream version is ``benchmarks/hardening_scale.py`` (it prints
figures); this one keeps CI fast. The server is a cheap raw-asyncio child
process (``cheap_server.py``), not the simulator, so the client is what is
being tested. Honest checks: the server itself counts the streams it held
open at once and the connections it accepted (reuse), and after the run no
socket of the client is left open and no per-request record is left alive.
"""

from __future__ import annotations

import gc
import json
import os
import urllib.request

import pytest
from cheap_server import start_cheap_server

from pytest_llmperf.client.endpoint import Endpoint, Timeouts
from pytest_llmperf.client.fdlimits import ensure_descriptors
from pytest_llmperf.client.records import RequestRecord
from pytest_llmperf.errors import LlmPerfUsageError
from pytest_llmperf.loadgen.run import run_load
from pytest_llmperf.specs.run import RunSpec

STREAMS = 1000


def _hard_fd_limit() -> int:
    try:
        import resource
    except ImportError:  # pragma: no cover - Windows
        return 0
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    return 1 << 30 if hard == resource.RLIM_INFINITY else hard


@pytest.fixture(scope="module")
def cheap_server():
    proc, url = start_cheap_server(tokens=10, itl_ms=50)  # ~0.5 s per stream
    try:
        yield url
    finally:
        assert proc.stdin is not None
        proc.stdin.close()
        proc.wait(timeout=10)


def _stats(url: str) -> dict[str, int]:
    with urllib.request.urlopen(f"{url}/stats", timeout=10) as response:
        return json.loads(response.read())


def _open_sockets() -> int:
    fd_dir = "/proc/self/fd"
    count = 0
    for name in os.listdir(fd_dir):
        try:
            if os.readlink(os.path.join(fd_dir, name)).startswith("socket:"):
                count += 1
        except OSError:
            continue
    return count


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="needs /proc")
@pytest.mark.skipif(_hard_fd_limit() < 2 * STREAMS, reason="hard RLIMIT_NOFILE too low here")
@pytest.mark.asyncio
async def test_a_thousand_concurrent_streams_reuse_connections_and_leave_nothing(cheap_server):
    before = _stats(cheap_server)
    sockets_before = _open_sockets()
    endpoint = Endpoint.from_env(
        cheap_server, api_key_env=None, model="cheap", timeouts=Timeouts.parse("60")
    )
    spec = RunSpec.from_markers(
        ("synthetic",),
        {"requests": 2 * STREAMS, "input_tokens": 8, "output_tokens": 10},
        ("concurrency",),
        {"concurrency": STREAMS},
    )
    result = await run_load(endpoint, spec)
    after = _stats(cheap_server)

    assert result.counts["completed"] == 2 * STREAMS, result.errors
    assert result.metrics["error_rate"] == 0.0
    # The server saw (nearly) all streams open at once...
    assert after["peak_open"] >= 0.9 * STREAMS
    # ...and the second wave of requests rode the first wave's connections.
    assert after["accepted"] - before["accepted"] <= STREAMS + 16
    # Nothing of the run stays behind: sockets closed, per-request records freed.
    assert _open_sockets() <= sockets_before
    gc.collect()
    assert not [o for o in gc.get_objects() if type(o) is RequestRecord]


def test_the_os_refusing_descriptors_is_one_clear_usage_error():
    resource = pytest.importorskip("resource")
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY:
        pytest.skip("no finite hard limit to exceed")
    with pytest.raises(LlmPerfUsageError) as info:
        ensure_descriptors(hard + 1)
    text = str(info.value)
    assert f"{hard + 1}" in text and "ulimit -n" in text
    assert resource.getrlimit(resource.RLIMIT_NOFILE)[0] >= soft  # never lowered


@pytest.mark.asyncio
async def test_open_loop_never_waits_for_a_pooled_connection(cheap_server):
    """~150 streams in flight at 300 req/s: the pool must not cap them (a fixed pool of 64
    made requests queue in the client, and that wait was charged to the server's TTFT)."""
    before = _stats(cheap_server)
    endpoint = Endpoint.from_env(
        cheap_server, api_key_env=None, model="cheap", timeouts=Timeouts.parse("60")
    )
    spec = RunSpec.from_markers(
        ("synthetic",),
        {"duration": 1.5, "input_tokens": 8, "output_tokens": 10},
        ("constant",),
        {"rate": 300},
    )
    result = await run_load(endpoint, spec)
    after = _stats(cheap_server)
    assert result.counts["failed"] == 0, result.errors
    assert after["accepted"] - before["accepted"] > 100  # a capped pool would open <= 64
    # The server answers the first token at once: TTFT is the network, not a queue.
    assert result.metrics["ttft"].p(50) < 250
