"""The simulator's leak fault (``leak_mb_per_request``): each request keeps that many MB of
touched memory, so the process's resident set really grows; the default leaks nothing."""

from __future__ import annotations

import httpx
import psutil
import pytest

from pytest_llmperf.sim import start_sim_process
from pytest_llmperf.sim.profiles import ProfileError, load_profile

_MB = 1024 * 1024


def _rss_mb(pid: int) -> float:
    return psutil.Process(pid).memory_info().rss / _MB


def _send(url: str, model: str, n: int) -> None:
    with httpx.Client(base_url=url, timeout=10) as client:
        for _ in range(n):
            r = client.post(
                "/v1/completions",
                json={"model": model, "prompt": "hello", "max_tokens": 2, "stream": False},
            )
            assert r.status_code == 200, r.text


def test_the_leak_is_a_profile_key_with_no_leak_by_default() -> None:
    assert load_profile("fixed").leak_mb_per_request == 0.0
    assert load_profile("fixed", leak_mb_per_request="2").leak_mb_per_request == 2.0
    with pytest.raises(ProfileError, match=r"leak_mb_per_request.*must not be negative"):
        load_profile("fixed", leak_mb_per_request="-1")


@pytest.mark.parametrize(("leak_mb", "at_least", "at_most"), [(4, 70.0, None), (0, None, 15.0)])
def test_each_request_grows_the_resident_set_by_its_leak(
    leak_mb: float, at_least: float | None, at_most: float | None
) -> None:
    """20 requests at 4 MB each: about 80 MB more resident (set with ``--set``, as on the
    command line); without the fault the same requests leave it nearly where it was."""
    overrides = {"leak_mb_per_request": leak_mb, "ttft_ms": 0, "itl_ms": 0}
    with start_sim_process("fixed", overrides=overrides) as sim:
        _send(sim.url, "sim-fixed", 3)  # the first requests' one-off allocations
        before = _rss_mb(sim.pid)
        _send(sim.url, "sim-fixed", 20)
        growth = _rss_mb(sim.pid) - before
    if at_least is not None:
        assert growth >= at_least
    if at_most is not None:
        assert growth < at_most
