"""The server's own timings of one request, where its response says them.

Two shapes are known, both read from the chunk that ends a stream (or from a
non-streamed answer's body), never from a token chunk: the client looks for
them only on a chunk that carries ``usage`` or a ``finish_reason``
(:func:`pytest_llmperf.apis.chunks.parse_chunk`), so a stream's token events
cost nothing more.

- **vLLM** with ``--enable-per-request-metrics``: a ``metrics`` object on the
  response body and, when streaming, on the final usage chunk (so only with
  ``stream_options.include_usage``, which the client asks for, and ``n == 1``)::

      "metrics": {"queue_time_ms", "time_to_first_token_ms", "generation_time_ms",
                  "mean_itl_ms", "tokens_per_second",
                  "speculative_decoding": {"num_accepted_draft_tokens",
                                           "num_draft_tokens", ...}}

  from the engine core's timestamps of the request (vLLM's
  ``build_per_request_timing_metrics``): ``queue_time_ms`` = queued in the
  engine until first scheduled (preemptions ignored), ``time_to_first_token_ms``
  = first scheduled until the first token (prefill: *not* the client's TTFT,
  and not ``vllm:time_to_first_token_seconds`` either, which counts from the API
  server's arrival), ``generation_time_ms`` = first to last token,
  ``mean_itl_ms`` = that over the output tokens less one. A field whose
  timestamps the engine lacked is left out (or null).

- **llama.cpp's server**: a ``timings`` object on the last chunk of a stream (the
  usage chunk with ``include_usage``, else the finish chunk; every chunk only
  when the request asks ``timings_per_token``) and on a non-streamed answer::

      "timings": {"cache_n", "prompt_n", "prompt_ms", "prompt_per_token_ms",
                  "prompt_per_second", "predicted_n", "predicted_ms",
                  "predicted_per_token_ms", "predicted_per_second",
                  "draft_n", "draft_n_accepted"}

  ``prompt_ms`` runs from the slot starting on the prompt to the first sampled
  token (its prefill: vLLM's ``time_to_first_token_ms``), ``predicted_ms`` from
  there to the last token. llama.cpp says nothing of the time a request waited
  for a free slot: no queue time (``server_queue_ms`` stays None), so that wait
  lands in the client/network remainder of the TTFT split.

Values that are not finite non-negative numbers are ignored, never trusted.
"""

from __future__ import annotations

import math
from typing import Any

from pytest_llmperf.client.records import RequestRecord

__all__ = ["apply_server_timing"]

# vLLM's per-request ``metrics`` keys -> the record's fields (milliseconds)
_VLLM_FIELDS = (
    ("queue_time_ms", "server_queue_ms"),
    ("time_to_first_token_ms", "server_ttft_ms"),
    ("generation_time_ms", "server_decode_ms"),
    ("mean_itl_ms", "server_mean_itl_ms"),
)


def apply_server_timing(record: RequestRecord, timing: dict[str, Any]) -> None:
    """Fill ``record``'s ``server_*`` fields from a response's ``metrics`` (vLLM) or
    ``timings`` (llama.cpp) object; fields the object lacks are left as they are."""
    if "prompt_ms" in timing or "predicted_ms" in timing:
        _llamacpp(record, timing)
        return
    for key, attr in _VLLM_FIELDS:
        value = _ms(timing.get(key))
        if value is not None:
            setattr(record, attr, value)
    spec = timing.get("speculative_decoding")
    if spec.__class__ is dict:
        _spec(record, spec.get("num_accepted_draft_tokens"), spec.get("num_draft_tokens"))


def _llamacpp(record: RequestRecord, timing: dict[str, Any]) -> None:
    generated = _count(timing.get("predicted_n"))
    if generated == 0:  # nothing sampled yet: prompt_ms is 0 for "not processed", not a time
        return
    prompt = _ms(timing.get("prompt_ms"))
    if prompt is not None:
        record.server_ttft_ms = prompt
    decode = _ms(timing.get("predicted_ms"))
    if decode is not None:
        record.server_decode_ms = decode
        if generated is not None and generated >= 2:
            record.server_mean_itl_ms = decode / (generated - 1)
    if "draft_n" in timing:
        _spec(record, timing.get("draft_n_accepted"), timing.get("draft_n"))


def _spec(record: RequestRecord, accepted: Any, drafted: Any) -> None:
    accepted, drafted = _count(accepted), _count(drafted)
    if accepted is not None and drafted is not None:
        record.server_spec_accepted = accepted
        record.server_spec_draft = drafted


def _ms(value: Any) -> float | None:
    cls = value.__class__
    if (cls is float or cls is int) and value >= 0 and math.isfinite(value):
        return float(value)
    return None


def _count(value: Any) -> int | None:
    if value.__class__ is int and value >= 0:
        return int(value)
    return None
