"""The common chat/completions chunk of one stream, recognised without decoding its JSON.

Decoding each chunk's JSON is most of the client's cost per token event on long
streams (benchmarks/loadgen_events.py: 1.17 of 2.04 µs per event at 512 streams,
ITL 0). But within one stream almost every chunk is the same bytes but for its
text: vLLM's
``{"id":"chatcmpl-…","object":"chat.completion.chunk","created":…,"model":"m",
"choices":[{"index":0,"delta":{"content":"TEXT"},"logprobs":null,"finish_reason":null}]}``,
and likewise SGLang's, llama.cpp's and TGI's, each with its own constant fields.

A :class:`ChunkReader` is one stream's parser: it parses each chunk in full
(:func:`~pytest_llmperf.apis.chunks.parse_chunk`) until one is a plain text
token (a delta's ``content``, beside whatever constant fields the server adds, or
a completions ``text``; no finish, usage, timing or error), learns the bytes
before and after that text and what the full parser says of that shape with a
text and with an empty one, and from then on takes a chunk with exactly those
bytes around a text that holds no quote, no backslash and no control character
as that, without decoding it. Such a text is a whole JSON string with no escapes, so the chunk is
the learned one with other text, and :func:`parse_chunk` would say the same of it
(the tests compare the two on every shape they know). Anything else, a finish, a
usage, an escape, a field that changes per chunk, is parsed in full, so a server
whose chunks differ in more than their text costs one failed prefix comparison
per chunk and gets exactly what it got before.

A read of a 10 ms token stream holds one event, so there the cost per event is the cost
per read: :meth:`ChunkReader.sse_run` takes a read that is nothing but whole events of the
learned shape from its bytes, before the SSE parser splits and decodes it.
"""

from __future__ import annotations

import json
import re

from pytest_llmperf.apis.chunks import parse_chunk
from pytest_llmperf.apis.events import ChunkInfo
from pytest_llmperf.apis.format import RunReader

__all__ = ["ChunkReader"]

# A chunk's text that can be taken as it stands: a JSON string's body without escapes.
_UNSAFE = re.compile(r'["\\\x00-\x1f]')
_UNSAFE_BYTES = re.compile(rb'["\\\x00-\x1f]')  # the same, in a read's bytes
_SSE_DATA = b"data: "  # the framing sse_run takes (any other goes through SSEParser)
_TEXT_KEYS = ("content", "text")  # chat's delta, completions' choice


