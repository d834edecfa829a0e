"""The embedded router: which of the simulator's replicas serves a request.

A deployment that serves agents runs several engines behind a router, and
whether the router keeps a conversation on the replica that holds its KV blocks
decides its prefix-cache hit rate. The simulator reproduces that with
``replicas: N`` engines in one process (replicas.py) and this router in front of
them, chosen by the profile's ``router`` key:

- ``round_robin``: each request to the next replica in turn, whatever it carries;
- ``session``: a request carrying a conversation key goes to the replica its
  conversation's first request went to (new keys are dealt round robin, so
  conversations spread evenly); a request with no key is dealt round robin.

The conversation key is read as the routers that pin on one read it, first found
wins: Dynamo's ``X-Dynamo-Parent-Session-ID`` header (a subagent's call: Dynamo binds
the subagents of one parent together, under a group key of the parent's, apart from
the parent's own binding: ai-dynamo/dynamo pull request 14521), Dynamo's
``X-Dynamo-Session-ID`` header, Dynamo's body field
``nvext.session_control.session_id``, SGLang's model gateway's
``X-SMG-Routing-Key`` header, then the profile's own ``router_header``
(``X-Session-ID`` by default; set it to a suite's ``conversation_header``).

- ``least_loaded``: the replica with the fewest requests in flight (routed to it
  and not yet done: waiting, running, or on their way into its queue), ties to the
  lowest index, as vllm-router's and SGLang's load-aware policies count their own
  outstanding requests;
- ``prefix_aware``: the replica whose prefix cache holds the longest run of this
  prompt's leading KV blocks (the same chained block hashes the engines look up),
  ties and no hit at all to the least loaded of the tied ones (llm-d's precise
  prefix-cache scorer, SGLang's cache-aware policy, with the load as tie-break).

The policy is a closed set (:class:`RoutingPolicy`); the load- and prefix-aware
policies read the replicas' state through a :class:`ReplicaView` (replicas.py), not
a router of their own. Routing is deterministic: the same arrival and completion
order of the same requests routes them the same way, which is what makes the hit
rates of two policies comparable run to run.
"""

from __future__ import annotations

import re
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from enum import StrEnum
from typing import Any, Protocol

__all__ = [
    "DYNAMO_PARENT_HEADER",
    "DYNAMO_SESSION_HEADER",
    "PREFILL_REPLICA_HEADER",
    "REPLICA_HEADER",
    "ROUTER_POLICIES",
    "SGLANG_ROUTING_HEADER",
    "STATE_POLICIES",
    "SUBAGENT_GROUP",
    "ReplicaView",
    "Router",
    "RoutingPolicy",
    "conversation_key",
    "is_header_name",
]

REPLICA_HEADER = "x-replica-id"  # on every answer of a multi-replica simulator: the index
PREFILL_REPLICA_HEADER = "x-prefill-replica-id"  # disaggregated: the prefill engine's name
DYNAMO_SESSION_HEADER = "X-Dynamo-Session-ID"
DYNAMO_PARENT_HEADER = "X-Dynamo-Parent-Session-ID"
SUBAGENT_GROUP = "\x01group:"  # prefixes a parent's id: no header value can carry it
SGLANG_ROUTING_HEADER = "X-SMG-Routing-Key"  # SGLang model gateway (consistent hashing)
MAX_PINNED = 100_000  # conversations remembered (least recently seen forgotten first)

_TOKEN = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")  # an HTTP header name (RFC 9110 token)


class RoutingPolicy(StrEnum):
    """How the router picks a replica (the profile's ``router`` key)."""

    ROUND_ROBIN = "round_robin"
    SESSION = "session"
    LEAST_LOADED = "least_loaded"
    PREFIX_AWARE = "prefix_aware"


class ReplicaView(Protocol):
    """What the state-reading policies read of the replicas (replicas.py)."""

    def loads(self) -> list[int]:
        """Requests in flight on each replica, in replica order."""

    def cached_blocks(self, replica: int, hashes: Sequence[int]) -> int:
        """How many of ``hashes`` (a prompt's chained block hashes), from the first,
        the replica's prefix cache holds now (a lookup: no counter moves)."""


