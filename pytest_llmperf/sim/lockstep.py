"""Decoding requests that advance together, one token per step, kept as counts.

Most of a busy engine's batch is requests in plain decode: each step computes
one token of each, appends the same token time to each and, once every
``block_size`` tokens, gives each a KV block. Doing that request by request is
what made long virtual runs slow. A request in steady decode changes in a way
that only depends on how many steps passed since it joined, so this module
keeps, for the requests decoding in lockstep, only what the step needs in
aggregate — how many they are, their total context, how many need a new block
this step, their adapters — plus one token time per step. A request's own
counters and token times are brought up to date (:meth:`Lockstep.settle`) when
it leaves: when it finishes, is preempted or aborted, or when a step cannot
schedule the whole running batch in full (a token-budget cut or a full KV
cache), where the scheduler settles them all and steps request by request.

Its KV blocks are published late, when it leaves: exact because only blocks no
other request can have (``Request.own_from``) are ever left to publish, and a
request joins only if none of them is in the cache yet.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .kv_cache import NEVER, KVCache
from .request import Request

if TYPE_CHECKING:
    from .virtual_ledger import TokenLedger

__all__ = ["Lockstep"]

# token times kept per step before they are handed to the requests (bounds memory of
# a long-running real-time server)
LOG_LIMIT = 4096


class Lockstep:
    """The lockstep decoders of one engine and the token time of each step.

    A member that joined at step ``J`` with ``c`` computed tokens (``r.join``,
    ``r.num_computed``, both unchanged while it is a member) has ``c + (T - J)``
    computed tokens at the start of step ``T``; that step computes one more, grows
    its cache by a block if ``c + T - J`` is a multiple of the block size, and
    emits a token stamped with the step's token time.
    """

    def __init__(self, kv: KVCache) -> None:
        self.kv = kv
        self.bs = kv.block_size
        self.members: dict[Request, None] = {}  # insertion order is irrelevant
        self.offset_sum = 0  # sum of num_computed - join over the members
        self.by_phase = [0] * self.bs  # members by (num_computed - join) % block_size
        self.loras: dict[int, int] = {}  # members per adapter (adapter 0 not counted)
        self.finishing: dict[int, list[Request]] = {}  # step -> members ending at it
        self.log: list[float] = []  # token time of steps log_base, log_base + 1, ...
        self.log_base = 0
        self.joins = 0  # requests that joined, ever (tests: the fast path ran)
        # virtual_ledger.py (set by the engine): steps' token times kept there, and a
        # member's tokens reported there as a run of steps, not copied into token_times
        self.ledger: TokenLedger | None = None

    def __len__(self) -> int:
        return len(self.members)

    # -- what a step needs --------------------------------------------------------
    def context(self, tick: int) -> int:
        """Computed tokens of all members at the start of step ``tick``."""
        return self.offset_sum + len(self.members) * tick

    def grows(self, tick: int) -> int:
        """Members needing a new KV block in step ``tick``."""
        return self.by_phase[-tick % self.bs]

    def record(self, tick: int, t_tok: float) -> None:
        """The token time of step ``tick`` (called for every step, members or not)."""
        if self.ledger is not None:
            self.ledger.record(t_tok)
            return
        if len(self.log) >= LOG_LIMIT:
            self._hand_out(tick)
        self.log.append(t_tok)

    def finishing_at(self, tick: int) -> list[Request]:
        """Members whose last token is emitted by step ``tick``, settled (after
        :meth:`record` of that step)."""
        due = self.finishing.pop(tick, None)
        if due is None:
            return []
        out = []
        for r in due:  # entries of requests that left (and maybe came back) are stale
            if r.join >= 0 and r.join + r.max_tokens - r.generated - 1 == tick:
                self.settle(r, tick + 1)
                out.append(r)
        return out

    # -- membership -------------------------------------------------------------
    def can_join(self, r: Request) -> bool:
        """Whether ``r``, which just emitted a token and goes on decoding, may join.

        Its cache must be exactly its computed tokens' blocks, and every block it has
        still to publish must be its own and not in the cache already (a preempted
        request's earlier copy would end its chain where publishing at each step would
        have)."""
        c = r.num_computed
        if r.blocks != -(-c // self.bs):
            return False
        if r.pub_at == NEVER:
            return True
        held = len(r.held)
        if held < r.own_from:
            return False
        if r.preemptions:
            refs = self.kv.refs
            return not any(h in refs for h in r.block_hashes[held:])
        return True

    def join(self, r: Request, tick: int) -> None:
        """``r`` decodes in lockstep from step ``tick`` on."""
        r.join = r.tok_from = tick
        self.members[r] = None
        self.joins += 1
        k = r.num_computed - tick
        self.offset_sum += k
        self.by_phase[k % self.bs] += 1
        if r.lora:
            self.loras[r.lora] = self.loras.get(r.lora, 0) + 1
        last = tick + r.max_tokens - r.generated - 1
        due = self.finishing.get(last)
        if due is None:
            self.finishing[last] = [r]
        else:
            due.append(r)

    def settle(self, r: Request, upto: int) -> None:
        """Bring ``r`` up to date after steps ``r.join .. upto - 1`` and drop it."""
        done = upto - r.join
        k = r.num_computed - r.join
        self.offset_sum -= k
        self.by_phase[k % self.bs] -= 1
        if r.lora:
            n = self.loras[r.lora] - 1
            if n:
                self.loras[r.lora] = n
            else:
                del self.loras[r.lora]
        del self.members[r]
        r.join = -1
        c = r.num_computed + done
        r.num_computed = c
        r.generated += done
        r.blocks = -(-c // self.bs)
        if self.ledger is None:
            base = self.log_base
            r.token_times.extend(self.log[r.tok_from - base : upto - base])
        else:
            self.ledger.span(r, r.tok_from, upto)
        if c >= r.pub_at:
            self.kv.publish(r, c)

    def settle_all(self, upto: int) -> None:
        """Every member brought up to date and dropped (each in the order it joined)."""
        for r in list(self.members):
            self.settle(r, upto)

    def _hand_out(self, tick: int) -> None:
        """Move the logged token times into the members' lists; empty the log."""
        log, base = self.log, self.log_base
        for r in self.members:
            r.token_times.extend(log[r.tok_from - base :])
            r.tok_from = tick
        self.log = []
        self.log_base = tick
