"""GitHub-flavoured Markdown building blocks: escaped text, tables, ``<details>``,
sparklines, and a document that fits a size cap.

Plain functions without any other package import (like :mod:`pytest_llmperf.svg`), so the
reports (:mod:`pytest_llmperf.reports.markdown`) and the history's export
(:mod:`pytest_llmperf.history.markdown`) write the same Markdown.

- :func:`text` escapes what Markdown would read as markup (``*`` ``_`` ``[`` ``<`` ``|``
  ...): a test id ``test_x[<b>a|b</b>]`` comes out as written, inside a table or not.
- :func:`code` is a code span (``|`` escaped where it sits in a table cell).
- :func:`table` joins cells into a GFM table; a newline in a cell becomes ``<br>``.
- :func:`sparkline`: values as Unicode blocks ``▁▂▃▄▅▆▇█``, a ``│`` before each given index.
- :class:`Document`: sections of blocks, each block with a rank; :meth:`Document.render`
  drops the lowest-ranked blocks (the last first) until the text is within a limit, and
  says what it left out.
"""

from __future__ import annotations

import html
import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

__all__ = [
    "CHAR_LIMIT",
    "KEEP",
    "SPARK_BLOCKS",
    "Block",
    "Document",
    "Section",
    "code",
    "details",
    "sparkline",
    "table",
    "text",
]

# A GitHub comment body holds 65,536 characters (a step summary 1 MiB): a margin under it
CHAR_LIMIT = 60_000
KEEP = 1_000  # a block of this rank is never dropped
_NOTE_ROOM = 600  # characters kept free for the note while blocks are being dropped
SPARK_BLOCKS = "▁▂▃▄▅▆▇█"
_SPECIAL = re.compile(r"([\\`*_\[\]<>|~#!])")


def text(value: object) -> str:
    """``value`` as literal Markdown text (also safe in a table cell): markup characters
    backslash-escaped, ``&`` as an entity, newlines as ``<br>``."""
    out = _SPECIAL.sub(r"\\\1", str(value).replace("&", "&amp;"))
    return _newlines(out)


def code(value: object, *, cell: bool = True) -> str:
    """``value`` as a code span; ``cell``: it goes in a table cell (``|`` escaped there,
    GFM reads ``\\|`` in a cell as a literal pipe, code spans included)."""
    raw = " ".join(str(value).splitlines())
    longest = max((len(m) for m in re.findall(r"`+", raw)), default=0)
    fence = "`" * (longest + 1)
    pad = " " if raw.startswith("`") or raw.endswith("`") or not raw.strip() else ""
    out = f"{fence}{pad}{raw}{pad}{fence}"
    return out.replace("|", "\\|") if cell else out


def _newlines(value: str) -> str:
    return "<br>".join(value.splitlines()) if "\n" in value or "\r" in value else value


def table(
    header: Sequence[str], rows: Sequence[Sequence[str]], *, right: Sequence[int] = ()
) -> str:
    """A GFM table of Markdown cells (escape plain text with :func:`text` first); columns
    in ``right`` are right-aligned. Ends with a newline."""
    align = ["--:" if i in right else "---" for i in range(len(header))]
    lines = [_row(header), _row(align)]
    lines += [_row(r) for r in rows]
    return "\n".join(lines) + "\n"


def _row(cells: Sequence[str]) -> str:
    return "| " + " | ".join(_newlines(c) or " " for c in cells) + " |"


def details(summary: str, body: str, *, open_: bool = False) -> str:
    """A collapsible block: ``summary`` is plain text (HTML-escaped), ``body`` Markdown."""
    head = "<details open>" if open_ else "<details>"
    return f"{head}<summary>{html.escape(summary)}</summary>\n\n{body.rstrip()}\n\n</details>\n"


