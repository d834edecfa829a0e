"""Wait queue policies and vLLM-style batch formation with recompute preemption.

Each step the scheduler first continues the running requests in admission
order (a decode token each, or the next prefill chunk), growing their KV
allocation; when the cache is full it preempts from the tail of the batch —
the most recently admitted requests lose the least work — and puts them back
at the front of the wait queue. Only if nothing was preempted does it admit
waiting requests, in policy order, while the batch has room (max_num_seqs),
the step has token budget (max_num_batched_tokens) and the cache has blocks.
"""

from __future__ import annotations

import heapq
from collections import deque
from collections.abc import Iterator

from .adapters import LoraSlots
from .kv_cache import KVCache
from .lockstep import Lockstep
from .profiles import Profile
from .request import RUNNING, WAITING, Request

__all__ = ["FcfsQueue", "KeyedQueue", "Scheduler", "WaitQueue", "make_wait_queue"]


class WaitQueue:
    """Interface of the wait queues (``push_front`` is for preempted requests)."""

    def __len__(self) -> int:
        raise NotImplementedError

    def push(self, req: Request) -> None:
        raise NotImplementedError

    def push_front(self, req: Request) -> None:
        raise NotImplementedError

    def peek(self) -> Request:
        raise NotImplementedError

    def pop(self) -> Request:
        raise NotImplementedError

    def remove(self, req: Request) -> None:
        raise NotImplementedError

    def put_back(self, reqs: list[Request]) -> None:
        """Return requests popped but skipped this step (LoRA slots full), in order."""
        raise NotImplementedError

    def __iter__(self) -> Iterator[Request]:
        raise NotImplementedError


class FcfsQueue(WaitQueue):
    """Arrival order; preempted requests go back to the front."""

    def __init__(self) -> None:
        self.q: deque[Request] = deque()

    def __len__(self) -> int:
        return len(self.q)

    def __iter__(self) -> Iterator[Request]:
        return iter(self.q)

    def push(self, req: Request) -> None:
        self.q.append(req)

    def push_front(self, req: Request) -> None:
        self.q.appendleft(req)

    def peek(self) -> Request:
        return self.q[0]

    def pop(self) -> Request:
        return self.q.popleft()

    def remove(self, req: Request) -> None:
        self.q.remove(req)

    def put_back(self, reqs: list[Request]) -> None:
        self.q.extendleft(reversed(reqs))


class KeyedQueue(WaitQueue):
    """A heap on a policy key; preempted requests are served before it."""

    def __init__(self, policy: str) -> None:
        self.policy = policy
        self.front: deque[Request] = deque()
        self.heap: list[tuple[int, float, int, Request]] = []
        self.removed: set[int] = set()
        self.n = 0

    def __len__(self) -> int:
        return self.n

    def __iter__(self) -> Iterator[Request]:
        yield from self.front
        for *_, r in sorted(self.heap, key=lambda e: e[:3]):
            if id(r) not in self.removed:
                yield r

    def _key(self, req: Request) -> tuple[int, float, int, Request]:
        if self.policy == "priority":  # lower value first, as in vLLM
            return (req.priority, req.arrival, req.seq, req)
        return (req.prompt_len, req.arrival, req.seq, req)  # sjf: shortest prompt first

    def push(self, req: Request) -> None:
        heapq.heappush(self.heap, self._key(req))
        self.n += 1

    def push_front(self, req: Request) -> None:
        self.front.appendleft(req)
        self.n += 1

    def _clean(self) -> None:
        while self.heap and id(self.heap[0][3]) in self.removed:
            self.removed.discard(id(heapq.heappop(self.heap)[3]))

    def peek(self) -> Request:
        if self.front:
            return self.front[0]
        self._clean()
        return self.heap[0][3]

    def pop(self) -> Request:
        self.n -= 1
        if self.front:
            return self.front.popleft()
        self._clean()
        return heapq.heappop(self.heap)[3]

    def put_back(self, reqs: list[Request]) -> None:
        for r in reqs:
            self.push(r)

    def remove(self, req: Request) -> None:
        if req in self.front:
            self.front.remove(req)
        else:
            self.removed.add(id(req))
        self.n -= 1


def make_wait_queue(policy: str) -> WaitQueue:
    """The wait queue for ``fcfs``, ``priority`` or ``sjf``."""
    return FcfsQueue() if policy == "fcfs" else KeyedQueue(policy)


