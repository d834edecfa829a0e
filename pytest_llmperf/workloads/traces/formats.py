"""Reading each trace format into rows with absolute timestamps, in file order.

Four formats, each a published trace layout (the column and field names are
theirs):

- ``mooncake``: JSON Lines, ``{"timestamp": ms, "input_length": int,
  "output_length": int, "hash_ids": [int, ...]}`` (Mooncake's FAST'25
  traces, as AIPerf's ``mooncake_trace`` and SGLang's bench_serving replay
  them). ``hash_ids`` is optional; ``session_id`` is carried when present.
- ``jsonl``: the same JSON Lines, where a row may give ``"messages":
  [{"role", "content"}, ...]`` (sent as is) instead of ``input_length``.
  A ``mooncake`` or ``jsonl`` row may name image files, ``"images": ["cat.png",
  ...]`` (paths relative to the trace file), sent with its last user turn.
- ``burstgpt``: BurstGPT's CSV, ``Timestamp,Model,Request tokens,Response
  tokens,Total tokens,Log Type`` (seconds). Rows with 0 response tokens are
  the failed requests of the release: skipped and counted.
- ``azure``: the Azure LLM inference traces (2023, 2024),
  ``TIMESTAMP,ContextTokens,GeneratedTokens``, the timestamp a date and time
  with up to 7 fractional digits (or a plain number of seconds).

A bad row is a usage error naming the file, the line and the value. Numbers
are kept exact: timestamps become integer nanoseconds here, so a 2023 date
with 100 ns ticks loses nothing before it is made relative.
"""

from __future__ import annotations

import csv
import json
import math
import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, NamedTuple, TextIO

from pytest_llmperf.errors import LlmPerfUsageError

__all__ = ["PARSERS", "TRACE_FORMATS", "Parsed", "RawRow", "parse_datetime_ns"]

TRACE_FORMATS: tuple[str, ...] = ("mooncake", "burstgpt", "azure", "jsonl")

NS_PER_MS = 1_000_000
NS_PER_S = 1_000_000_000


class RawRow(NamedTuple):
    """One usable row as the file has it: ``ts_ns`` absolute, in nanoseconds.

    A tuple, not a dataclass: a BurstGPT release has millions of rows.
    """

    ts_ns: int
    line: int
    input_length: int | None
    output_length: int
    hash_ids: tuple[int, ...] = ()
    messages: tuple[Mapping[str, str], ...] | None = None
    session_id: str | None = None
    category: str = ""
    images: tuple[str, ...] = ()


@dataclass
class Parsed:
    """The usable rows of a file, in file order, and how many were skipped (and why)."""

    rows: list[RawRow] = field(default_factory=list)
    skipped: int = 0
    skipped_why: str = ""