ROUTER_POLICIES = tuple(p.value for p in RoutingPolicy)
# the policies that read the replicas' state (a ReplicaView)
STATE_POLICIES = frozenset({RoutingPolicy.LEAST_LOADED, RoutingPolicy.PREFIX_AWARE})


def is_header_name(name: str) -> bool:
    """Whether ``name`` is a valid HTTP header name."""
    return bool(_TOKEN.fullmatch(name))


def _body_session(body: Any) -> str | None:
    """Dynamo's ``nvext.session_control.session_id`` (a non-empty string), else None."""
    if body.__class__ is not dict:
        return None
    nvext = body.get("nvext")
    if nvext.__class__ is not dict:
        return None
    control = nvext.get("session_control")
    if control.__class__ is not dict:
        return None
    session = control.get("session_id")
    return session if session.__class__ is str and session else None


def conversation_key(headers: Mapping[str, str], body: Any, header: str) -> str | None:
    """The request's conversation key (see the module's docstring), None without one.

    ``headers`` is looked up as given (aiohttp's are case-insensitive)."""
    parent = headers.get(DYNAMO_PARENT_HEADER)
    if parent:
        return SUBAGENT_GROUP + parent
    key = headers.get(DYNAMO_SESSION_HEADER)
    if key:
        return key
    key = _body_session(body)
    if key:
        return key
    key = headers.get(SGLANG_ROUTING_HEADER)
    if key:
        return key
    return headers.get(header) or None if header else None


class Router:
    """Picks the replica of each request; one per simulator, shared by its APIs."""

    def __init__(
        self,
        replicas: int,
        policy: RoutingPolicy | str,
        header: str = "",
        view: ReplicaView | None = None,
    ) -> None:
        if replicas < 1:
            raise ValueError(f"replicas must be at least 1, got {replicas}")
        self.replicas = replicas
        self.policy = RoutingPolicy(policy)
        if view is None and self.policy in STATE_POLICIES:
            raise ValueError(f"the {self.policy} policy reads the replicas' state: give a view")
        self.view = view
        self.header = header
        self._next = 0  # the round-robin pointer (unkeyed requests and new conversations)
        self._pinned: OrderedDict[str, int] = OrderedDict()  # conversation -> replica
        self.routed = [0] * replicas  # requests sent to each replica

    def _deal(self) -> int:
        replica = self._next
        self._next = (replica + 1) % self.replicas
        return replica

    def route(self, headers: Mapping[str, str], body: Any, hashes: Sequence[int] = ()) -> int:
        """The replica (0-based) that serves this request; ``hashes`` are its prompt's
        chained KV block hashes (read by ``prefix_aware`` only)."""
        policy = self.policy
        if policy is RoutingPolicy.ROUND_ROBIN:
            replica = self._deal()
        elif policy is RoutingPolicy.SESSION:
            key = conversation_key(headers, body, self.header)
            replica = self._sticky(key) if key is not None else self._deal()
        else:
            replica = self._by_state(policy, hashes)
        self.routed[replica] += 1
        return replica

    def _by_state(self, policy: RoutingPolicy, hashes: Sequence[int]) -> int:
        """``least_loaded``, or ``prefix_aware`` (the longest cached prefix, then the load)."""
        view = self.view
        assert view is not None
        loads = view.loads()
        candidates = list(range(self.replicas))
        if policy is RoutingPolicy.PREFIX_AWARE and hashes:
            held = [view.cached_blocks(i, hashes) for i in candidates]
            best = max(held)
            if best:  # only the replicas holding the longest prefix
                candidates = [i for i in candidates if held[i] == best]
        return min(candidates, key=lambda i: (loads[i], i))

    def _sticky(self, key: str) -> int:
        pinned = self._pinned
        replica = pinned.get(key)
        if replica is None:
            replica = self._deal()
            pinned[key] = replica
            if len(pinned) > MAX_PINNED:
                pinned.popitem(last=False)
        else:
            pinned.move_to_end(key)
        return replica
