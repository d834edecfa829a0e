"""A run's ``gpu`` block from every source's reads: :func:`run_figures`.

Each source (this machine's NVML or amdsmi sampler, each ``gpu`` page of
``--llm-server-metrics``) gives its reads of the run as :class:`SourceReads`; here they
become :class:`~.figures.GpuFigures`: every GPU (:func:`~.energy.tick_devices`), the
largest summed power where one source read all the GPUs together, the output tokens
that energy per token divides by (the server's own generation-token counter over the run
where its metrics have it, else the client's usage totals), and the notes. A GPU seen
by two sources (NVML here and a DCGM exporter on this same machine: one UUID) is
counted once, from the first source.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from pytest_llmperf.gpu.energy import summed_power_max, tick_devices
from pytest_llmperf.gpu.figures import GpuFigures, TokenSource
from pytest_llmperf.gpu.readings import GpuTick
from pytest_llmperf.gpu.sampler import GpuRecording

__all__ = ["SourceReads", "local_reads", "run_figures"]


@dataclass
class SourceReads:
    """One source's reads of a run: ``source`` as the report names it (``"nvml"``,
    ``"dcgm http://node:9400/metrics"``), its ``ticks`` in time order, its interval and
    what a reader should know (``notes``: a page that failed)."""

    source: str
    ticks: list[GpuTick] = field(default_factory=list)
    interval_s: float | None = None
    notes: list[str] = field(default_factory=list)


def local_reads(recording: GpuRecording, source: str) -> SourceReads:
    """This machine's sampler's reads as a :class:`SourceReads`."""
    notes = []
    if recording.failures:
        notes.append(
            f"{source}: {recording.failures} of {recording.failures + len(recording.ticks)} "
            f"reads failed (first: {recording.failure})"
        )
    return SourceReads(source, list(recording.ticks), recording.interval_s, notes)


def run_figures(
    sources: Sequence[SourceReads],
    t0_ns: int,
    *,
    server_tokens: float | None = None,
    client_tokens: float | None = None,
    stages: bool = False,
) -> GpuFigures | None:
    """The run's GPU figures (None: no source read any GPU, and no source said why
    not). ``stages``: the run has stages (the figures are the whole run's: said so)."""
    out = GpuFigures()
    seen_uuids: set[str] = set()
    sampled_max: list[float | None] = []
    for reads in sources:
        out.notes.extend(reads.notes)
        if not reads.ticks:
            continue
        out.sources.append(reads.source)
        devices = tick_devices(reads.ticks, t0_ns, out.notes)
        kept = [d for d in devices if not (d.uuid and d.uuid in seen_uuids)]
        for dropped in (d for d in devices if d not in kept):
            out.notes.append(
                f"{reads.source}: GPU {dropped.uuid} is also read by an earlier source: "
                "counted once"
            )
        seen_uuids.update(d.uuid for d in kept if d.uuid)
        out.devices.extend(kept)
        sampled_max.append(summed_power_max(reads.ticks) if len(kept) == len(devices) else None)
        if reads.interval_s is not None:
            before = out.interval_s
            out.interval_s = max(before, reads.interval_s) if before else reads.interval_s
    if not out.devices:
        return out if out.notes else None
    if len(sampled_max) == 1 and sampled_max[0] is not None:
        out.power_w_max = sampled_max[0]
    elif len(out.devices) > 1:
        out.notes.append(
            "gpu.power_w.max: the sum of each GPU's largest read (the sources were not "
            "read together): an upper bound"
        )
    if server_tokens is not None and server_tokens > 0:
        out.output_tokens, out.output_tokens_from = server_tokens, TokenSource.SERVER
    elif client_tokens is not None and client_tokens > 0:
        out.output_tokens, out.output_tokens_from = client_tokens, TokenSource.CLIENT
    if stages:
        out.notes.append("the GPU figures are the whole run's (not per stage)")
    return out
