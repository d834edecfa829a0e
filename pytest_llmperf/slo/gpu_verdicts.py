"""Verdicts on the GPUs' figures of a run (``gpu.power_w.mean < 300W``,
``energy_per_output_token_j < 0.5J``: :mod:`pytest_llmperf.specs.gpu_names`).

Each is one value per run, read from the run's ``gpu`` block
(:class:`~pytest_llmperf.gpu.figures.GpuFigures`) and compared with the target as
observed: there is nothing to resample (a run's energy is one number, not a sample of
requests). Like the server process's (:func:`~.verdicts.evaluate_process`), a GPU SLO is
a whole run's (never per stage or per served model: the GPUs are sampled over the run),
and, being about the GPUs rather than the load, it is not made inconclusive by a
generator-bound run.

Inconclusive, never a pass, with why:

- no ``gpu`` block: no GPU was read for this run (``--llm-gpu=off``, no NVIDIA GPU or no
  ``nvidia-ml-py`` here, and no server-metrics page with the ``gpu`` role);
- a figure that is None: what was missing, from the block itself (a GPU with no energy
  counter and too few power samples to integrate, a GPU that gave no power, no output
  tokens to divide by), with the block's own notes.
"""

from __future__ import annotations

import math

from pytest_llmperf.gpu.figures import GpuDevice, GpuFigures
from pytest_llmperf.results.run_result import RunResult
from pytest_llmperf.slo.verdict_record import SloVerdict, Verdict
from pytest_llmperf.specs.gpu_names import GPU_METRICS, gpu_value
from pytest_llmperf.specs.slo import Slo

__all__ = ["NO_GPU", "evaluate_gpu", "gpu_missing"]

NO_GPU = (
    "no GPU read for this run (--llm-gpu=off, no NVIDIA GPU or nvidia-ml-py here, "
    "and no server-metrics page with the gpu role)"
)


def evaluate_gpu(slo: Slo, result: RunResult) -> SloVerdict:
    """Judge a GPU SLO on ``result``'s ``gpu`` block: its one value against the target."""
    block = result.gpu

    def judged(verdict: Verdict, observed: float | None, reason: str = "") -> SloVerdict:
        samples = sum(d.samples for d in block.devices) if block is not None else 0
        return SloVerdict(
            slo.expr, observed, slo.target, slo.unit, verdict, result.label, samples, reason
        )

    if block is None:
        return judged(Verdict.INCONCLUSIVE, None, NO_GPU)
    observed = gpu_value(block.to_dict(), slo.metric)
    if observed is None or math.isnan(observed):
        return judged(Verdict.INCONCLUSIVE, None, gpu_missing(slo.metric, block))
    observed = round(observed, 6)
    return judged(Verdict.PASS if slo.holds(observed) else Verdict.FAIL, observed)


def _names(devices: list[GpuDevice]) -> str:
    return ", ".join(f"GPU {d.id}" + (f" on {d.host}" if d.host else "") for d in devices)


def gpu_missing(metric: str, block: GpuFigures) -> str:
    """Why ``block`` has no value for GPU figure ``metric`` (what was missing, then the
    block's own notes)."""
    if metric not in GPU_METRICS:
        raise KeyError(metric)
    devices = block.devices
    if not devices:
        why = "the gpu block lists no GPU"
    elif metric in ("gpu.energy_j", "energy_per_output_token_j") and block.energy_j is None:
        lacking = [d for d in devices if d.energy_j is None]
        why = (
            f"no energy for {_names(lacking)}: no energy counter and too few power samples "
            f"to integrate ({', '.join(str(d.samples) for d in lacking)} samples)"
        )
    elif metric == "energy_per_output_token_j":
        why = (
            "no output tokens to divide by (the server counted none and the client's usage "
            "had none)"
            if not block.output_tokens
            else "no energy per output token"
        )
    elif metric.startswith("gpu.power_w"):
        lacking = [d for d in devices if d.power_w_mean is None or d.power_w_max is None]
        why = f"no power read from {_names(lacking) or 'the GPUs'}"
    else:
        what = {
            "gpu.memory_used_mb.max": "memory used",
            "gpu.util": "utilisation",
            "gpu.temperature_c.max": "temperature",
        }[metric]
        why = f"no GPU gave its {what} ({_names(devices)})"
    notes = "; ".join(block.notes)
    return f"{metric}: {why}" + (f" ({notes})" if notes else "")
