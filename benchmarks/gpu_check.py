"""The device check of issue 41 (item 5): NVML sampling on a real GPU, as the plugin does it.

Run it as is on a machine with an NVIDIA GPU (``pip install -e .[gpu]``; PyTorch or CuPy
for the busy loop, where installed)::

    python benchmarks/gpu_check.py                 # ~1-2 minutes
    python benchmarks/gpu_check.py --busy-s 60 --json gpu_check.json

What it does, and prints:

1. the device: each GPU's name, memory, whether it has an energy counter; the driver and
   NVML versions (without a GPU, or NVML: it says ``no GPU`` and why, and exits 0);
2. ``--idle-s`` seconds of reads at rest (the sampler alone, 10 Hz);
3. a run of the load generator against the embedded simulator (constant rate, as long
   as the busy loop) through the same code as ``--llm-gpu=auto`` (a ``LoadRun`` with
   this machine's GPUs: its ``result.gpu``), while a GPU busy loop of known duration runs
   in a thread: matrix multiplications on GPU 0 through PyTorch, else CuPy (neither: it
   says so, and the load alone runs; ``nvidia-smi`` itself puts no load on a GPU);
   meanwhile ``nvidia-smi --query-gpu=power.draw,memory.used --format=csv`` is asked a
   few times and set beside the sampler's nearest read;
4. ``--idle-s`` seconds at rest again.

Then the figures: energy and mean power of each phase (energy rising with the load: the
busy phase's joules per second over the idle's), the energy counter against power
integrated over the same reads, NVML against nvidia-smi, energy per output token of the
run, and the sampler's CPU cost (its thread's CPU time per read, and the share of one
core at 10 Hz). Record what it printed in docs/gpu.md ("Seen on a GPU").
"""

from __future__ import annotations

import argparse
import asyncio
import json
import platform
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pytest_llmperf.client.endpoint import Endpoint, Timeouts
from pytest_llmperf.gpu.energy import integrated_energy_j
from pytest_llmperf.gpu.local import LocalGpus, local_gpus
from pytest_llmperf.gpu.nvml import shared_nvml
from pytest_llmperf.gpu.sampler import GpuRecording, GpuSampler
from pytest_llmperf.loadgen import LoadRun
from pytest_llmperf.sim import SimServer
from pytest_llmperf.specs.load import LoadSpec
from pytest_llmperf.specs.run import RunSpec


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--idle-s", type=float, default=5.0, help="seconds at rest, each side")
    parser.add_argument("--busy-s", type=float, default=30.0, help="seconds of the busy loop")
    parser.add_argument("--rate", type=float, default=20.0, help="requests/s to the simulator")
    parser.add_argument("--size", type=int, default=8192, help="the busy loop's matrix side")
    parser.add_argument("--json", type=Path, help="also write the figures there")
    args = parser.parse_args()
    out: dict[str, Any] = {"python": sys.version.split()[0], "machine": platform.machine()}
    load = shared_nvml()
    if load.nvml is None:
        print(f"no GPU: {load.note}")
        out["gpu"] = None
        out["note"] = load.note
        _write(args.json, out)
        return 0
    lib = load.nvml
    local = local_gpus("auto", nvml=load)
    out["device"] = _device(lib, local)
    for line in out["device"]["lines"]:
        print(line)
    idle = _phase(local, args.idle_s)
    print(_said("idle before", idle))
    busy, run, smi = asyncio.run(_busy_phase(local, args))
    print(_said("busy", busy))
    after = _phase(local, args.idle_s)
    print(_said("idle after", after))
    out["phases"] = {"idle_before": idle, "busy": busy, "idle_after": after}
    out["run"] = run
    out["nvidia_smi"] = smi
    rest = [p["j_per_s"] for p in (idle, after) if p["j_per_s"]]
    if rest and busy["j_per_s"]:
        ratio = busy["j_per_s"] / (sum(rest) / len(rest))
        out["busy_over_idle"] = ratio
        print(
            f"energy rises with the load: busy {busy['j_per_s']:.1f} J/s, at rest "
            f"{sum(rest) / len(rest):.1f} J/s: x{ratio:.2f}"
        )
    for row in smi:
        print(
            f"nvidia-smi {row['smi_power_w']:.1f} W, {row['smi_memory_mb']:.0f} MiB; NVML "
            f"read {row['nvml_power_w']:.1f} W, {row['nvml_memory_mb']:.0f} MiB "
            f"({row['dt_ms']:.0f} ms apart)"
        )
    if run.get("energy_per_output_token_j") is not None:
        print(
            f"run: {run['completed']} requests, {run['output_tokens']:.0f} output tokens "
            f"({run['output_tokens_from']}), {run['energy_j']:.1f} J, "
            f"{run['energy_per_output_token_j']:.4f} J per output token"
        )
    cost = busy.get("cpu_ms_per_read")
    if cost is not None:
        print(
            f"sampler CPU: {cost:.3f} ms per read of {len(local.gpus)} GPU(s), "
            f"{cost / 1000 / local.interval_s:.2%} of a core at 10 Hz"
        )
    _write(args.json, out)
    return 0


