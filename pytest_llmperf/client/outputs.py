"""A reply's output as the client received it: the answer's text and its tool calls.

Collected only for a request whose sample carries an
:class:`~pytest_llmperf.workloads.output_contract.OutputContract` that keeps its
output (a schema or tools to check it against, or greedy decoding to
fingerprint it): the request's per-event path
(:mod:`~pytest_llmperf.client.request`) hands each stream event here after its
format's reader has read it, so every other request pays nothing. The event is
read a second time, as JSON, by the format's output reader
(:attr:`~pytest_llmperf.apis.format.ApiFormat.read_output`), for what the readers on
the hot path skip: the text itself, a tool call's name and the pieces of its
arguments (what each API streams: the format modules of :mod:`pytest_llmperf.apis`).

Reasoning text is no part of the answer, but it is a token event's piece: the
marks (:meth:`CollectedOutput.marks`) have one value per token event, so a
position in them is a position in the stream.
"""

from __future__ import annotations

import base64
import zlib

from pytest_llmperf.apis.events import load_event
from pytest_llmperf.apis.format import OutputReader
from pytest_llmperf.apis.output_parts import OutputParts, ToolCall
from pytest_llmperf.apis.registry import api_format

__all__ = ["CollectedOutput", "ToolCall", "collects_output"]


class CollectedOutput(OutputParts):
    """The answer text and tool calls of one reply of ``api``, fed event by event
    (:meth:`feed`) or as one whole answer (:meth:`whole`).

    ``marks``: also keep one 2-byte checksum per token event (greedy outputs),
    ``crc32`` of the event's piece (its text, reasoning or arguments) & 0xFFFF,
    big-endian: two outputs of one prompt part at the first position where
    their marks differ.
    """

    __slots__ = ("_marks", "_read")

    def __init__(self, api: str, *, marks: bool = False) -> None:
        super().__init__()
        read = api_format(api).read_output
        if read is None:
            raise ValueError(f"replies of {api!r} carry no output to collect")
        self._read: OutputReader = read
        self._marks: bytearray | None = bytearray() if marks else None

    def feed(self, data: str, event: bool) -> None:
        """One stream event's ``data``, already read by its format's reader; ``event``: it
        was a token event (one mark)."""
        try:
            obj = load_event(data)
        except ValueError:  # [DONE]: the reader accepted it, and it carries nothing
            obj = None
        piece = self._read(self, obj) if obj is not None else ""
        if event:
            self.mark(piece)

    def whole(self, data: str) -> None:
        """A whole (non-streamed) answer: one token event, as the record counts it."""
        obj = load_event(data)
        self.mark(self._read(self, obj))

    def mark(self, piece: str) -> None:
        """One token event that carried ``piece`` (vLLM's blank last token: ``""``)."""
        if self._marks is not None:
            crc = zlib.crc32(piece.encode("utf-8", "surrogatepass")) & 0xFFFF
            self._marks += crc.to_bytes(2, "big")

    def marks(self) -> str:
        """The marks as base64 ("" when not kept)."""
        return base64.b64encode(bytes(self._marks or b"")).decode("ascii")


def collects_output(api: str) -> bool:
    """Whether replies of ``api`` can be collected (not embeddings: they generate none)."""
    return api_format(api).collects_output
