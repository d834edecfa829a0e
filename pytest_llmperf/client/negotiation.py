"""Which request fields the server accepts, found with probe requests before any load.

The client wants two things the OpenAI API does not define: ``ignore_eos``
(so output lengths are the planned ones) and ``stream_options.include_usage``
(so token counts are the server's). Lenient servers (vLLM, SGLang) take
both; strict ones refuse unknown fields with 400 or 422 and a message that
names the field (the OpenAI API: "Unrecognized request argument supplied:
ignore_eos"; ``transformers serve``: "Unexpected fields in the request:
{'ignore_eos'}"; pydantic gateways: ``loc: ["body", "ignore_eos"]``), and
some chat models refuse ``max_tokens`` in favour of ``max_completion_tokens``.
Sending a refused field would fail every request of the session, so one
small streaming request finds out first, and the refused fields are dropped
(:class:`~pytest_llmperf.client.openai.RequestFields` keeps the server's
words for the report).

The user's own fields (``--llm-request-extra``, ``llm_workload(extra_body=...)``)
are never dropped: they are what the user wants measured. A server that
refuses them stops the session before load with its own message
(:class:`~pytest_llmperf.errors.LlmPerfUsageError`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import httpx

from pytest_llmperf.client.endpoint import Endpoint
from pytest_llmperf.client.openai import RequestFields, build_payload, error_message
from pytest_llmperf.errors import LlmPerfUsageError
from pytest_llmperf.redaction import scrub
from pytest_llmperf.workloads.base import Sample

__all__ = ["PROBE_SAMPLE", "FieldProbe", "UserFields", "negotiate_fields"]

PROBE_SAMPLE = Sample(index=0, prompt="Say hello.", input_tokens=3, max_tokens=2)
_REFUSED_STATUSES = frozenset({400, 422})  # a body the server will not take
_OPTIONAL = ("ignore_eos", "stream_options", "max_tokens")  # ours to drop, in this order
_ALIASES = {"stream_options": ("stream_options", "include_usage")}


@dataclass(frozen=True)
class UserFields:
    """A set of the user's request fields and where they were given (for the error message)."""

    where: str
    fields: Mapping[str, Any]


@dataclass(frozen=True)
class FieldProbe:
    """The answer to one probe request: its status and, when refused, the server's message."""

    status: int
    message: str = ""

    @property
    def refused(self) -> bool:
        return self.status in _REFUSED_STATUSES

    @property
    def ok(self) -> bool:
        return 200 <= self.status < 300


async def negotiate_fields(
    endpoint: Endpoint, http: httpx.AsyncClient, user: Sequence[UserFields] = ()
) -> Endpoint:
    """``endpoint`` with the optional fields the server refuses dropped.

    Probes with the project's optional fields first (no user fields), drops
    each refused one the server's message names, and when a refusal names
    none of them, finds the culprit by probing each field alone. Then probes
    each set of user fields; a refusal there is a usage error naming where
    the fields were given and quoting the server. A probe that is neither
    accepted nor refused (429, 5xx, a timeout) settles nothing: the fields
    stay as they are and the run's own requests report what happens.
    """
    fields = replace(endpoint.fields, extra={})
    fields = await _drop_refused(endpoint, http, fields)
    session_extra = endpoint.fields.extra
    probed: set[str] = set()
    for given in user:
        extra = {**session_extra, **given.fields}
        key = json.dumps(extra, sort_keys=True)
        if not extra or key in probed:
            continue
        probed.add(key)
        probe = await _probe(endpoint, http, replace(fields, extra=extra))
        if probe.refused:
            shown = json.dumps(dict(given.fields or session_extra))
            raise LlmPerfUsageError(
                f"{endpoint.label} refused the request fields {shown}: "
                f"HTTP {probe.status}: {probe.message}",
                where=given.where,
            )
    return endpoint.with_fields(replace(fields, extra=session_extra))


async def _drop_refused(
    endpoint: Endpoint, http: httpx.AsyncClient, fields: RequestFields
) -> RequestFields:
    for _ in range(len(_OPTIONAL) + 1):
        probe = await _probe(endpoint, http, fields)
        if not probe.refused:
            return fields
        named = [f for f in _OPTIONAL if _sent(fields, f, endpoint.api) and _names(probe, f)]
        if not named:
            return await _find_culprits(endpoint, http, fields, probe)
        fields = _without(fields, named[0], probe.message)
    return fields


async def _find_culprits(
    endpoint: Endpoint, http: httpx.AsyncClient, fields: RequestFields, refusal: FieldProbe
) -> RequestFields:
    """The refusal named no field: try the plain body, then each optional field on its own."""
    sent = [f for f in _OPTIONAL if _sent(fields, f, endpoint.api) and f != "max_tokens"]
    bare = fields
    for name in sent:
        bare = _without(bare, name, "")
    if not sent or not (await _probe(endpoint, http, bare)).ok:
        return fields  # not about our fields: the run's requests will say what it is
    for name in sent:
        with_one = _with(bare, name)
        probe = await _probe(endpoint, http, with_one)
        bare = with_one if probe.ok else _without(bare, name, probe.message or refusal.message)
    return bare


def _sent(fields: RequestFields, name: str, api: str) -> bool:
    if name == "ignore_eos":
        return fields.ignore_eos
    if name == "stream_options":
        return fields.include_usage
    return api == "chat" and fields.max_tokens_field == "max_tokens"


def _names(probe: FieldProbe, name: str) -> bool:
    return any(
        re.search(rf"(?<!\w){re.escape(word)}(?!\w)", probe.message)
        for word in _ALIASES.get(name, (name,))
    )


def _without(fields: RequestFields, name: str, message: str) -> RequestFields:
    refused = {**fields.refused, name: message} if message else dict(fields.refused)
    if name == "ignore_eos":
        return replace(fields, ignore_eos=False, refused=refused)
    if name == "stream_options":
        return replace(fields, include_usage=False, refused=refused)
    return replace(fields, max_tokens_field="max_completion_tokens", refused=refused)


def _with(fields: RequestFields, name: str) -> RequestFields:
    if name == "ignore_eos":
        return replace(fields, ignore_eos=True)
    return replace(fields, include_usage=True)


async def _probe(endpoint: Endpoint, http: httpx.AsyncClient, fields: RequestFields) -> FieldProbe:
    """One two-token streaming request with ``fields``; what the server said."""
    assert endpoint.model is not None
    body = build_payload(endpoint.api, endpoint.model, PROBE_SAMPLE, fields)
    for attempt in range(2):
        try:
            async with http.stream("POST", endpoint.request_url, json=body) as response:
                raw = await response.aread()
            break
        except httpx.HTTPError:
            # Once more on a fresh connection: a server may reset a kept-alive one (uvicorn
            # after a 500). A second failure settles nothing; the run's requests report it.
            if attempt:
                return FieldProbe(0)
    if 200 <= response.status_code < 300:
        return FieldProbe(response.status_code)
    try:
        message = error_message(json.loads(raw))
    except ValueError:
        message = raw[:300].decode("utf-8", "replace")
    return FieldProbe(response.status_code, scrub(message, *endpoint.secrets))