class ChunkReader(RunReader):
    """``parse_chunk`` for one chat or completions stream, with the fast path above."""

    __slots__ = (
        "_empty",
        "_event_end",
        "_event_head",
        "_event_tail",
        "_head",
        "_tail",
        "_text",
        "_tried",
    )

    def __init__(self) -> None:
        self._head = ""  # the learned bytes before the text ("" until learned)
        self._tail = ""  # ... and after it
        # parse_chunk's answers for that shape with a text and with an empty one (shared
        # by the stream's chunks: nothing writes to a chat or completions ChunkInfo)
        self._text = self._empty = ChunkInfo()
        self._tried = 0  # plain text tokens looked at for a shape, at most a few
        # the shape as whole SSE events, in a read's bytes (sse_run): b"data: " + head,
        # the tail, and the tail with the blank line that ends the event
        self._event_head = self._event_tail = self._event_end = b""

    def __call__(self, data: str) -> ChunkInfo:
        head = self._head
        if head and data.startswith(head) and data.endswith(self._tail):
            text = data[len(head) : len(data) - len(self._tail)]
            if _UNSAFE.search(text) is None:
                return self._text if text else self._empty
        info = parse_chunk(data)
        if not head and info.event and self._tried < 4 and _plain(info):
            self._tried += 1
            self._learn(data)
        return info

    @property
    def text_info(self) -> ChunkInfo | None:
        """What :meth:`plain_run`'s chunks mean (a text token), once a shape is learned."""
        return self._text if self._head else None

    def plain_run(self, payloads: list[str], start: int) -> int:
        """How many of ``payloads`` from ``start`` on are the learned shape with a non-empty
        text: each means :attr:`text_info` exactly (what ``self(data)`` would return), so
        a read's run of them is taken at once, without a call or a look-up per event."""
        head, tail = self._head, self._tail
        if not head:
            return 0
        skip, keep = len(head), len(tail)
        search = _UNSAFE.search
        end = start
        for data in payloads[start:] if start else payloads:
            last = len(data) - keep
            if (
                last <= skip  # an empty text (or a shorter chunk): not a text token of this shape
                or not data.startswith(head)
                or not data.endswith(tail)
                or search(data, skip, last) is not None
            ):
                break
            end += 1
        return end - start

    def sse_run(self, read: bytes) -> int:
        """How many token events ``read`` holds if it is nothing but whole SSE events
        (``data: `` + chunk + blank line) of the learned shape with a non-empty text,
        each meaning :attr:`text_info`; else 0 (it goes through the SSE parser then).

        Asked only when the SSE parser holds nothing of an earlier read. On bytes, before
        any decoding: at one event per read (a 10 ms token stream) the SSE split, the
        decoding and :meth:`plain_run` were a third of the client's work per read. No
        newline can stand inside a chunk of this shape (the head and tail are one SSE
        line, and a newline in the text is an unsafe byte), so the blank lines are the
        events' ends, and a text of no quote, backslash or control byte is a JSON
        string's body without escapes, as :meth:`plain_run` requires of it decoded.
        """
        head, end = self._event_head, self._event_end
        if not head or not read.startswith(head) or not read.endswith(end):
            return 0
        skip = len(head)
        last = len(read) - len(end)
        if last > skip and _UNSAFE_BYTES.search(read, skip, last) is None:
            return 1  # one event (a second one's blank line would be unsafe bytes here)
        tail = self._event_tail
        keep = len(tail)
        events = read.split(b"\n\n")
        events.pop()  # after the last blank line: nothing (the read ends with it)
        for event in events:
            last = len(event) - keep
            if (
                last <= skip
                or not event.startswith(head)
                or not event.endswith(tail)
                or _UNSAFE_BYTES.search(event, skip, last) is not None
            ):
                return 0
        return len(events)

    def _learn(self, data: str) -> None:
        """The bytes around the text of ``data``, a plain text token by
        :func:`parse_chunk`, if its text stands in it as one escape-free string."""
        obj = json.loads(data)
        choice = obj["choices"][0]
        delta = choice.get("delta")
        # a delta's content (beside it, fields the shape keeps: role, nulls), or a choice's text
        text = delta.get("content") if isinstance(delta, dict) else choice.get("text")
        if not isinstance(text, str) or not text or _UNSAFE.search(text) is not None:
            return  # an empty or escaped text cannot be placed in the bytes for sure
        for key in _TEXT_KEYS:
            for sep in (":", ": "):  # compact JSON (pydantic, most servers) or json.dumps'
                opening = f'"{key}"{sep}"'
                marker = f'{opening}{text}"'
                if data.count(marker) != 1:
                    continue
                start = data.index(marker) + len(opening)
                head, tail = data[:start], data[start + len(text) :]
                # what the full parser says of this shape, with a text and without one
                # (parse_chunk reads a text only as empty or not: any other text of the
                # shape gets the same answer)
                with_text, empty = parse_chunk(f"{head}x{tail}"), parse_chunk(head + tail)
                if _plain(with_text) and with_text.answer and not empty.answer:
                    self._head, self._tail = head, tail
                    self._text, self._empty = with_text, empty
                    self._event_head = _SSE_DATA + head.encode()
                    self._event_tail = tail.encode()
                    self._event_end = self._event_tail + b"\n\n"
                return


def _plain(info: ChunkInfo) -> bool:
    """A token event of text and nothing else: no reasoning, finish, usage, timing, error."""
    return (
        info.event
        and not info.reasoning
        and info.finish_reason is None
        and info.usage is None
        and info.timing is None
        and info.error is None
        and not info.done
        and not info.blank_finish
    )
