"""Incremental Server-Sent Events parsing.

Servers split events across reads and pack several events into one read; the
parser keeps the partial tail between ``feed`` calls so each event is handed
out exactly once, with the timestamp of the read that completed it.
"""

from __future__ import annotations

__all__ = ["MAX_LINE_BYTES", "OversizedEvent", "SSEParser"]

MAX_LINE_BYTES = 64 * 1024 * 1024  # one token chunk is ~200 bytes; this is a runaway line


class OversizedEvent(ValueError):
    """A line grew past ``max_line_bytes`` without ending (memory must stay bounded)."""


class SSEParser:
    """Feed bytes, get the ``data`` payload of each complete event.

    Follows the WHATWG rules that matter for LLM servers: lines end in LF,
    CRLF or CR; a blank line ends an event; ``:`` lines are comments
    (keep-alives); several ``data:`` lines join with newlines; other fields
    (``event:``, ``id:``, ``retry:``) are recorded in ``last_event_type`` or
    ignored.
    """

    def __init__(self, max_line_bytes: int = MAX_LINE_BYTES) -> None:
        self._buffer = b""
        self._parts: list[bytes] = []  # pieces of one long line, joined once it ends
        self._parts_size = 0
        self.max_line_bytes = max_line_bytes
        self._data: list[str] = []
        self.last_event_type = ""
        # nothing of an earlier read is held (no partial line, no event without its blank
        # line): the next read begins an event, so its bytes can be read on their own
        self.idle = True

    def feed(self, chunk: bytes) -> list[str]:
        if (
            chunk.endswith(b"\n\n")
            and not (self._buffer or self._parts or self._data)
            and b"\r" not in chunk
        ):
            # The shape nearly every server sends, one or more whole "data: ...\n\n"
            # events: decoded once (UTF-8 never has a newline byte inside a character, so
            # this is each event's own decoding) and split on the blank lines instead of
            # line by line (the general path below gives the same events; it runs for
            # anything else). Half the cost per event of splitting and decoding each.
            text = chunk.decode("utf-8", errors="replace")
            events: list[str] = []
            for block in text[:-2].split("\n\n"):
                if not block.startswith("data:") or "\n" in block:
                    break
                events.append(block[6:] if block[5:6] == " " else block[5:])
            else:
                return events
        self.idle = False  # until this read is parsed: below, or a mid-line read
        if b"\n" not in chunk and b"\r" not in chunk:
            # Mid-line (a huge chunk arriving in reads): collect without re-copying the
            # buffer on every read, which would cost O(n^2) and stall the event loop.
            self._parts.append(chunk)
            self._parts_size += len(chunk)
            if len(self._buffer) + self._parts_size > self.max_line_bytes:
                raise OversizedEvent(f"an SSE line exceeded {self.max_line_bytes} bytes")
            return []
        if self._parts:
            self._buffer += b"".join(self._parts)
            self._parts.clear()
            self._parts_size = 0
        data = self._buffer + chunk
        # A CR at the very end may be the first half of a CRLF split across reads.
        held = b"\r" if data.endswith(b"\r") else b""
        if held:
            data = data[:-1]
        events = []
        if b"\r" in data:
            data = data.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
        *lines, tail = data.split(b"\n")
        self._buffer = tail + held
        pending = self._data
        for raw in lines:  # the common lines inline: this runs for every line of every stream
            if raw.startswith(b"data:"):
                value = raw[6:] if raw[5:6] == b" " else raw[5:]
                pending.append(value.decode("utf-8", errors="replace"))
            elif raw:
                self._line(raw, events)
                pending = self._data
            elif pending:
                events.append(pending[0] if len(pending) == 1 else "\n".join(pending))
                pending = self._data = []
        self.idle = not (self._buffer or self._data)
        return events

    def close(self) -> list[str]:
        """Events still pending when the stream ends without a final blank line."""
        events: list[str] = []
        if self._parts:
            self._buffer += b"".join(self._parts)
            self._parts.clear()
            self._parts_size = 0
        if self._buffer:
            self._line(self._buffer, events)
            self._buffer = b""
        self._line(b"", events)
        self.idle = True
        return events

    def _line(self, raw: bytes, events: list[str]) -> None:
        if not raw:
            if self._data:
                events.append("\n".join(self._data))
                self._data = []
            return
        line = raw.decode("utf-8", errors="replace")
        if line.startswith(":"):
            return
        name, _, value = line.partition(":")
        if value.startswith(" "):
            value = value[1:]
        if name == "data":
            self._data.append(value)
        elif name == "event":
            self.last_event_type = value