def sparkline(
    values: Sequence[float | None], breaks: Sequence[int] = (), *, min_span: float = 0.1
) -> str:
    """One block character per value, scaled from the lowest (``▁``) to the highest
    (``█``) of them; a missing value: a space. A ``│`` goes before the value at each index
    of ``breaks`` (a change point) inside the sequence.

    The scale spans at least ``min_span`` of the values' magnitude, centred on them: a
    percent of noise stays within a block or two instead of filling the height (all equal:
    ``▄`` each), while a step of 10% or more takes the whole of it."""
    finite = [float(v) for v in values if v is not None and math.isfinite(v)]
    low, high = (min(finite), max(finite)) if finite else (0.0, 0.0)
    span = max(high - low, min_span * max(abs(high), abs(low)))
    flat = high - low <= 1e-12 * max(abs(high), abs(low), 1.0)
    base = (low + high) / 2 - span / 2
    top = len(SPARK_BLOCKS) - 1
    marks = {b for b in breaks if 0 < b < len(values)}
    out = []
    for i, value in enumerate(values):
        if i in marks:
            out.append("│")
        if value is None or not math.isfinite(value):
            out.append(" ")
        elif flat:
            out.append(SPARK_BLOCKS[3])
        else:
            level = math.floor((float(value) - base) / span * top + 0.5)
            out.append(SPARK_BLOCKS[min(top, max(0, level))])
    return "".join(out)


@dataclass
class Block:
    """A piece of a section: ``rank`` says how much it matters (the lowest is dropped
    first, :data:`KEEP` never); ``what`` names it in the truncation note (``"passing
    test"``); blocks of one ``what`` are counted together."""

    text: str
    rank: int = KEEP
    what: str = ""


@dataclass
class Section:
    """A heading or opening (``head``), blocks and a closing (``tail``). ``head`` may be
    a function of (blocks kept, blocks in all), for a count in a summary line. A section
    with blocks of which none is kept is left out whole."""

    head: str | Callable[[int, int], str] = ""
    blocks: list[Block] = field(default_factory=list)
    tail: str = ""

    def render(self, dropped: set[int]) -> str:
        kept = [b for b in self.blocks if id(b) not in dropped]
        if self.blocks and not kept:
            return ""
        head = self.head(len(kept), len(self.blocks)) if callable(self.head) else self.head
        return head + "".join(b.text for b in kept) + self.tail


@dataclass
class Document:
    """Sections in order; ``note`` (at ``note_at``, a section index) says what a
    shortened document left out, given the counts of each dropped ``what``."""

    sections: list[Section] = field(default_factory=list)
    note_at: int = 1
    note: Callable[[dict[str, int], int], str] = field(default=lambda left, limit: "")

    def render(self, limit: int = CHAR_LIMIT) -> tuple[str, dict[str, int]]:
        """The text within ``limit`` characters and what was left out (``{what: count}``,
        empty when nothing was). Blocks go lowest rank first, the last of a rank first;
        if the kept ones alone overrun, the text is cut at the limit (said in the note)."""
        dropped: set[int] = set()
        full = self._join(dropped, {})
        if len(full) <= limit:
            return full, {}
        order = sorted(
            (
                (b.rank, -pos, b)
                for pos, b in enumerate(b for s in self.sections for b in s.blocks)
                if b.rank < KEEP
            ),
            key=lambda t: (t[0], t[1]),  # lowest rank first, the last of a rank first
        )
        left: dict[str, int] = {}
        size = len(full)  # an estimate until rendered: a section may go whole
        for _, _, block in order:
            if size + _NOTE_ROOM <= limit:
                out = self._join(dropped, left, limit)
                if len(out) <= limit:
                    return out, left
                size = len(out)
            dropped.add(id(block))
            left[block.what] = left.get(block.what, 0) + 1
            size -= len(block.text)
        out = self._join(dropped, left, limit)
        if len(out) <= limit:
            return out, left
        # the blocks that are always kept overrun on their own: cut, and say so
        left["characters"] = len(out) - limit
        out = self._join(dropped, left, limit)
        cut = out[: limit - 80].rsplit("\n", 1)[0]
        return cut + "\n\n*(cut at the size limit)*\n", left

    def _join(self, dropped: set[int], left: dict[str, int], limit: int = CHAR_LIMIT) -> str:
        parts = [s.render(dropped) for s in self.sections]
        if left:
            parts.insert(self.note_at, self.note(left, limit))
        return "".join(p for p in parts if p)
