"""Whether a test's declaration fits the API it drives, checked at collection.

An embeddings request streams no tokens, so an SLO on ``ttft`` there could
never be judged: it would come out inconclusive (or, worse, vacuously pass) after
the whole run. A prompt with images needs an API whose user turn takes content
parts. A JSON Schema output needs an API with a response format (chat's
``response_format``, Responses' ``text.format``), tool calls an API with tools,
greedy decoding an API that generates. All are the user's mistakes in the
markers, so they are usage errors that name the test and the bad word before
any request is sent.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pytest_llmperf.apis.registry import API_FORMATS
from pytest_llmperf.errors import LlmPerfUsageError
from pytest_llmperf.specs.perf import PerfSpec
from pytest_llmperf.workloads.apis import IMAGE_APIS, TOKEN_STREAM_APIS, Api

__all__ = [
    "GREEDY_APIS",
    "PATH_FIELDS",
    "STRUCTURED_APIS",
    "TOKEN_STREAM_METRICS",
    "TOOL_APIS",
    "check_api_fit",
]

# Metrics measured on a token stream: nothing to measure on an API without one.
TOKEN_STREAM_METRICS = frozenset(
    {"ttft", "ttfo", "tpot", "itl", "tpot_token_weighted", "output_throughput", "blank_rate"}
)
# The request fields each workload parameter sends, per API (each format says which it
# takes: ApiFormat.contract_fields): extra_body may not set them too (which one the server
# would see would depend on the client's merge order).
PATH_FIELDS: Mapping[str, Mapping[Api, tuple[str, ...]]] = {
    name: {
        Api(f.name): f.contract_fields[name]
        for f in API_FORMATS.values()
        if name in f.contract_fields
    }
    for name in ("structured", "tools", "greedy")
}
# The APIs with a JSON Schema response format, with tools, and that generate text.
STRUCTURED_APIS = frozenset(PATH_FIELDS["structured"])
TOOL_APIS = frozenset(PATH_FIELDS["tools"])
GREEDY_APIS = frozenset(PATH_FIELDS["greedy"])
# What to do instead, per parameter and API it does not fit
_INSTEAD = {
    ("structured", Api.COMPLETIONS): "completions have no response_format; drive chat or "
    "responses, or put the server's own field in extra_body (vLLM: "
    "extra_body={'structured_outputs': {'json': SCHEMA}}; llama.cpp: {'json_schema': SCHEMA})",
    ("structured", Api.MESSAGES): "the Messages API has no response_format; use tools= with a "
    "named tool_choice (the tool's arguments are checked against its parameters), drive chat "
    "or responses, or put the server's own field in extra_body",
    ("structured", Api.EMBEDDINGS): "embeddings generate no output to check",
    ("tools", Api.COMPLETIONS): "a completions prompt takes no tools; drive chat, responses or "
    "messages, or put the server's own field in extra_body",
    ("tools", Api.EMBEDDINGS): "embeddings generate no output to check",
    ("greedy", Api.EMBEDDINGS): "embeddings generate nothing to decode; an embedding does not "
    "depend on sampling settings",
}


def check_api_fit(spec: PerfSpec, api: Api, *, where: str) -> None:
    """Raise :class:`LlmPerfUsageError` (at ``where``) when ``spec`` asks what ``api``
    cannot give: token-stream SLOs without a token stream, images where a prompt takes
    none, embeddings inputs on an API that is not embeddings."""
    if api not in TOKEN_STREAM_APIS:
        for slo in spec.slos:
            if slo.plain_metric in TOKEN_STREAM_METRICS:  # replica.ttft too
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
    _check_paths(params, api, where)


def _check_paths(params: Mapping[str, Any], api: Api, where: str) -> None:
    """``structured=``, ``tools=``, ``greedy=`` on an API that has them, and not also in
    ``extra_body``."""
    fits = {"structured": STRUCTURED_APIS, "tools": TOOL_APIS, "greedy": GREEDY_APIS}
    extra = params.get("extra_body") or {}
    for name, apis in fits.items():
        value = params.get(name)
        if value is None or value is False:
            continue
        shown = f"llm_workload({name}={value!r:.80})"
        if api not in apis:
            raise LlmPerfUsageError(
                f"{shown} does not fit --llm-api={api.value}: "
                + _INSTEAD.get((name, api), f"--llm-api={api.value} does not take it"),
                where=where,
            )
        clash = [
            f for f in PATH_FIELDS[name].get(api, ()) if isinstance(extra, Mapping) and f in extra
        ]
        if clash:
            raise LlmPerfUsageError(
                f"{shown} sends {', '.join(PATH_FIELDS[name][api])} on --llm-api={api.value}; "
                f"extra_body sets {', '.join(clash)} too: drop one",
                where=where,
            )
