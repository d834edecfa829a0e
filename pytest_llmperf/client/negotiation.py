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
(:class:`~pytest_llmperf.apis.fields.RequestFields` keeps the server's
words for the report).

The user's own fields (``--llm-request-extra``, ``llm_workload(extra_body=...)``)
are never dropped: they are what the user wants measured. A server that
refuses them stops the session before load with its own message
(:class:`~pytest_llmperf.errors.LlmPerfUsageError`) — but only when the request
passes without them: a strict server behind a gateway that adds fields of its
own (vLLM's router adds ``continue_final_message``, ``echo``, ...) refuses even
the plainest request, whatever the user added. That refusal stops the session
too, before load, quoting the server and blaming nobody's field: the server is
broken for this client, not the user's options, so the gate fails (exit status 1,
:class:`~pytest_llmperf.errors.StopCause`), where the user's refused fields are a
usage error (4).

Which optional fields there are depends on the API
(:meth:`~pytest_llmperf.apis.fields.RequestFields.sends`): chat has all three
(``ignore_eos``, ``stream_options``, ``max_tokens`` -> ``max_completion_tokens``),
completions the first two, the Responses and Messages APIs ``ignore_eos`` only
(their length fields, ``max_output_tokens`` and ``max_tokens``, are the APIs' own),
embeddings none — but the plainest request and the user's fields are probed
on every API all the same.

Each probe is one call of the metadata client
(:mod:`~pytest_llmperf.client.metadata`): bounded by ``--llm-timeout``, retried
when the answer is transient, and read only up to the stream's first event (of
an embeddings endpoint, which streams nothing, its whole small answer).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any
from urllib.parse import urlsplit

from pytest_llmperf.apis.fields import RequestFields
from pytest_llmperf.apis.registry import api_format, build_payload
from pytest_llmperf.client.endpoint import Endpoint
from pytest_llmperf.client.metadata import MetadataClient, Read, server_words
from pytest_llmperf.errors import LlmPerfUsageError, StopCause
from pytest_llmperf.workloads.base import Sample

__all__ = ["PROBE_SAMPLE", "FieldProbe", "UserFields", "negotiate_fields"]

PROBE_SAMPLE = Sample(index=0, prompt="Say hello.", input_tokens=3, max_tokens=2)
_REFUSED_STATUSES = frozenset({400, 422})  # a body the server will not take
# no such path (or model: vLLM answers an unknown model with 404), not by POST, or not
# implemented (llama-server's embeddings without --embeddings: 501)
_UNSERVED_STATUSES = frozenset({404, 405, 501})
_OPTIONAL = ("ignore_eos", "stream_options", "max_tokens")  # ours to drop, in this order
_ALIASES = {"stream_options": ("stream_options", "include_usage")}


@dataclass(frozen=True)
class UserFields:
    """A set of the user's request fields and where they were given (for the error message);
    ``api``: the API of the test that gives them (probed only there), None for every API."""

    where: str
    fields: Mapping[str, Any]
    api: str | None = None


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

    @property
    def says(self) -> str:
        """The answer as a report quotes it: ``HTTP 422: Unexpected fields ...``."""
        return server_words(self.status, self.message)


async def negotiate_fields(
    endpoint: Endpoint, meta: MetadataClient, user: Sequence[UserFields] = ()
) -> Endpoint:
    """``endpoint`` with the optional fields the server refuses dropped.

    Probes with the project's optional fields first (no user fields), drops
    each refused one the server's message names, and when a refusal names
    none of them, probes the plainest request (none of the optional fields):
    refused too, the session stops here (:func:`_plainest_refused`);
    accepted, each optional field is probed on its own to find the culprit.
    Then probes each set of user fields; a refusal there is a usage error
    naming where the fields were given and quoting the server, when the
    request without them passed. A probe answered 404, 405 or 501 (no such API at
    that path, or no such model) stops the session too: every request would be
    answered so. A probe answered otherwise (a 5xx, say) settles nothing: the
    run's own requests report it. A probe that runs out of time or retries is
    the metadata client's usage error.
    """
    fields, base = await _drop_refused(endpoint, meta, replace(endpoint.fields, extra={}))
    if base.refused:  # no request can pass, whatever the user asks: the server's (exit 1)
        raise LlmPerfUsageError(
            _plainest_refused(endpoint, fields, base),
            where="--llm-endpoint",
            cause=StopCause.SERVER_REFUSED,
            server_says=base.says,
        )
    if base.status in _UNSERVED_STATUSES:  # the URL, API or model asked for: the user's
        raise LlmPerfUsageError(
            _unserved(endpoint, base), where="--llm-endpoint", server_says=base.says
        )
    session_extra = endpoint.fields.extra
    probed: set[str] = set()
    for given in user:
        if given.api is not None and given.api != endpoint.api:
            continue  # another API's test: its fields are probed where it sends them
        extra = {**session_extra, **given.fields}
        key = json.dumps(extra, sort_keys=True)
        if not extra or key in probed:
            continue
        probed.add(key)
        probe = await _probe(endpoint, meta, replace(fields, extra=extra))
        if probe.refused and base.ok:  # blame the fields only if the request passes without
            shown = json.dumps(dict(given.fields or session_extra))
            raise LlmPerfUsageError(
                f"{endpoint.label} refused the request fields {shown}: "
                f"HTTP {probe.status}: {probe.message}",
                where=given.where,
                server_says=probe.says,
            )
    return endpoint.with_fields(replace(fields, extra=session_extra))


