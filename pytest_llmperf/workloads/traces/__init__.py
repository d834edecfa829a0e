"""Trace replay: requests read from a trace file, sent at the trace's own times.

``read_trace(path, format, start=..., limit=...)`` reads a Mooncake, BurstGPT,
Azure or plain JSON Lines trace into a :class:`Trace` of :class:`TraceRow`;
the ``trace`` workload (:mod:`.workload`) turns its rows into prompts, with
equal ``hash_ids`` giving equal prompt blocks (:mod:`.prompts`). The load
generator sends row ``i`` at ``trace.offsets_ns(time_scale)[i]``.
See ``docs/traces.md``.
"""

from pytest_llmperf.workloads.traces.formats import TRACE_FORMATS, parse_datetime_ns
from pytest_llmperf.workloads.traces.trace import Trace, TraceRow, offsets_ns, read_trace
from pytest_llmperf.workloads.traces.workload import MOONCAKE_BLOCK_SIZE, TraceWorkload

__all__ = [
    "MOONCAKE_BLOCK_SIZE",
    "TRACE_FORMATS",
    "Trace",
    "TraceRow",
    "TraceWorkload",
    "offsets_ns",
    "parse_datetime_ns",
    "read_trace",
]
