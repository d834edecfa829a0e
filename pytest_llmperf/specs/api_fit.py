"""Whether a test's declaration fits the API it drives, checked at collection.

An embeddings request streams no tokens, so an SLO on ``ttft`` there could
never be judged: it would come out inconclusive (or, worse, vacuously pass) after
the whole run. A prompt with images needs an API whose user turn takes content
parts. Both are the user's mistakes in the markers, so they are usage errors
that name the test and the bad word before any request is sent.
"""

from __future__ import annotations

from pytest_llmperf.errors import LlmPerfUsageError
from pytest_llmperf.specs.perf import PerfSpec
from pytest_llmperf.workloads.apis import IMAGE_APIS, TOKEN_STREAM_APIS, Api

__all__ = ["TOKEN_STREAM_METRICS", "check_api_fit"]

# Metrics measured on a token stream: nothing to measure on an API without one.
TOKEN_STREAM_METRICS = frozenset(
    {"ttft", "ttfo", "tpot", "itl", "tpot_token_weighted", "output_throughput"}
)


def check_api_fit(spec: PerfSpec, api: Api, *, where: str) -> None:
    """Raise :class:`LlmPerfUsageError` (at ``where``) when ``spec`` asks what ``api``
    cannot give: token-stream SLOs without a token stream, images where a prompt takes
    none, embeddings inputs on an API that is not embeddings."""
    if api not in TOKEN_STREAM_APIS:
        for slo in spec.slos:
            if slo.metric in TOKEN_STREAM_METRICS:
                raise LlmPerfUsageError(
                    f"SLO {slo.expr!r}: {slo.metric} is a token-stream metric and "
                    f"--llm-api={api.value} streams no tokens; judge e2e, "
                    "request_throughput, input_throughput, error_rate or goodput instead",
                    where=where,
                )
    params = spec.run.workload_params
    if params.get("images") and api not in IMAGE_APIS:
        takes = ", ".join(sorted(a.value for a in IMAGE_APIS))
        raise LlmPerfUsageError(
            f"llm_workload(images={params['images']!r}): --llm-api={api.value} sends no "
            f"images (prompts with images go to {takes})",
            where=where,
        )
    if params.get("inputs_per_request") is not None and api is not Api.EMBEDDINGS:
        raise LlmPerfUsageError(
            f"llm_workload(inputs_per_request={params['inputs_per_request']!r}) is for "
            f"--llm-api=embeddings; this test drives {api.value}",
            where=where,
        )