async def _drop_refused(
    endpoint: Endpoint, meta: MetadataClient, fields: RequestFields
) -> tuple[RequestFields, FieldProbe]:
    """The fields left once the refused optional ones are dropped, and their probe's answer."""
    probe = FieldProbe(0)
    for _ in range(len(_OPTIONAL) + 1):
        probe = await _probe(endpoint, meta, fields)
        if not probe.refused:
            return fields, probe
        named = [f for f in _OPTIONAL if _sent(fields, f, endpoint.api) and _names(probe, f)]
        if not named:
            return await _find_culprits(endpoint, meta, fields, probe)
        fields = _without(fields, named[0], probe.message)
    return fields, probe


async def _find_culprits(
    endpoint: Endpoint, meta: MetadataClient, fields: RequestFields, refusal: FieldProbe
) -> tuple[RequestFields, FieldProbe]:
    """The refusal named none of ours: probe the plainest body, then each optional field alone.

    The plainest body refused too: the answer says so (the caller stops the
    session). Answered otherwise than yes or no: nothing is settled, the fields
    stay as they were.
    """
    sent = [f for f in _OPTIONAL if _sent(fields, f, endpoint.api) and f != "max_tokens"]
    if not sent:
        return fields, refusal  # the refused request was already the plainest
    bare = fields
    for name in sent:
        bare = _without(bare, name, "")
    plain = await _probe(endpoint, meta, bare)
    if plain.refused:
        return bare, plain
    if not plain.ok:
        return fields, plain  # not about our fields: the run's requests will say what it is
    for name in sent:
        with_one = _with(bare, name)
        probe = await _probe(endpoint, meta, with_one)
        bare = with_one if probe.ok else _without(bare, name, probe.message or refusal.message)
    return bare, plain


def _plainest_refused(endpoint: Endpoint, fields: RequestFields, probe: FieldProbe) -> str:
    """The server refuses a body with nothing optional in it: no request can pass."""
    assert endpoint.model is not None
    body = build_payload(endpoint.api, endpoint.model, PROBE_SAMPLE, fields)
    return (
        f"{endpoint.label} refused even the plainest request: the field probe "
        f"POST {urlsplit(endpoint.request_url).path} with only {', '.join(body)} "
        f"(none of this client's optional fields, none of yours) answered "
        f"HTTP {probe.status}: {probe.message}. Every request would be refused, so no load "
        "was sent; where the server names a field not in that list, something between "
        "(a gateway or router) adds it"
    )


def _unserved(endpoint: Endpoint, probe: FieldProbe) -> str:
    """The server has no such API at this path (or no such model): every request would
    be answered so, and a run of nothing but 404s measures nothing."""
    return (
        f"{endpoint.label} answered the field probe POST "
        f"{urlsplit(endpoint.request_url).path} (model {endpoint.model!r}) with "
        f"HTTP {probe.status}: {probe.message or 'no message'}. It does not serve the "
        f"{endpoint.api} API there, or not that model: check the base URL, --llm-api or "
        "llm_endpoint(api=...), and --llm-model. No load was sent"
    )


def _sent(fields: RequestFields, name: str, api: str) -> bool:
    return fields.sends(api_format(api).field_rules, name)


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


async def _probe(endpoint: Endpoint, meta: MetadataClient, fields: RequestFields) -> FieldProbe:
    """One two-token streaming request with ``fields``: its status (and the server's words).

    Only the head and the stream's first event are read; the stream is then
    closed, so a server that ignores ``max_tokens`` and streams forever costs
    one event, not a hang. An embeddings probe (one short input) reads its
    whole answer, which is one small JSON body, not a stream.
    """
    assert endpoint.model is not None
    body = build_payload(endpoint.api, endpoint.model, PROBE_SAMPLE, fields)
    read = Read.FIRST_EVENT if endpoint.format.streams_tokens else Read.BODY
    answer = await meta.call("POST", endpoint.request_url, what="field probe", json=body, read=read)
    return FieldProbe(answer.status, answer.message)