class _Where:
    """Names a file and line in error messages: ``trace t.jsonl line 7: ...``."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.line = 0

    def error(self, message: str) -> LlmPerfUsageError:
        return LlmPerfUsageError(f"trace {self.name} line {self.line}: {message}")

    def bad(self, field_name: str, expected: str, value: Any) -> LlmPerfUsageError:
        return self.error(f"{field_name} must be {expected}, got {value!r}")


# -- values --------------------------------------------------------------------------


def _json_count(where: _Where, record: Mapping[str, Any], key: str, minimum: int) -> int:
    """An integer field >= ``minimum`` (an integral float such as ``512.0`` is accepted)."""
    if key not in record:
        raise where.error(f"{key} is missing")
    value = record[key]
    number: int | None = None
    if isinstance(value, int) and not isinstance(value, bool):
        number = value
    elif isinstance(value, float) and math.isfinite(value) and value.is_integer():
        number = int(value)
    if number is None or number < minimum:
        raise where.bad(key, f"an integer >= {minimum}", value)
    return number


def _json_timestamp_ns(where: _Where, record: Mapping[str, Any], key: str) -> int:
    """A timestamp in milliseconds (int or float, >= 0) as integer nanoseconds."""
    if key not in record:
        raise where.error(f"{key} is missing")
    value = record[key]
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, float))
        or not math.isfinite(value)
        or value < 0
    ):
        raise where.bad(key, "a number of milliseconds >= 0", value)
    if isinstance(value, int):
        return value * NS_PER_MS
    return round(value * NS_PER_MS)


def _hash_ids(where: _Where, record: Mapping[str, Any]) -> tuple[int, ...]:
    value = record.get("hash_ids")
    if value is None:
        return ()
    if not isinstance(value, list) or not all(
        isinstance(h, int) and not isinstance(h, bool) for h in value
    ):
        raise where.bad("hash_ids", "a list of integers", value)
    return tuple(value)


def _session_id(where: _Where, record: Mapping[str, Any]) -> str | None:
    value = record.get("session_id")
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (str, int)) or value == "":
        raise where.bad("session_id", "a non-empty string or an integer", value)
    return str(value)


def _images(where: _Where, record: Mapping[str, Any]) -> tuple[str, ...]:
    """``images``: file paths (relative to the trace file), read by the workload."""
    value = record.get("images")
    if value is None:
        return ()
    if not isinstance(value, list) or not all(isinstance(p, str) and p for p in value):
        raise where.bad("images", "a list of image file paths", value)
    return tuple(value)


def _messages(where: _Where, value: Any) -> tuple[Mapping[str, str], ...]:
    if not isinstance(value, list) or not value:
        raise where.bad("messages", "a non-empty list of {role, content} objects", value)
    out: list[Mapping[str, str]] = []
    for k, item in enumerate(value):
        if (
            not isinstance(item, dict)
            or not isinstance(item.get("role"), str)
            or not isinstance(item.get("content"), str)
        ):
            raise where.bad(f"messages[{k}]", "an object with string role and content", item)
        out.append({"role": item["role"], "content": item["content"]})
    if out[-1]["role"] != "user":
        raise where.bad("the last message's role", "'user'", out[-1]["role"])
    return tuple(out)


def _csv_count(where: _Where, column: str, text: str) -> int:
    """A token count from a CSV cell: an integer >= 0 (``"12.0"`` is accepted)."""
    try:
        whole = int(text)
    except ValueError:
        try:
            number = float(text)
        except ValueError:
            raise where.bad(column, "an integer >= 0", text) from None
        if not math.isfinite(number) or not number.is_integer():
            raise where.bad(column, "an integer >= 0", text) from None
        whole = int(number)
    if whole < 0:
        raise where.bad(column, "an integer >= 0", text)
    return whole


def _seconds_ns(cell: str) -> int | None:
    """A plain number of seconds (>= 0) as nanoseconds; None if ``cell`` is not one."""
    try:
        number = float(cell)
    except ValueError:
        return None
    if not math.isfinite(number) or number < 0:
        return None
    return round(number * NS_PER_S)


_DATETIME = re.compile(
    r"(\d{4})-(\d{1,2})-(\d{1,2})[ T](\d{1,2}):(\d{2}):(\d{2})(?:[.,](\d{1,9}))?"
    r"\s*(Z|[+-]\d{2}:?\d{2})?"
)
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def parse_datetime_ns(text: str) -> int | None:
    """``2023-11-16 18:15:46.6805900`` (up to 9 fractional digits, optional ``Z``/``+hh:mm``)
    as integer nanoseconds since the epoch (UTC when no offset is given); None if not one.

    Parsed here: ``datetime.fromisoformat`` takes at most 6 fractional digits
    before Python 3.11 and the Azure traces have 7.
    """
    m = _DATETIME.fullmatch(text.strip())
    if m is None:
        return None
    year, month, day, hour, minute, second = (int(g) for g in m.groups()[:6])
    try:
        moment = datetime(year, month, day, hour, minute, second, tzinfo=UTC)
    except ValueError:
        return None
    offset = m.group(8)
    if offset and offset != "Z":
        sign = -1 if offset[0] == "-" else 1
        digits = offset[1:].replace(":", "")
        moment -= sign * timedelta(hours=int(digits[:2]), minutes=int(digits[2:]))
    whole = moment - _EPOCH
    fraction = int((m.group(7) or "").ljust(9, "0"))
    return (whole.days * 86_400 + whole.seconds) * NS_PER_S + fraction


# -- JSON Lines ----------------------------------------------------------------------


def _json_records(name: str, lines: Iterable[str]) -> Iterator[tuple[_Where, dict[str, Any]]]:
    where = _Where(name)
    for number, line in enumerate(lines, 1):
        where.line = number
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as exc:
            raise where.error(f"not valid JSON ({exc.msg}): {line.strip()[:80]!r}") from None
        if not isinstance(record, dict):
            raise where.error(f"expected a JSON object, got {record!r:.80}")
        yield where, record


def parse_mooncake(name: str, lines: Iterable[str]) -> Parsed:
    out = Parsed()
    for where, record in _json_records(name, lines):
        out.rows.append(
            RawRow(
                ts_ns=_json_timestamp_ns(where, record, "timestamp"),
                line=where.line,
                input_length=_json_count(where, record, "input_length", 1),
                output_length=_json_count(where, record, "output_length", 1),
                hash_ids=_hash_ids(where, record),
                session_id=_session_id(where, record),
                images=_images(where, record),
            )
        )
    return out


def parse_jsonl(name: str, lines: Iterable[str]) -> Parsed:
    out = Parsed()
    for where, record in _json_records(name, lines):
        messages = None
        input_length = None
        if "messages" in record:
            messages = _messages(where, record["messages"])
            if "hash_ids" in record:
                raise where.error("give messages or hash_ids, not both")
            if record.get("input_length") is not None:
                input_length = _json_count(where, record, "input_length", 1)
        elif "input_length" in record:
            input_length = _json_count(where, record, "input_length", 1)
        else:
            raise where.error("needs input_length or messages")
        out.rows.append(
            RawRow(
                ts_ns=_json_timestamp_ns(where, record, "timestamp"),
                line=where.line,
                input_length=input_length,
                output_length=_json_count(where, record, "output_length", 1),
                hash_ids=_hash_ids(where, record),
                messages=messages,
                session_id=_session_id(where, record),
                images=_images(where, record),
            )
        )
    return out


# -- CSV -----------------------------------------------------------------------------


class _CsvTable:
    """A CSV file's data rows (blank lines skipped), with where the needed columns are.

    Iterating yields each row's cells and keeps ``where.line`` on its line.
    Extra columns are ignored; the header's names are matched without case.
    """

    def __init__(
        self,
        name: str,
        lines: Iterable[str],
        required: tuple[str, ...],
        optional: tuple[str, ...] = (),
    ) -> None:
        self.where = _Where(name)
        self._reader = csv.reader(lines)
        self.width = 0
        for cells in self._reader:
            self.where.line = self._reader.line_num
            if not cells or all(not c.strip() for c in cells):
                continue
            header = [c.strip().lower() for c in cells]
            missing = [c for c in required if c.lower() not in header]
            if missing:
                raise self.where.error(
                    f"the header needs the columns {', '.join(required)}; "
                    f"missing {', '.join(missing)} in {cells!r}"
                )
            wanted = (*required, *optional)
            self.index = {c: header.index(c.lower()) for c in wanted if c.lower() in header}
            self.width = len(cells)
            break
        else:
            raise LlmPerfUsageError(f"trace {name}: empty file (no header row)")

    def __iter__(self) -> Iterator[list[str]]:
        where, reader, width = self.where, self._reader, self.width
        for cells in reader:
            where.line = reader.line_num
            if len(cells) != width:
                if not cells or all(not c.strip() for c in cells):
                    continue
                raise where.error(f"expected {width} fields as in the header, got {len(cells)}")
            yield cells


def _seconds_cell(where: _Where, column: str, text: str) -> int:
    ts = _seconds_ns(text)
    if ts is None:
        raise where.bad(column, "a number of seconds >= 0", text)
    return ts


def parse_burstgpt(name: str, lines: Iterable[str]) -> Parsed:
    out = Parsed(skipped_why="failed requests: 0 response or request tokens")
    table = _CsvTable(name, lines, ("Timestamp", "Request tokens", "Response tokens"), ("Model",))
    where, at = table.where, table.index
    i_ts, i_in, i_out = at["Timestamp"], at["Request tokens"], at["Response tokens"]
    i_model = at.get("Model")
    append = out.rows.append
    for cells in table:
        try:  # the common case, fast: plain numbers
            seconds = float(cells[i_ts])
            request, response = int(cells[i_in]), int(cells[i_out])
            ok = 0 <= seconds < math.inf and request >= 0 and response >= 0
        except ValueError:
            ok = False
        if not ok:  # say what is wrong, or accept "12.0"
            seconds = _seconds_cell(where, "Timestamp", cells[i_ts]) / NS_PER_S
            request = _csv_count(where, "Request tokens", cells[i_in])
            response = _csv_count(where, "Response tokens", cells[i_out])
        if request == 0 or response == 0:
            out.skipped += 1
            continue
        model = cells[i_model].strip() if i_model is not None else ""
        append(
            RawRow(round(seconds * NS_PER_S), where.line, request, response, (), None, None, model)
        )
    return out


def parse_azure(name: str, lines: Iterable[str]) -> Parsed:
    out = Parsed(skipped_why="0 context or generated tokens")
    table = _CsvTable(name, lines, ("TIMESTAMP", "ContextTokens", "GeneratedTokens"))
    where, at = table.where, table.index
    i_ts, i_in, i_out = at["TIMESTAMP"], at["ContextTokens"], at["GeneratedTokens"]
    for cells in table:
        text = cells[i_ts]
        ts = parse_datetime_ns(text)
        if ts is None:
            ts = _seconds_ns(text)
        if ts is None:
            raise where.bad(
                "TIMESTAMP", "a date and time (2023-11-16 18:15:46.6805900) or seconds >= 0", text
            )
        context = _csv_count(where, "ContextTokens", cells[i_in])
        generated = _csv_count(where, "GeneratedTokens", cells[i_out])
        if context == 0 or generated == 0:
            out.skipped += 1
            continue
        out.rows.append(RawRow(ts, where.line, context, generated))
    return out


PARSERS: dict[str, Callable[[str, Iterable[str]], Parsed]] = {
    "mooncake": parse_mooncake,
    "burstgpt": parse_burstgpt,
    "azure": parse_azure,
    "jsonl": parse_jsonl,
}


def parse_file(name: str, file: TextIO, format: str) -> Parsed:
    """The rows of an open file in ``format`` (one of :data:`TRACE_FORMATS`)."""
    return PARSERS[format](name, file)
