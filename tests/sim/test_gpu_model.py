"""The simulated GPUs' model (sim/gpu_model.py) on ticks the test chooses: no server.

The energy counter is the integral of the power on the simulator's clock (piecewise
constant between ticks, and up to the moment it is read); power, utilisation and
memory follow the engine's load; each GPU is its own, the same for the same seed; the
profile's GPU keys are checked; a virtual-time run refuses them.
"""

from __future__ import annotations

import pytest

from pytest_llmperf.sim import ProfileError, load_profile, run_virtual
from pytest_llmperf.sim.gpu_model import BUSY_SHARE, UTIL_WINDOW_S, GpuMeter, gpu_power_w
from pytest_llmperf.sim.streams import BackendStats


class Load:
    """The engines' state, set by the test between ticks."""

    def __init__(self, engines: int = 1) -> None:
        self.stats = [BackendStats() for _ in range(engines)]

    def __call__(self) -> list[BackendStats]:
        return self.stats


def meter(
    profile: str = "gpu-2", engines: int = 1, seed: int = 0, **keys: object
) -> tuple[GpuMeter, Load]:
    load = Load(engines)
    m = GpuMeter(load_profile(profile, **keys), load, engines, seed)
    m.last_t = m.last_tick = 100.0  # as start() would, at loop time 100 s
    return m, load


def test_energy_is_power_integrated_over_the_clock_between_ticks_and_up_to_a_read() -> None:
    m, load = meter()
    start = [g.energy_mj for g in m.gpus]
    idle = [g.power_w for g in m.gpus]
    m.tick(100.5)  # 0.5 s idle
    load.stats[0] = BackendStats(running=64, kv_usage=0.25)
    m.tick(101.0)  # another 0.5 s idle (the power of the last tick), then busy
    busy = [g.power_w for g in m.gpus]
    gpus = m.read(101.25)  # 0.25 s busy, read between ticks
    for g, e0, p0, p1 in zip(gpus, start, idle, busy, strict=True):
        assert g.energy_mj - e0 == pytest.approx(1000 * (p0 * 1.0 + p1 * 0.25))
    m.tick(101.5)  # the read moved the counters on: the tick adds only the last 0.25 s
    for g, e0, p0, p1 in zip(m.gpus, start, idle, busy, strict=True):
        assert g.energy_mj - e0 == pytest.approx(1000 * (p0 * 1.0 + p1 * 0.5))


def test_power_runs_from_idle_through_one_sequence_to_a_full_batch() -> None:
    p = load_profile("gpu-2")
    idle = gpu_power_w(p, BackendStats())
    one = gpu_power_w(p, BackendStats(running=1))
    half = gpu_power_w(p, BackendStats(running=p.max_num_seqs // 2))
    full = gpu_power_w(p, BackendStats(running=p.max_num_seqs * 2))  # capped at a full batch
    span = p.gpu_max_w - p.gpu_idle_w
    assert idle == p.gpu_idle_w
    assert one == pytest.approx(
        p.gpu_idle_w + span * (BUSY_SHARE + (1 - BUSY_SHARE) / p.max_num_seqs)
    )
    assert idle < one < half < full == p.gpu_max_w


def test_utilisation_memory_clock_and_temperature_follow_the_load() -> None:
    m, load = meter()
    p = m.profile
    rest = [(g.memory_used_mb, g.temperature_c, g.sm_clock_mhz) for g in m.gpus]
    load.stats[0] = BackendStats(running=8, kv_usage=0.5)
    ticks = round(UTIL_WINDOW_S / 0.01)
    t = 100.0
    for _ in range(ticks // 2):
        t += 0.01
        m.tick(t)
    assert all(40 <= g.util_pct <= 60 for g in m.gpus)  # busy half of the window so far
    for _ in range(ticks):
        t += 0.01
        m.tick(t)
    for g, (mem0, temp0, clock0) in zip(m.gpus, rest, strict=True):
        assert g.util_pct == 100.0
        assert g.memory_used_mb == pytest.approx(mem0 + 0.5 * p.gpu_kv_mb)
        assert g.temperature_c > temp0 + 1  # warming, with a lag
        assert g.sm_clock_mhz > clock0
    load.stats[0] = BackendStats()
    for _ in range(ticks):
        t += 0.01
        m.tick(t)
    assert all(g.util_pct == 0.0 and g.power_w < p.gpu_idle_w * 1.05 for g in m.gpus)


def test_each_gpu_is_its_own_and_the_same_for_the_same_seed() -> None:
    a, _ = meter(seed=7)
    b, _ = meter(seed=7)
    c, _ = meter(seed=8)
    ids = [g.uuid for g in a.gpus]
    assert len(set(ids)) == 2 and ids == [g.uuid for g in b.gpus] != [g.uuid for g in c.gpus]
    assert a.gpus[0].power_w != a.gpus[1].power_w  # ±2 % each
    assert all(abs(g.power_w / a.profile.gpu_idle_w - 1) <= 0.02 for g in a.gpus)
    assert [g.energy_mj for g in a.gpus] == [g.energy_mj for g in b.gpus]


def test_several_engines_share_the_gpus_in_turn() -> None:
    m, load = meter("replicas-2-round-robin", engines=2, gpus=4)
    assert [g.engine for g in m.gpus] == [0, 0, 1, 1]
    load.stats[1] = BackendStats(running=4, kv_usage=0.1)
    m.tick(100.01)
    idle_w, busy_w = m.profile.gpu_idle_w, gpu_power_w(m.profile, load.stats[1])
    assert [
        round(g.power_w / w, 2)
        for g, w in zip(m.gpus, (idle_w, idle_w, busy_w, busy_w), strict=True)
    ] == [round(g.power_scale, 2) for g in m.gpus]


@pytest.mark.parametrize(
    ("keys", "bad"),
    [
        ({"gpus": 3, "replicas": 2}, "'gpus': expected a multiple of the profile's 2 engines"),
        ({"gpus": -1}, "'gpus': must not be negative"),
        ({"gpu_max_w": 50.0}, "'gpu_max_w': must be at least gpu_idle_w"),
        ({"gpu_kv_mb": 80000.0}, "'gpu_kv_mb': gpu_weights_mb + gpu_kv_mb must fit"),
        ({"gpu_name": 'H100 "SXM"'}, "'gpu_name': expected a GPU model's name"),
        ({"gpu_memory_mb": 0}, "'gpu_memory_mb': must be positive"),
    ],
)
def test_bad_gpu_keys_are_refused_with_the_key_and_value(keys: dict[str, object], bad: str) -> None:
    with pytest.raises(ProfileError, match="profile 'gpu-2': bad value") as err:
        load_profile("gpu-2", **keys)
    assert bad in str(err.value)


def test_a_virtual_time_run_refuses_gpus_naming_the_keys() -> None:
    with pytest.raises(
        ValueError, match=r"profile 'gpu-2': gpus=2: the simulated GPUs \(gpus, gpu_name"
    ):
        run_virtual("gpu-2", load="poisson", rate=5, duration=1)
    assert run_virtual("gpu-2", gpus=0, load="poisson", rate=5, duration=1).summary
