"""A conversation thread in progress: its next turn, the replies it quotes, its replica.

Shared by every issuer of multi-turn conversations: the conversation loops
(:mod:`~pytest_llmperf.loadgen.issue.conversations`) and the agent trees
(:mod:`~pytest_llmperf.loadgen.issue.agent_tree`, one :class:`LiveConversation` per
thread). :class:`ConversationBook` builds a turn's request, marks its record and notes
how it went (the next turn's input quotes the server's reply).

Every turn is pinned to its conversation's replica here (:func:`pinned`): a router keeps
a conversation on the replica that holds its prefix cache by what its requests carry (a
session header, Dynamo's headers or ``nvext.session_control``, SGLang's routing key, the
router's own token sent back). The client decides what
(:func:`pytest_llmperf.client.affinity.pin`, from the endpoint's ``--llm-affinity``);
this calls it once per turn with the conversation's id, the thread's ``agent_id`` and
the router token the conversation's last response returned
(``RequestRecord.route_token``).
"""

from __future__ import annotations

import time
from collections import deque
from typing import TYPE_CHECKING

from pytest_llmperf.client.affinity import pin
from pytest_llmperf.client.endpoint import Endpoint
from pytest_llmperf.client.records import RequestRecord
from pytest_llmperf.workloads.base import Sample
from pytest_llmperf.workloads.conversations import (
    ConversationScript,
    ConversationSource,
    TurnResult,
)

if TYPE_CHECKING:  # handed in: the share, a trace's planned rows
    from pytest_llmperf.loadgen.plan.planner import PlannedRequest, ScheduleShare

__all__ = ["ConversationBook", "LiveConversation", "pinned", "route_token"]


_UNSENT = TurnResult(reply="", prompt_tokens=0, output_tokens=0)  # a turn before a mid start


class LiveConversation:
    """A conversation in progress in this process: its next turn and what earlier turns got.

    ``first``: the first turn sent (an agent thread's ``first_turn``, ``start="mid"``);
    ``results`` still holds one entry per turn (``results[j]`` is turn ``j``'s), the
    turns before ``first`` an empty result: they were never sent.
    """

    __slots__ = ("next", "over", "queue", "ready_at", "results", "script", "token", "waiting")

    def __init__(self, script: ConversationScript, first: int = 0) -> None:
        self.script = script
        self.next = first  # the turn to send next
        self.results: list[TurnResult] = [_UNSENT] * first
        self.ready_at = 0  # monotonic ns: previous turn's end + think time
        self.over = False
        self.queue: deque[tuple[PlannedRequest, int]] = deque()  # a trace's rows that fell due
        self.waiting = False  # a trace turn: sending, or waiting for its time
        self.token = ""  # the router's token from the last response (affinity)


class ConversationBook:
    """Which conversations this process runs (``index``, ``index + count``, ...), their turns."""

    def __init__(self, source: ConversationSource, share: ScheduleShare) -> None:
        self.source = source
        self._next = share.index
        self._step = max(1, share.count)

    def start(self) -> LiveConversation:
        """The next conversation of this process's share."""
        live = LiveConversation(self.source.conversation(self._next))
        self._next += self._step
        return live

    @staticmethod
    def sample(live: LiveConversation, endpoint: Endpoint, agent_id: str = "") -> Sample:
        """Turn ``live.next``'s request, pinned to the conversation's replica (affinity)."""
        script = live.script
        sample = script.turn(live.next, live.results)
        if not script.tracks_turns:  # a trace row of no conversation
            return sample
        return pinned(sample, endpoint, script.conversation_id, agent_id, live.token)

    @staticmethod
    def mark(record: RequestRecord, live: LiveConversation, sample: Sample) -> None:
        """Turn index, conversation number, sample and (when a later turn quotes it) reply
        collection."""
        script = live.script
        k = live.next
        record.index = sample.index
        if script.tracks_turns:  # a row alone is no conversation
            record.turn = k
            record.conversation = script.index  # run-wide: each process owns its own indices
        if script.replies and k + 1 < script.turns:
            record.reply = []

    @staticmethod
    def ended(live: LiveConversation, record: RequestRecord, cut: bool = False) -> bool:
        """Note how turn ``live.next`` went; True when the conversation has another turn to send
        (``live.ready_at``: its reply's end plus the think time).

        ``cut``: the request was cancelled at the drain (never delivered as a reply).
        """
        if not ConversationBook.note(live, record, cut):
            return False
        end = record.t_end or time.monotonic_ns()
        live.ready_at = end + live.script.think_ns(live.next)
        return True

    @staticmethod
    def failed(record: RequestRecord, cut: bool = False) -> bool:
        """A turn that ends its conversation (thread) early: failed, cancelled or cut."""
        return cut or not record.ok or record.cancelled

    @staticmethod
    def note(live: LiveConversation, record: RequestRecord, cut: bool = False) -> bool:
        """:meth:`ended` but for the time: the turn's result noted and ``live.next`` advanced
        when there is another turn (else ``live.over``); the router token kept."""
        k = live.next
        live.token = route_token(record, live.token)
        if ConversationBook.failed(record, cut) or k + 1 >= live.script.turns:
            live.over = True
            return False
        prompt = record.usage_prompt_tokens
        live.results.append(
            TurnResult(
                reply="".join(record.reply or ()),
                prompt_tokens=prompt if prompt is not None else record.input_requested,
                output_tokens=record.output_tokens,
            )
        )
        live.next = k + 1
        return True


# -- affinity --------------------------------------------------------------------------


def pinned(
    sample: Sample, endpoint: Endpoint, conversation_id: str, agent_id: str = "", token: str = ""
) -> Sample:
    """``sample`` with what ``endpoint``'s affinity sends for thread ``agent_id`` of
    conversation ``conversation_id`` (``token``: the router's, ``""`` for none yet);
    ``sample`` itself where no affinity is configured (or no conversation id)."""
    if not conversation_id:
        return sample
    return pin(sample, endpoint, conversation_id, agent_id, token)


def route_token(record: RequestRecord, previous: str) -> str:
    """The router token to send on a conversation's next call: the one ``record``'s response
    carried, else ``previous``."""
    return record.route_token or previous
