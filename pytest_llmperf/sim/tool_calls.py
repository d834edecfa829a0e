"""Chat's streamed tool calls, shaped as vLLM sends them.

vLLM streams a tool call as ``delta.tool_calls`` deltas: the first carries the
call's ``index``, ``id`` (``chatcmpl-tool-…``), ``type: "function"`` and
``function: {"name", "arguments": ""}``; every later one carries only ``index``
and ``function.arguments``, a piece of the arguments JSON. ``finish_reason`` is
``tool_calls`` for ``tool_choice`` ``auto`` / ``required`` and ``stop`` for a
named function (OpenAI's convention, which vLLM follows), ``length`` at the cap.

:class:`ToolCallChunks` renders them token by token like
:class:`~pytest_llmperf.sim.deltas.ShapedChunks` (one ready-made chunk per
token, the header token alone), after any reasoning tokens, so both token
paths of the server write them unchanged. Empty deltas (``empty_delta_rate``)
do not apply to tool calls; ``separate_finish_chunk`` does.
"""

from __future__ import annotations

import json

from .deltas import DeltaPlan
from .outputs import OutputPlan
from .wire import ChunkWriter

__all__ = ["ToolCallChunks", "chat_tool_call"]

_MARK = "\x00"


def chat_tool_call(call_id: str, name: str, arguments: str) -> dict[str, object]:
    """A whole tool call in a non-streamed chat message (``message.tool_calls[k]``)."""
    return {
        "id": "chatcmpl-tool-" + call_id,
        "type": "function",
        "function": {"name": name, "arguments": arguments},
    }


class ToolCallChunks:
    """The SSE bytes of a chat answer that calls a tool, token by token, in order."""

    __slots__ = (
        "arg_head",
        "arg_last",
        "arg_tail",
        "at",
        "finish_event",
        "header",
        "header_last",
        "n",
        "pieces",
        "rhead",
        "rlast",
        "rtail",
    )

    def __init__(
        self, w: ChunkWriter, plan: DeltaPlan | None, out: OutputPlan, finish_reason: str
    ) -> None:
        tool = out.tool
        assert tool is not None and out.pieces is not None
        self.n = out.n
        self.at = tool.at
        self.pieces = out.pieces
        separate = plan is not None and plan.separate_finish
        self.finish_event = w.finish_chunk(finish_reason) if separate else None
        last = None if separate else finish_reason
        self.rhead, self.rtail, rlast = w.token_template(finish_reason, reasoning=True)
        self.rlast = self.rtail if separate else rlast
        call = {
            "index": 0,
            "id": "chatcmpl-tool-" + tool.call_id,
            "type": "function",
            "function": {"name": tool.name, "arguments": ""},
        }
        members = '"tool_calls": ' + json.dumps([call])
        self.header = w.delta_chunk(members)
        self.header_last = w.delta_chunk(members, last)
        piece = '"tool_calls": [{"index": 0, "function": {"arguments": "' + _MARK + '"}}]'
        self.arg_head, self.arg_tail = w.delta_chunk(piece).split(_MARK.encode())
        self.arg_last = w.delta_chunk(piece, last).split(_MARK.encode())[1]

    def clip(self, i: int, size: int) -> int:
        """``size`` cut so that a chunk starting at token ``i`` stays in one part, the
        header alone."""
        at = self.at
        if i < at:
            return min(size, at - i)
        return 1 if i == at else size

    def chunk(self, i: int, size: int = 1) -> bytes:
        """The bytes to write for tokens ``i … i+size-1``."""
        end = i + size
        last = end >= self.n
        if i == self.at:
            out = self.header_last if last else self.header
        else:
            text = b"".join(self.pieces[i:end])
            if i < self.at:
                out = self.rhead + b'"' + text + b'"' + (self.rlast if last else self.rtail)
            else:
                out = self.arg_head + text + (self.arg_last if last else self.arg_tail)
        if last and self.finish_event is not None:
            out += self.finish_event
        return out