def _device(lib: Any, local: LocalGpus) -> dict[str, Any]:
    m = lib.module
    driver = _call(m, "nvmlSystemGetDriverVersion")
    nvml_version = _call(m, "nvmlSystemGetNVMLVersion")
    read = local.read
    assert read is not None
    tick = read()
    lines = [f"driver {driver}, NVML {nvml_version}, {lib.count} GPU(s)"]
    gpus = []
    for gpu, r in tick.readings.items():
        counter = r.energy_j is not None
        lines.append(
            f"GPU {gpu.id}: {gpu.name} ({gpu.uuid}), {r.memory_total_mb or 0:.0f} MiB, "
            f"{'an' if counter else 'no'} energy counter, {r.power_w or 0:.1f} W now"
        )
        gpus.append({"id": gpu.id, "name": gpu.name, "energy_counter": counter})
    return {"driver": driver, "nvml": nvml_version, "gpus": gpus, "lines": lines}


def _call(module: Any, name: str) -> str:
    try:
        value = getattr(module, name)()
    except Exception as exc:
        return f"? ({exc})"
    return value.decode() if isinstance(value, bytes) else str(value)


def _phase(local: LocalGpus, seconds: float) -> dict[str, Any]:
    sampler = local.sampler()
    assert sampler is not None
    sampler.start()
    time.sleep(seconds)
    return _figures(sampler.stop())


def _figures(recording: GpuRecording) -> dict[str, Any]:
    """Energy by each GPU's counter and by its power integrated, over the same reads."""
    ticks = recording.ticks
    span_s = (ticks[-1].at_ns - ticks[0].at_ns) / 1e9 if len(ticks) > 1 else 0.0
    counter = 0.0
    integrated = 0.0
    counted = True
    for gpu in ticks[0].readings if ticks else ():
        reads = [t.readings[gpu] for t in ticks if gpu in t.readings]
        energies = [r.energy_j for r in reads if r.energy_j is not None]
        if len(energies) >= 2:
            counter += energies[-1] - energies[0]
        else:
            counted = False
        integrated += integrated_energy_j([(r.at_ns, r.power_w) for r in reads]) or 0.0
    energy = counter if counted else integrated
    return {
        "reads": len(ticks),
        "span_s": span_s,
        "energy_counter_j": counter if counted else None,
        "energy_integrated_j": integrated,
        "counter_vs_integrated": (counter / integrated - 1) if counted and integrated else None,
        "j_per_s": energy / span_s if span_s else None,
        "cpu_ms_per_read": (
            recording.cpu_s_per_read * 1000 if recording.cpu_s_per_read is not None else None
        ),
        "failures": recording.failures,
    }


def _said(name: str, p: dict[str, Any]) -> str:
    agree = p["counter_vs_integrated"]
    return (
        f"{name}: {p['reads']} reads over {p['span_s']:.1f} s, "
        + (f"counter {p['energy_counter_j']:.1f} J, " if p["energy_counter_j"] is not None else "")
        + f"power integrated {p['energy_integrated_j']:.1f} J"
        + (f" ({agree:+.2%} apart)" if agree is not None else "")
        + (f", {p['j_per_s']:.1f} W mean" if p["j_per_s"] else "")
    )


