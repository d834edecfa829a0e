"""One request's state inside the engine."""

from __future__ import annotations

from collections.abc import Sequence
from enum import StrEnum
from typing import Any

__all__ = ["ABORTED", "DROPPED", "FINISHED", "NEW", "RUNNING", "WAITING", "Request", "RequestState"]


class RequestState(StrEnum):
    """Where a request is in the engine (a ``StrEnum``: equal to, and shown as, ``"new"`` etc.)."""

    NEW = "new"  # created, not yet in the wait queue
    WAITING = "waiting"  # queued (or preempted back to the queue)
    RUNNING = "running"  # scheduled: prefilling or decoding
    FINISHED = "finished"
    ABORTED = "aborted"  # the client went away
    DROPPED = "dropped"  # could never fit (virtual runs)


# the members as module constants: the engine's hot loops compare against these (a plain
# global is ~5x quicker to load than an enum member, RequestState.RUNNING)
NEW, WAITING, RUNNING, FINISHED, ABORTED, DROPPED = RequestState


class Request:
    """A request's progress, KV holdings and timestamps (seconds, simulated clock).

    Progress follows vLLM: ``num_computed`` tokens have KV; the request's
    known tokens are its prompt plus what it generated so far, and a step that
    computes up to the last known token emits the next one. Preemption
    (recompute) sets ``num_computed`` back to 0, keeping what was generated.
    While a request decodes in lockstep (``join >= 0``, lockstep.py) its
    ``num_computed``, ``generated``, ``blocks`` and ``token_times`` are those of the
    step it joined at; the engine brings them up to date when it leaves.
    """

    __slots__ = (
        "arrival",
        "block_hashes",
        "blocks",
        "cached_tokens",
        "enqueue_time",
        "finish_time",
        "first_token_time",
        "generated",
        "held",
        "join",
        "lora",
        "max_tokens",
        "num_computed",
        "own_from",
        "owner",
        "preemptions",
        "priority",
        "prompt_len",
        "pub_at",
        "rid",
        "run_seq",
        "schedule_time",
        "seq",
        "slow",
        "state",
        "tok_from",
        "tok_last",
        "token_times",
    )

    def __init__(
        self,
        rid: int,
        arrival: float,
        prompt_len: int,
        max_tokens: int,
        block_hashes: Sequence[int] = (),
        priority: int = 0,
        owner: Any = None,
        lora: int = 0,
        own_from: int | None = None,
    ) -> None:
        self.rid = rid
        self.arrival = arrival
        self.prompt_len = prompt_len
        self.max_tokens = max_tokens
        self.block_hashes = block_hashes
        self.priority = priority
        self.owner = owner  # real time: the token stream to deliver to
        self.lora = lora  # the LoRA adapter it runs with (adapters.py); 0 = the base model
        self.seq = rid
        # block_hashes[own_from:] are this request's alone: no other request publishes them,
        # so lockstep.py may publish them late (default: none known to be)
        self.own_from = len(block_hashes) if own_from is None else own_from
        self.slow = False  # slow.py: a slowed request of the slow replica (it slows its steps)
        self.run_seq = 0  # admission order into the running batch (scheduler.py)
        self.join = -1  # lockstep.py: the step it joined the lockstep decoders at, -1 = not
        self.tok_from = 0  # lockstep.py: the step of its first token not yet in token_times
        self.tok_last = -1  # virtual_ledger.py: the step of its latest token, -1 = none yet
        self.num_computed = 0
        self.generated = 0
        self.blocks = 0
        self.held: list[int] = []
        self.pub_at = 0  # computed tokens at which the next full block can be published
        self.cached_tokens = -1  # set at first scheduling
        self.preemptions = 0
        self.state = RequestState.NEW
        self.enqueue_time = -1.0
        self.schedule_time = -1.0
        self.first_token_time = -1.0
        self.finish_time = -1.0
        self.token_times: list[float] = []

    def __repr__(self) -> str:
        return (
            f"Request(rid={self.rid}, state={self.state}, prompt={self.prompt_len}, "
            f"gen={self.generated}/{self.max_tokens}, computed={self.num_computed}, "
            f"blocks={self.blocks})"
        )
