"""Breaking the terminal summary's lines to a width, never mid-figure.

The summary is read in an 80-column terminal and in CI logs alike; a line that would
pass the width is broken at a clause (``; ``, or before an explanation in parentheses),
between comma-separated figures, or (a sentence) at its spaces, onto indented
continuation lines, so a figure always stays next to its unit and a grep for a verdict
still finds its reason. ``width`` None keeps every line whole.
"""

from __future__ import annotations

import textwrap
from collections.abc import Sequence

__all__ = ["fit", "prose", "wrap_parts"]


def fit(line: str, width: int | None) -> list[str]:
    """``line``, or (wider than ``width``) broken at its clauses (``; ``, or before an
    explanation in parentheses) onto continuation lines indented four more: each break
    as late as still fits, so a figure is never split from its unit."""
    if width is None or len(line) <= width:
        return [line]
    start = len(line) - len(line.lstrip())
    cuts = [k for k in range(start + 1, len(line)) if line.startswith(("; ", " ("), k)]
    if not cuts:
        return [line]
    fitting = [k for k in cuts if k <= width]
    at = max(fitting) if fitting else min(cuts)
    tail = line[at:].removeprefix(";").lstrip()
    return [line[:at], *fit(" " * (start + 4) + tail, width)]


def prose(text: str, width: int | None) -> list[str]:
    """A sentence (a server note) wrapped at spaces, continuation lines indented four."""
    if width is None or len(text) <= width:
        return [text]
    return textwrap.wrap(text, width, subsequent_indent="    ", break_long_words=False)


def wrap_parts(
    parts: Sequence[str], width: int | None, indent: str = "    ", *, sep: str = ","
) -> list[str]:
    """Comma-separated ``parts`` (``sep``: ``";"`` for clauses) on as few lines as fit
    ``width`` (a figure is never split); continuation lines are indented two more than
    the first. A part wider than the line on its own (a sentence: why the cache was not
    reset) is broken at its spaces."""
    lines: list[str] = []
    current = ""
    for part in parts:
        candidate = f"{current}{sep} {part}" if current else part
        pad = indent if not lines else indent + "  "
        # + len(sep): the line ends with the separator when a part follows it
        if current and width is not None and len(pad) + len(candidate) + len(sep) > width:
            lines.append(pad + current + sep)
            candidate = part
        current = candidate
    if current:
        lines.append((indent if not lines else indent + "  ") + current)
    if width is None:
        return lines
    out: list[str] = []
    for line in lines:
        if len(line) <= width:
            out.append(line)
            continue
        lead = line[: len(line) - len(line.lstrip())]
        out += textwrap.wrap(
            line.strip(),
            width,
            initial_indent=lead,
            subsequent_indent=lead + "  ",
            break_long_words=False,
            break_on_hyphens=False,
        )
    return out