class Scheduler:
    """Batch formation over a running batch, a wait queue and a KV cache.

    ``running`` is the batch in admission order (a dict used as an ordered set:
    finished requests leave it in O(1), preemption pops its tail). Its requests in
    lockstep decode (lockstep.py) are scheduled in aggregate when every running
    request fits the step as it stands; ``solo`` are the others, stepped one by one.
    """

    def __init__(self, profile: Profile, kv: KVCache) -> None:
        self.kv = kv
        self.waiting = make_wait_queue(profile.scheduling_policy)
        self.running: dict[Request, None] = {}
        self.solo: dict[Request, None] = {}  # running requests not in lockstep, in order
        self.lockstep = Lockstep(kv)
        self.max_num_seqs = profile.max_num_seqs
        self.token_budget = profile.max_num_batched_tokens
        self.chunk_limit = profile.long_prefill_token_threshold or profile.max_num_batched_tokens
        self.block_size = profile.block_size
        self.preemptions = 0
        self.admitted = 0  # admissions so far: Request.run_seq
        self.lora = LoraSlots(profile.max_loras, profile.lora_step_us, profile.lora_load_us)

    def remove(self, req: Request) -> None:
        """Take a settled request out of the running batch (finished or aborted)."""
        del self.running[req]
        self.solo.pop(req, None)

    def preempt(self, victim: Request, tick: int) -> None:
        """Recompute preemption: free its KV, back to the front of the queue."""
        if victim.join >= 0:
            self.lockstep.settle(victim, tick)
        self.kv.release(victim)
        if victim.lora:
            self.lora.release(victim.lora)
        victim.num_computed = 0
        victim.preemptions += 1
        victim.state = WAITING
        self.preemptions += 1
        self.waiting.push_front(victim)

    def settle_lockstep(self, upto: int) -> None:
        """Every lockstep decoder brought up to date and stepped one by one again."""
        if self.lockstep.members:
            self.lockstep.settle_all(upto)
            self.solo = dict(self.running)

    def _lockstep_fits(self, tick: int) -> bool:
        """Whether step ``tick`` schedules every running request in full: the token
        budget covers them all and the cache every block they need. Then the order the
        lockstep decoders' blocks are taken in does not matter, nobody is preempted
        and no token budget runs out before the end of the batch."""
        bs = self.block_size
        chunk = self.chunk_limit
        lock = self.lockstep
        tokens = len(lock)
        blocks = lock.grows(tick)
        for r in self.solo:
            n = r.prompt_len + r.generated - r.num_computed
            if n > chunk:
                n = chunk
            tokens += n
            need = (r.num_computed + n + bs - 1) // bs - r.blocks
            if need > 0:
                blocks += need
        return tokens <= self.token_budget and blocks <= self.kv.free

    def schedule(self, now: float, tick: int = 0) -> tuple[list[Request], list[int]]:
        """Requests of step ``tick`` to run one by one and the tokens each computes.

        The lockstep decoders, if any are left, run too: a token each."""
        kv = self.kv
        bs = self.block_size
        budget = self.token_budget
        chunk = self.chunk_limit
        lock = self.lockstep
        if lock.members:
            if self._lockstep_fits(tick):
                budget -= len(lock)
                kv.take(lock.grows(tick))
            else:
                self.settle_lockstep(tick)
        running = self.running
        solo = self.solo
        order = list(solo)
        reqs: list[Request] = []
        ns: list[int] = []
        preempted = False
        i = 0
        while i < len(order) and budget > 0:
            r = order[i]
            if r.state != RUNNING:  # preempted from the tail, as is everything after it
                break
            n = r.prompt_len + r.generated - r.num_computed
            if n > chunk:
                n = chunk
            if n > budget:
                n = budget
            need = (r.num_computed + n + bs - 1) // bs - r.blocks
            if need > 0 and not kv.grow(r, need):
                victim = None
                while True:  # evict from the tail until r fits (or r itself is evicted)
                    victim, _ = running.popitem()
                    solo.pop(victim, None)
                    self.preempt(victim, tick)
                    preempted = True
                    if victim is r or kv.grow(r, need):
                        break
                if victim is r:
                    break
            reqs.append(r)
            ns.append(n)
            budget -= n
            i += 1
        if preempted and (reqs or lock.members):
            return reqs, ns
        waiting = self.waiting
        max_seqs = self.max_num_seqs
        skipped: list[Request] | None = None  # LoRA-blocked: back to the queue after the step
        while waiting and len(running) < max_seqs and budget > 0:
            r = waiting.peek()
            if r.lora and not self.lora.can_admit(r.lora):
                waiting.pop()  # as vLLM: skipped this step, the requests behind it go on
                if skipped is None:
                    skipped = []
                skipped.append(r)
                continue
            known = r.prompt_len + r.generated
            hit = kv.match_prefix(r, known) if r.num_computed == 0 and r.block_hashes else 0
            start = hit * bs
            n = known - start
            if n > chunk:
                n = chunk
            if n > budget:
                n = budget
            if not kv.allocate_new(r, hit, n):
                kv.query_tokens -= known  # not admitted: do not count the lookup
                kv.hit_tokens -= start
                break
            waiting.pop()
            if r.lora:
                self.lora.admit(r.lora)
            r.num_computed = start
            if r.cached_tokens < 0:
                r.cached_tokens = start
                r.schedule_time = now
            r.state = RUNNING
            r.run_seq = self.admitted
            self.admitted += 1
            running[r] = None
            solo[r] = None
            reqs.append(r)
            ns.append(n)
            budget -= n
        if skipped is not None:
            waiting.put_back(skipped)
        return reqs, ns