async def _busy_phase(
    local: LocalGpus, args: argparse.Namespace
) -> tuple[dict[str, Any], dict[str, Any], list[dict[str, Any]]]:
    """The load against the simulator with the busy loop beside it; the phase's own reads
    (a sampler of its own, so the phase's figures and the run's come from the same code)."""
    stop = threading.Event()
    busy: dict[str, Any] = {}
    loop_thread = threading.Thread(target=_busy_loop, args=(args.size, stop, busy), daemon=True)
    sampler = local.sampler()
    assert sampler is not None
    sampler.start()
    loop_thread.start()
    smi: list[dict[str, Any]] = []
    smi_thread = threading.Thread(
        target=_ask_smi, args=(sampler, args.busy_s, smi, stop), daemon=True
    )
    smi_thread.start()
    requests = max(1, int(args.rate * args.busy_s))
    spec = RunSpec(
        "synthetic",
        {"input_tokens": 128, "output_tokens": 64},
        0,
        LoadSpec.parse("constant", {"rate": args.rate}),
        requests,
    )
    async with SimServer("fixed", ttft_ms=20.0, itl_ms=5.0) as sim:
        endpoint = Endpoint(sim.url + "/v1", timeouts=Timeouts.from_seconds(30))
        result = await LoadRun(endpoint, spec, gpus=local).execute()
    stop.set()
    loop_thread.join(30)
    smi_thread.join(30)
    phase = _figures(sampler.stop())
    phase["busy_loop"] = {k: v for k, v in busy.items() if k != "error"} or None
    if busy.get("error"):
        print(f"busy loop: {busy['error']}")
    else:
        print(
            f"busy loop ({busy.get('library')}): {busy.get('matmuls')} matmuls of "
            f"{args.size}x{args.size} in {busy.get('seconds', 0):.1f} s"
        )
    gpu = result.gpu.to_dict() if result.gpu is not None else {}
    run = {
        "completed": result.counts["completed"],
        "duration_s": result.duration_s,
        "energy_j": gpu.get("energy_j"),
        "energy_per_output_token_j": gpu.get("energy_per_output_token_j"),
        "output_tokens": gpu.get("output_tokens"),
        "output_tokens_from": gpu.get("output_tokens_from"),
        "power_w": gpu.get("power_w"),
        "memory_used_mb": gpu.get("memory_used_mb"),
        "notes": gpu.get("notes"),
    }
    return phase, run, smi


def _busy_loop(size: int, stop: threading.Event, out: dict[str, Any]) -> None:
    """Matrix multiplications on GPU 0 until ``stop`` (PyTorch, else CuPy)."""
    try:
        import torch

        if not torch.cuda.is_available():
            raise ImportError("torch without CUDA")
        a = torch.randn(size, size, device="cuda", dtype=torch.float16)
        b = torch.randn(size, size, device="cuda", dtype=torch.float16)
        sync = torch.cuda.synchronize
        library = f"torch {torch.__version__}"
    except ImportError:
        try:
            import cupy

            a = cupy.random.rand(size, size, dtype=cupy.float32)
            b = cupy.random.rand(size, size, dtype=cupy.float32)
            sync = cupy.cuda.Device(0).synchronize
            library = f"cupy {cupy.__version__}"
        except ImportError:
            out["error"] = "no PyTorch with CUDA and no CuPy: no busy loop (the load alone)"
            return
    began = time.monotonic()
    n = 0
    while not stop.is_set():
        for _ in range(8):
            a @ b
        sync()
        n += 8
    out.update(library=library, matmuls=n, seconds=time.monotonic() - began)


def _ask_smi(
    sampler: GpuSampler, seconds: float, rows: list[dict[str, Any]], stop: threading.Event
) -> None:
    """``nvidia-smi``'s power and memory of GPU 0 a few times, beside the nearest read."""
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return
    for _ in range(4):
        if stop.wait(max(1.0, seconds / 5)):
            return
        asked = time.monotonic_ns()
        try:
            text = subprocess.run(
                [
                    smi,
                    "--query-gpu=power.draw,memory.used",
                    "--format=csv,noheader,nounits",
                    "--id=0",
                ],
                capture_output=True,
                text=True,
                timeout=10,
                check=True,
            ).stdout
            power, memory = (float(x) for x in text.strip().splitlines()[0].split(","))
        except (subprocess.SubprocessError, ValueError, IndexError):
            continue
        ticks = list(sampler.recording.ticks)
        if not ticks:
            continue
        near = min(ticks, key=lambda t: abs(t.at_ns - asked))
        reading = next(r for g, r in near.readings.items() if g.id == "0")
        rows.append(
            {
                "smi_power_w": power,
                "smi_memory_mb": memory,
                "nvml_power_w": reading.power_w,
                "nvml_memory_mb": reading.memory_used_mb,
                "dt_ms": abs(near.at_ns - asked) / 1e6,
            }
        )


def _write(path: Path | None, out: dict[str, Any]) -> None:
    if path is not None:
        path.write_text(json.dumps(out, indent=2, default=str), encoding="utf-8")


if __name__ == "__main__":
    sys.exit(main())
