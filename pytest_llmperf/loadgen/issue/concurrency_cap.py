"""``max_concurrency=``: an open loop's cap on requests in flight, first come first served.

Production front-ends (a gateway's per-replica limit, vLLM's bench
``--max-concurrency`` with ``--request-rate``) hold arrivals beyond a limit
in a queue. The schedule still decides *when* each request arrives; a
request that finds every slot busy waits here, and that wait is
``queue_wait``. Its latency still counts from its planned time, because its
user was waiting all along; and the self-check judges the generator on when
it *queued* the request, not on when the cap let it go.

The gate is :class:`~pytest_llmperf.client.slots.SlotGate`, the same first-come,
first-served slots the connection pool uses.
"""

from __future__ import annotations

from pytest_llmperf.client.slots import SlotGate

__all__ = ["SlotGate"]
