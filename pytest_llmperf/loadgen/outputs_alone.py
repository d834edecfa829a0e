"""The alone pass: a greedy run's samples sent again one at a time, for their outputs.

``output_consistency`` asks whether outputs under load equal the same prompts'
outputs alone (batch invariance: a server whose kernels give another answer when a
request shares its batch fails it). After the loaded run, its first
:data:`ALONE_SAMPLES` distinct sample indices are sent once more, one request at a
time (concurrency 1, no warm-up), through the same client and request fields, and
each completed request's output fingerprint is kept. These requests are not part
of the run: they enter no metric, no event log and no verdict but that one.

A multi-turn workload is left out: its later turns carry the server's replies to the
earlier ones, so its prompts alone would not be the prompts under load.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

from pytest_llmperf.client.endpoint import Endpoint
from pytest_llmperf.client.models import resolve_model
from pytest_llmperf.client.records import RequestRecord
from pytest_llmperf.client.request import send_request
from pytest_llmperf.client.stream_client import StreamClient
from pytest_llmperf.loadgen.plan.planner import PlanSource, RunPlan
from pytest_llmperf.results.outputs import SampleOutputs

__all__ = ["ALONE_SAMPLES", "outputs_alone"]

ALONE_SAMPLES = 64


async def outputs_alone(
    endpoint: Endpoint, spec: PlanSource, indices: Sequence[int]
) -> tuple[SampleOutputs, str]:
    """Send ``spec``'s workload samples ``indices`` one at a time to ``endpoint``; their
    outputs, and why some or all are missing (``""``: none is)."""
    plan = RunPlan.of(spec)
    if plan.conversations is not None:
        return SampleOutputs(), (
            "multi-turn sessions: later turns carry the replies under load, so they are "
            "not sent alone"
        )
    endpoint = endpoint.with_fields(endpoint.fields.with_extra(plan.extra_body))
    endpoint = await resolve_model(endpoint)
    outputs = SampleOutputs()
    failed: dict[str, int] = {}
    async with StreamClient(endpoint, max_connections=1) as http:
        for index in indices:
            sample = plan.workload.sample(index)
            record = RequestRecord(index=index, t_sched=time.monotonic_ns())
            await send_request(http, endpoint, sample, record)
            if record.ok and record.output_digest:
                outputs.add(index, record.output_digest, record.output_tokens, record.output_marks)
            else:
                why = str(record.error) if record.error else "no output kept"
                failed[why] = failed.get(why, 0) + 1
    note = ""
    if failed:
        counted = ", ".join(f"{why} x{n}" for why, n in sorted(failed.items()))
        lost = sum(failed.values())
        note = f"{lost} of {len(indices)} samples sent alone gave no output ({counted})"
    return outputs, note
