"""Session affinity: what a conversation's requests carry so a router keeps it on one replica.

An agent's conversation leans on the prefix cache of the replica that served its
last call; the router in front of the replicas decides what it reads to pin a
conversation there, so the user names it (``--llm-affinity``, any of, comma-separated):

- ``header:NAME`` sends the conversation's id in header ``NAME`` on each of its
  requests (a router hashing a header: Envoy's ring hash, nginx ``hash``, llm-d's
  session header; the workloads' ``conversation_header=`` does the same per workload);
- ``dynamo`` sends NVIDIA Dynamo's agent headers: ``X-Dynamo-Session-ID`` (the
  thread: the conversation's id, plus ``/<agent_id>`` for a subagent) and, on a
  subagent's calls, ``X-Dynamo-Parent-Session-ID`` (its parent thread), which a
  frontend started with ``--router-session-affinity-ttl-secs`` binds to a worker;
- ``dynamo-session-control`` sends the request-body form some Dynamo builds read
  instead (``nvext.session_control = {"session_id", "action": "bind", "timeout"}``,
  deprecated by later releases in favour of the headers): ``bind`` is idempotent and
  refreshes the binding's time to live on every call, so a long tool wait cannot let
  it lapse; the binding ends by that time to live (no ``close``: a call does not know
  it is its conversation's last);
- ``sglang`` sends ``X-SMG-Routing-Key`` (the conversation's id), which the SGLang
  Model Gateway (sgl-router) pins to one worker under its ``manual`` policy or
  ``--routing-key-override``/``--sticky-sessions``;
- ``token:HEADER`` captures a router's own session token from response header
  ``HEADER`` (into ``RequestRecord.route_token``) and sends it back in that header on
  the conversation's next calls, cookie-like; ``token:set-cookie`` sends the cookie
  back as ``Cookie: name=value``.

Which replica served a request is read from the response too (``--llm-replica-header``,
default :data:`DEFAULT_REPLICA_HEADERS`) into ``RequestRecord.replica``: reports then
say whether a conversation's calls stayed on one replica. Both are read once per
response, from the head the connection already parsed (:meth:`Affinity.capture`):
nothing per token event.

:func:`pin` runs once per request (the load generator calls it with the
conversation's id, the thread's ``agent_id`` and the token of that conversation's
last response); with no affinity configured it returns the sample itself.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from enum import StrEnum
from typing import TYPE_CHECKING, Any, Protocol

from pytest_llmperf.client.http1 import is_header_name
from pytest_llmperf.errors import LlmPerfUsageError

if TYPE_CHECKING:
    from pytest_llmperf.client.records import RequestRecord
    from pytest_llmperf.workloads.base import Sample

__all__ = [
    "DEFAULT_REPLICA_HEADERS",
    "DYNAMO_PARENT_HEADER",
    "DYNAMO_SESSION_HEADER",
    "NO_AFFINITY",
    "SESSION_CONTROL_TIMEOUT_S",
    "SGLANG_ROUTING_HEADER",
    "Affinity",
    "AffinityKind",
    "AffinityRule",
    "parse_replica_headers",
    "pin",
    "thread_id",
]

DYNAMO_SESSION_HEADER = "X-Dynamo-Session-ID"
DYNAMO_PARENT_HEADER = "X-Dynamo-Parent-Session-ID"
SGLANG_ROUTING_HEADER = "X-SMG-Routing-Key"
SESSION_CONTROL_TIMEOUT_S = 300  # Dynamo's and AIPerf's default binding time to live

# Response headers that name the replica (worker, pod, deployment) that served a request,
# tried in order; the first present wins. x-replica-id: the embedded simulator's router
# profile. x-smg-worker-id: the SGLang Model Gateway's opaque id of the worker it chose
# (proposed in sglang pull request 34976). x-litellm-model-id: LiteLLM's proxy, the
# deployment its router chose. vLLM, llama.cpp and Dynamo's frontend name none; llm-d's
# gateway strips its x-gateway-destination-endpoint-served from responses; a router that
# names the replica in a header of its own is read with --llm-replica-header=NAME.
DEFAULT_REPLICA_HEADERS: tuple[str, ...] = (
    "x-replica-id",
    "x-smg-worker-id",
    "x-litellm-model-id",
)

# Headers the client writes itself (or that frame the request): never an affinity header.
_OWN = frozenset(
    {"host", "content-length", "content-type", "transfer-encoding", "connection", "accept"}
    | {"authorization", "x-api-key", "anthropic-version", "user-agent"}
)


class AffinityKind(StrEnum):
    """What one ``--llm-affinity`` item sends (see the module's docstring)."""

    HEADER = "header"
    DYNAMO = "dynamo"
    DYNAMO_SESSION_CONTROL = "dynamo-session-control"
    SGLANG = "sglang"
    TOKEN = "token"


_NAMED = (AffinityKind.HEADER, AffinityKind.TOKEN)  # the kinds written KIND:NAME


@dataclass(frozen=True, slots=True)
class AffinityRule:
    """One item of ``--llm-affinity``: its kind and, for ``header:``/``token:``, the header."""

    kind: AffinityKind
    name: str = ""

    def __str__(self) -> str:
        return f"{self.kind}:{self.name}" if self.name else str(self.kind)


@dataclass(frozen=True, slots=True)
class Affinity:
    """An endpoint's affinity rules and the response headers that name a replica.

    Built once per endpoint (:meth:`parse`); :meth:`fields` makes a request's headers
    and body fields, :meth:`capture` reads a response's head.
    """

    rules: tuple[AffinityRule, ...] = ()
    replica_headers: tuple[str, ...] = DEFAULT_REPLICA_HEADERS
    # the response header (lower case) whose value is the router's token ("": none);
    # worked out once here, as capture() reads it on every response
    token_header: str = field(init=False, default="")

    def __post_init__(self) -> None:
        token = next((r.name.lower() for r in self.rules if r.kind is AffinityKind.TOKEN), "")
        object.__setattr__(self, "token_header", token)

    @classmethod
    def parse(
        cls,
        text: Any,
        *,
        replica_headers: tuple[str, ...] = DEFAULT_REPLICA_HEADERS,
        where: str = "--llm-affinity",
    ) -> Affinity:
        """``dynamo``, ``sglang``, ``header:NAME``, ``token:HEADER``, ``dynamo-session-control``,
        comma-separated (a list or tuple of them too); ``""``/``none``/None: no affinity.
        A bad item is a usage error naming ``where`` and the item."""
        if text is None:
            return cls(replica_headers=replica_headers)
        items = (
            [str(t) for t in text]
            if isinstance(text, list | tuple)
            else str(text).split(",")
            if isinstance(text, str)
            else None
        )
        if items is None:
            raise LlmPerfUsageError(
                f"expected a comma-separated list of affinity modes, got {text!r}", where=where
            )
        rules: list[AffinityRule] = []
        for raw in (i.strip() for i in items):
            if not raw or raw.lower() in ("none", "off"):
                continue
            rule = _rule(raw, where)
            if rule in rules:
                raise LlmPerfUsageError(f"{raw!r} is given twice", where=where)
            rules.append(rule)
        tokens = [r for r in rules if r.kind is AffinityKind.TOKEN]
        if len(tokens) > 1:
            raise LlmPerfUsageError(
                f"one token:HEADER at most, got {', '.join(map(str, tokens))}", where=where
            )
        sent = [h.lower() for r in rules for h in _sent_headers(r)]
        twice = sorted({h for h in sent if sent.count(h) > 1})
        if twice:
            raise LlmPerfUsageError(
                f"two affinity modes send the same header {twice[0]!r}: {text!r}", where=where
            )
        return cls(tuple(rules), replica_headers)

    def fields(
        self, conversation_id: str, agent_id: str = "", token: str = ""
    ) -> tuple[dict[str, str], dict[str, Any]]:
        """The headers and body fields of a request of thread ``agent_id`` (``""``: the
        root) of conversation ``conversation_id``, ``token`` the router's token from the
        conversation's last response (``""``: none yet)."""
        headers: dict[str, str] = {}
        body: dict[str, Any] = {}
        for rule in self.rules:
            kind = rule.kind
            if kind is AffinityKind.HEADER:
                headers[rule.name] = conversation_id
            elif kind is AffinityKind.DYNAMO:
                headers[DYNAMO_SESSION_HEADER] = thread_id(conversation_id, agent_id)
                if agent_id:
                    parent = agent_id.rpartition("/")[0]
                    headers[DYNAMO_PARENT_HEADER] = thread_id(conversation_id, parent)
            elif kind is AffinityKind.DYNAMO_SESSION_CONTROL:
                body["nvext"] = {
                    "session_control": {
                        "session_id": thread_id(conversation_id, agent_id),
                        "action": "bind",
                        "timeout": SESSION_CONTROL_TIMEOUT_S,
                    }
                }
            elif kind is AffinityKind.SGLANG:
                headers[SGLANG_ROUTING_HEADER] = conversation_id
            elif token:  # TOKEN, once the router has handed one out
                if rule.name.lower() == "set-cookie":
                    headers["Cookie"] = token
                else:
                    headers[rule.name] = token
        return headers, body

    def capture(self, headers: Mapping[str, str], record: RequestRecord) -> None:
        """A response head's replica and router token into ``record`` (once per response;
        ``headers`` are the connection's, names lower case)."""
        for name in self.replica_headers:
            value = headers.get(name)
            if value:
                record.replica = value[:200]
                break
        token_header = self.token_header
        if token_header:
            value = headers.get(token_header)
            if value:
                record.route_token = (
                    _cookie_pair(value) if token_header == "set-cookie" else value
                )[:4096]

    def describe(self) -> dict[str, Any]:
        """The affinity for reports: the modes and the replica headers read."""
        return {
            "modes": [str(r) for r in self.rules],
            "replica_headers": list(self.replica_headers),
        }


NO_AFFINITY = Affinity()


def thread_id(conversation_id: str, agent_id: str) -> str:
    """A thread's id: the conversation's for the root, ``<conversation>/<agent_id>`` for a
    subagent (so every thread of a tree is told apart and names its conversation)."""
    return f"{conversation_id}/{agent_id}" if agent_id else conversation_id


class _Pinning(Protocol):
    """What :func:`pin` reads of an endpoint (an :class:`~pytest_llmperf.client.endpoint.
    Endpoint`; a protocol, as the endpoint's module imports this one)."""

    @property
    def affinity(self) -> Affinity: ...


def pin(
    sample: Sample, endpoint: _Pinning, conversation_id: str, agent_id: str = "", token: str = ""
) -> Sample:
    """``sample`` with the headers and body fields of ``endpoint``'s affinity for thread
    ``agent_id`` of conversation ``conversation_id`` (``token``: the router's token from the
    conversation's last response, ``""`` for none); ``sample`` itself when there are none.

    The sample's own headers are kept (an affinity header of the same name wins); a
    body field merges into the sample's ``extra_body`` (``nvext`` merged key by key).
    Cheap: once per request.
    """
    affinity = endpoint.affinity
    if not affinity.rules:
        return sample
    headers, body = affinity.fields(conversation_id, agent_id, token)
    if not headers and not body:
        return sample
    extra = sample.extra_body
    if body:
        merged = dict(extra)
        for key, value in body.items():
            mine = merged.get(key)
            merged[key] = {**mine, **value} if isinstance(mine, Mapping) else dict(value)
        extra = merged
    return replace(sample, headers={**sample.headers, **headers}, extra_body=extra)


def parse_replica_headers(text: Any, *, where: str = "--llm-replica-header") -> tuple[str, ...]:
    """``--llm-replica-header``: header names, comma-separated (None/``""``: the default
    list; ``none``: read none). Lower-cased: the connection lower-cases response heads."""
    if text is None or (isinstance(text, str) and not text.strip()):
        return DEFAULT_REPLICA_HEADERS
    items = [str(t) for t in text] if isinstance(text, list | tuple) else str(text).split(",")
    names = [i.strip() for i in items if i.strip()]
    if [n.lower() for n in names] in (["none"], ["off"]):
        return ()
    for name in names:
        if not is_header_name(name):
            raise LlmPerfUsageError(
                f"{name!r} is not an HTTP header name (letters, digits, -, _ ...)", where=where
            )
    return tuple(dict.fromkeys(n.lower() for n in names))


def _rule(raw: str, where: str) -> AffinityRule:
    word, colon, name = raw.partition(":")
    word = word.strip().lower()
    try:
        kind = AffinityKind(word)
    except ValueError:
        choices = ", ".join(
            f"{k}:NAME" if k is AffinityKind.HEADER else f"{k}:HEADER" if k in _NAMED else str(k)
            for k in AffinityKind
        )
        raise LlmPerfUsageError(
            f"unknown affinity mode {raw!r}; use any of {choices}", where=where
        ) from None
    name = name.strip()
    if kind not in _NAMED:
        if colon:
            raise LlmPerfUsageError(f"{word!r} takes no header name, got {raw!r}", where=where)
        return AffinityRule(kind)
    if not name:
        raise LlmPerfUsageError(
            f"{word!r} needs a header name: {word}:NAME (e.g. {word}:x-session-id), got {raw!r}",
            where=where,
        )
    if not is_header_name(name):
        raise LlmPerfUsageError(
            f"{name!r} in {raw!r} is not an HTTP header name (letters, digits, -, _ ...)",
            where=where,
        )
    if kind is AffinityKind.HEADER and name.lower() in _OWN | {"cookie"}:
        raise LlmPerfUsageError(
            f"{raw!r}: {name} is a header the client sends itself; name another", where=where
        )
    if kind is AffinityKind.TOKEN and name.lower() in _OWN:
        raise LlmPerfUsageError(
            f"{raw!r}: {name} cannot carry a router's token back; name another", where=where
        )
    return AffinityRule(kind, name)


def _sent_headers(rule: AffinityRule) -> tuple[str, ...]:
    kind = rule.kind
    if kind is AffinityKind.DYNAMO:
        return (DYNAMO_SESSION_HEADER, DYNAMO_PARENT_HEADER)
    if kind is AffinityKind.SGLANG:
        return (SGLANG_ROUTING_HEADER,)
    if kind is AffinityKind.TOKEN:
        return ("cookie",) if rule.name.lower() == "set-cookie" else (rule.name,)
    if kind is AffinityKind.HEADER:
        return (rule.name,)
    return ()


def _cookie_pair(set_cookie: str) -> str:
    """``name=value`` of a ``Set-Cookie`` value (its attributes dropped; several cookies,
    joined by the connection with commas, go back as ``a=1; b=2``)."""
    pairs = []
    for part in set_cookie.split(","):
        pair = part.split(";", 1)[0].strip()
        if "=" in pair and not pair.lower().startswith(("expires=", "max-age=")):
            pairs.append(pair)
    return "; ".join(pairs)
