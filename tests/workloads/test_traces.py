"""Reading trace files: each format, sorting, start/limit, offsets, and errors that say where."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from pytest_llmperf.errors import LlmPerfUsageError
from pytest_llmperf.workloads.traces import (
    TRACE_FORMATS,
    Trace,
    TraceRow,
    offsets_ns,
    parse_datetime_ns,
    read_trace,
)

DATA = Path(__file__).parent / "data" / "traces"
MOONCAKE = DATA / "mooncake_sample.jsonl"


def write(tmp_path: Path, name: str, lines: list[str]) -> str:
    path = tmp_path / name
    path.write_text("".join(f"{line}\n" for line in lines), encoding="utf-8")
    return str(path)


def jsonl(tmp_path: Path, records: list[dict], name: str = "t.jsonl") -> str:
    return write(tmp_path, name, [json.dumps(r) for r in records])


def row(ts: float, n_in: int = 10, n_out: int = 5, **extra: object) -> dict:
    return {"timestamp": ts, "input_length": n_in, "output_length": n_out, **extra}


# -- the shipped samples ----------------------------------------------------------------


def test_formats_are_the_four_known_ones() -> None:
    assert TRACE_FORMATS == ("mooncake", "burstgpt", "azure", "jsonl")


def test_mooncake_sample_is_200_rows_over_about_ten_seconds_with_shared_prefixes() -> None:
    trace = read_trace(MOONCAKE, "mooncake")
    assert isinstance(trace, Trace) and trace.format == "mooncake"
    assert len(trace.rows) == 200 and trace.skipped_rows == 0
    assert trace.rows[0].timestamp_s == 0.0 and 9.5 <= trace.span_s <= 10.0
    assert trace.span_s == trace.rows[-1].timestamp_s
    times = [r.timestamp_s for r in trace.rows]
    assert times == sorted(times)
    assert all(50 <= r.input_length <= 600 and r.output_length >= 1 for r in trace.rows)  # type: ignore[operator]
    firsts = [r.hash_ids[0] for r in trace.rows if len(r.hash_ids) == 2]
    assert len(firsts) > 100 and set(firsts) <= {0, 1, 2, 3}  # a few shared 512-token contexts
    others = [h for r in trace.rows for h in r.hash_ids if h >= 1000]
    assert len(others) == len(set(others)) == 200  # every row's own block is its own
    assert [r.line for r in trace.rows] == list(range(1, 201))


def test_burstgpt_sample_skips_the_failed_rows_and_counts_them() -> None:
    trace = read_trace(DATA / "burstgpt_sample.csv", "burstgpt")
    text = (DATA / "burstgpt_sample.csv").read_text().splitlines()
    failed = [n for n, line in enumerate(text[1:], 2) if line.split(",")[3] == "0"]
    assert trace.skipped_rows == len(failed) == 5
    assert len(trace.rows) == 40 - 5
    assert not {r.line for r in trace.rows} & set(failed)
    assert {r.category for r in trace.rows} == {"ChatGPT", "GPT-4"}
    first = text[trace.rows[0].line - 1].split(",")
    assert (trace.rows[0].input_length, trace.rows[0].output_length) == (
        int(first[2]),
        int(first[3]),
    )
    last = text[trace.rows[-1].line - 1].split(",")
    assert trace.span_s == pytest.approx(float(last[0]) - float(first[0]))


def test_azure_sample_keeps_seven_fractional_digits() -> None:
    trace = read_trace(DATA / "azure_sample.csv", "azure")
    assert len(trace.rows) == 40 and trace.skipped_rows == 0
    lines = (DATA / "azure_sample.csv").read_text().splitlines()
    assert lines[1].startswith("2023-11-16 18:15:46.6805900,")
    assert lines[2].startswith("2023-11-16 18:15:46.9064771,")
    assert trace.offsets_ns()[:2] == [0, 225_887_100]  # 100 ns ticks, nothing lost


def test_plain_jsonl_sample_carries_messages_and_keeps_ties_in_file_order() -> None:
    trace = read_trace(DATA / "plain_sample.jsonl", "jsonl")
    assert [r.line for r in trace.rows] == [1, 2, 3, 4, 5, 6]
    chat = trace.rows[1]
    assert chat.input_length is None and chat.messages is not None
    assert [m["role"] for m in chat.messages] == ["system", "user"]
    assert trace.rows[3].input_length == 40  # messages with a given length: taken as given
    assert trace.rows[2].hash_ids == (7, 8) and trace.rows[2].timestamp_s == 0.25
    assert trace.rows[4].timestamp_s == pytest.approx(1.4005)


def test_sessions_sample_keeps_each_session_s_turns() -> None:
    trace = read_trace(DATA / "sessions_sample.jsonl", "jsonl")
    by_session: dict[str | None, list[int]] = {}
    for r in trace.rows:
        by_session.setdefault(r.session_id, []).append(r.line)
    assert by_session == {"harbour": [1, 3, 6], "42": [2, 5, 7], None: [4]}
    assert trace.conversations == 2


def test_mooncake_rows_may_carry_a_session_id(tmp_path: Path) -> None:
    path = jsonl(tmp_path, [row(0, session_id="a"), row(5, session_id=7), row(9)])
    assert [r.session_id for r in read_trace(path, "mooncake").rows] == ["a", "7", None]


# -- sorting, start, limit ----------------------------------------------------------------


def test_rows_are_sorted_stably_by_timestamp(tmp_path: Path) -> None:
    path = jsonl(tmp_path, [row(300), row(100), row(200), row(100), row(0)])
    trace = read_trace(path, "mooncake")
    assert [r.line for r in trace.rows] == [5, 2, 4, 3, 1]  # the two at 100 ms: file order
    assert [r.timestamp_s for r in trace.rows] == [0.0, 0.1, 0.1, 0.2, 0.3]


def test_a_session_s_turns_keep_their_order_even_when_stamped_out_of_order(
    tmp_path: Path,
) -> None:
    records = [
        row(100, session_id="s"),
        row(50),
        row(40, session_id="s"),  # earlier than the turn before it: sent right after it
        row(120, session_id="s"),
        row(0),
    ]
    trace = read_trace(jsonl(tmp_path, records), "jsonl")
    assert [r.line for r in trace.rows] == [5, 2, 1, 3, 4]
    assert [r.timestamp_s for r in trace.rows] == [0.0, 0.05, 0.1, 0.1, 0.12]


def test_start_drops_earlier_rows_and_rebases_on_the_first_kept_one(tmp_path: Path) -> None:
    path = jsonl(tmp_path, [row(t) for t in (1000, 2000, 3000, 3500, 5000)])
    trace = read_trace(path, "mooncake", start=2.0)  # seconds from the first timestamp
    assert [r.line for r in trace.rows] == [3, 4, 5]
    assert [r.timestamp_s for r in trace.rows] == [0.0, 0.5, 2.0]
    assert trace.span_s == 2.0
    assert [r.line for r in read_trace(path, "mooncake", start=1.5).rows] == [3, 4, 5]
    assert [r.line for r in read_trace(path, "mooncake", start=0).rows] == [1, 2, 3, 4, 5]


def test_limit_keeps_the_first_rows_in_time_order(tmp_path: Path) -> None:
    path = jsonl(tmp_path, [row(t) for t in (400, 0, 100, 300, 200)])
    assert [r.line for r in read_trace(path, "mooncake", limit=3).rows] == [2, 3, 5]
    assert len(read_trace(path, "mooncake", limit=99).rows) == 5
    both = read_trace(path, "mooncake", start=0.15, limit=2)
    assert [r.line for r in both.rows] == [5, 4] and both.span_s == 0.1


def test_a_start_past_the_end_is_a_usage_error(tmp_path: Path) -> None:
    path = jsonl(tmp_path, [row(0), row(1500)])
    with pytest.raises(LlmPerfUsageError, match=r"start=2 drops every row.*spans 1\.5 s"):
        read_trace(path, "mooncake", start=2)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"start": -1}, "start must be a number of seconds >= 0, got -1"),
        ({"start": "1s"}, "start must be a number of seconds >= 0, got '1s'"),
        ({"start": True}, "start must be a number of seconds >= 0, got True"),
        ({"start": float("inf")}, "start must be a number of seconds >= 0, got inf"),
        ({"limit": 0}, "limit must be an integer >= 1, got 0"),
        ({"limit": 2.5}, "limit must be an integer >= 1, got 2.5"),
        ({"limit": "10"}, "limit must be an integer >= 1, got '10'"),
    ],
)
def test_bad_start_and_limit_name_the_parameter_and_value(
    tmp_path: Path, kwargs: dict, message: str
) -> None:
    path = jsonl(tmp_path, [row(0)])
    with pytest.raises(LlmPerfUsageError) as info:
        read_trace(path, "mooncake", **kwargs)
    assert str(info.value) == message


# -- offsets ------------------------------------------------------------------------------


def test_offsets_scale_the_timestamps(tmp_path: Path) -> None:
    path = jsonl(tmp_path, [row(t) for t in (1000, 1000.5, 1250, 3000)])
    trace = read_trace(path, "mooncake")
    assert trace.offsets_ns() == [0, 500_000, 250_000_000, 2_000_000_000]
    assert trace.offsets_ns(0.5) == [0, 250_000, 125_000_000, 1_000_000_000]
    assert trace.offsets_ns(2) == [0, 1_000_000, 500_000_000, 4_000_000_000]
    assert offsets_ns(trace, 0.1) == trace.offsets_ns(0.1) == [0, 50_000, 25_000_000, 200_000_000]
    assert offsets_ns(read_trace(MOONCAKE, "mooncake"), 1.0)[0] == 0


@pytest.mark.parametrize("scale", [0, -1, "fast", None, float("nan"), True])
def test_a_bad_time_scale_is_a_usage_error(scale: object) -> None:
    trace = read_trace(MOONCAKE, "mooncake")
    with pytest.raises(LlmPerfUsageError, match=r"time_scale must be a number > 0, got "):
        trace.offsets_ns(scale)  # type: ignore[arg-type]


# -- caching -------------------------------------------------------------------------------


def test_reading_is_cached_until_the_file_changes(tmp_path: Path) -> None:
    path = jsonl(tmp_path, [row(0), row(10)])
    first = read_trace(path, "mooncake")
    assert read_trace(Path(path), "mooncake") is first
    assert read_trace(path, "mooncake", limit=1) is not first
    Path(path).write_text(json.dumps(row(0)) + "\n")
    stat = os.stat(path)
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000_000))
    again = read_trace(path, "mooncake")
    assert again is not first and len(again.rows) == 1


# -- timestamps ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("1970-01-01 00:00:01", 1_000_000_000),
        ("1970-01-01 00:00:01.5", 1_500_000_000),
        ("1970-01-01T00:00:00.0000001", 100),
        ("1970-01-01 00:00:00.123456789", 123_456_789),
        ("1970-01-02 00:00:00Z", 86_400_000_000_000),
        ("1970-01-01 01:00:00+01:00", 0),
        ("1970-01-01 00:00:00.25-0130", 5_400_250_000_000),
        ("2023-11-16 18:15:46.6805900", 1_700_158_546_680_590_000),
        (" 2024-05-10 00:00:00.0095102 ", 1_715_299_200_009_510_200),
    ],
)
def test_datetimes_parse_to_exact_nanoseconds(text: str, expected: int) -> None:
    assert parse_datetime_ns(text) == expected


@pytest.mark.parametrize(
    "text", ["", "12.5", "2023-02-30 00:00:00", "2023-11-16", "2023-11-16 25:00:00", "yesterday"]
)
def test_non_datetimes_are_not_parsed(text: str) -> None:
    assert parse_datetime_ns(text) is None


def test_azure_accepts_plain_seconds_and_skips_empty_rows(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "a.csv",
        [
            "TIMESTAMP,ContextTokens,GeneratedTokens",
            "10.5,100,20",
            "12,0,5",
            "11.25,50,0",
            "13,7,1",
        ],
    )
    trace = read_trace(path, "azure")
    assert [(r.timestamp_s, r.input_length, r.output_length) for r in trace.rows] == [
        (0.0, 100, 20),
        (2.5, 7, 1),
    ]
    assert trace.skipped_rows == 2


def test_burstgpt_tolerates_extra_columns_in_any_order(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "b.csv",
        [
            "Timestamp,Session ID,Elapsed time,Model,Request tokens,Response tokens,Total tokens,"
            "Log Type",
            "5,s1,1.5,GPT-4,100,20,120,Conversation log",
            "6.5,s1,2.0,ChatGPT,30,0,30,Conversation log",
        ],
    )
    trace = read_trace(path, "burstgpt")
    assert [(r.input_length, r.output_length, r.category) for r in trace.rows] == [
        (100, 20, "GPT-4")
    ]
    assert trace.skipped_rows == 1
    reordered = write(tmp_path, "c.csv", ["Response tokens,Timestamp,Request tokens", "8,1,9"])
    (only,) = read_trace(reordered, "burstgpt").rows
    assert (only.input_length, only.output_length, only.category) == (9, 8, "")


def test_trace_row_defaults() -> None:
    r = TraceRow(timestamp_s=0.0, input_length=5, output_length=3)
    assert (r.hash_ids, r.messages, r.session_id, r.line, r.category) == ((), None, None, 0, "")


# -- errors that say where ---------------------------------------------------------------------

BAD_JSON_ROWS = [
    ("mooncake", '{"timestamp": 0, "input_length": 5', "line 2: not valid JSON"),
    ("mooncake", '{"timestamp": 0, "input_length": "abc", "output_length": 3}',
     "line 2: input_length must be an integer >= 1, got 'abc'"),
    ("mooncake", '{"timestamp": 0, "input_length": 0, "output_length": 3}',
     "line 2: input_length must be an integer >= 1, got 0"),
    ("mooncake", '{"timestamp": 0, "input_length": 2.5, "output_length": 3}',
     "line 2: input_length must be an integer >= 1, got 2.5"),
    ("mooncake", '{"timestamp": 0, "input_length": true, "output_length": 3}',
     "line 2: input_length must be an integer >= 1, got True"),
    ("mooncake", '{"timestamp": 0, "input_length": 4, "output_length": 0}',
     "line 2: output_length must be an integer >= 1, got 0"),
    ("mooncake", '{"timestamp": 0, "input_length": 4}', "line 2: output_length is missing"),
    ("mooncake", '{"input_length": 4, "output_length": 1}', "line 2: timestamp is missing"),
    ("mooncake", '{"timestamp": -5, "input_length": 4, "output_length": 1}',
     "line 2: timestamp must be a number of milliseconds >= 0, got -5"),
    ("mooncake", '{"timestamp": "9:00", "input_length": 4, "output_length": 1}',
     "line 2: timestamp must be a number of milliseconds >= 0, got '9:00'"),
    ("mooncake", '{"timestamp": NaN, "input_length": 4, "output_length": 1}',
     "line 2: timestamp must be a number of milliseconds >= 0, got nan"),
    ("mooncake", '{"timestamp": 1, "input_length": 4, "output_length": 1, "hash_ids": "1,2"}',
     "line 2: hash_ids must be a list of integers, got '1,2'"),
    ("mooncake", '{"timestamp": 1, "input_length": 4, "output_length": 1, "hash_ids": [1, 2.0]}',
     "line 2: hash_ids must be a list of integers, got [1, 2.0]"),
    ("mooncake", "[1, 2, 3]", "line 2: expected a JSON object, got [1, 2, 3]"),
    ("mooncake", '{"timestamp": 1, "input_length": 4, "output_length": 1, "session_id": [1]}',
     "line 2: session_id must be a non-empty string or an integer, got [1]"),
    ("jsonl", '{"timestamp": 1, "output_length": 1}', "line 2: needs input_length or messages"),
    ("jsonl", '{"timestamp": 1, "output_length": 1, "messages": []}',
     "line 2: messages must be a non-empty list of {role, content} objects, got []"),
    ("jsonl", '{"timestamp": 1, "output_length": 1, "messages": [{"role": "user"}]}',
     "line 2: messages[0] must be an object with string role and content, got {'role': 'user'}"),
    ("jsonl",
     '{"timestamp": 1, "output_length": 1, "messages": [{"role": "assistant", "content": "x"}]}',
     "line 2: the last message's role must be 'user', got 'assistant'"),
    ("jsonl",
     '{"timestamp": 1, "output_length": 1, "messages": [{"role": "user", "content": "x"}], '
     '"hash_ids": [1]}',
     "line 2: give messages or hash_ids, not both"),
    ("jsonl",
     '{"timestamp": 1, "output_length": 1, "messages": [{"role": "user", "content": "x"}], '
     '"input_length": -2}',
     "line 2: input_length must be an integer >= 1, got -2"),
]  # fmt: skip


@pytest.mark.parametrize(("fmt", "bad", "message"), BAD_JSON_ROWS)
def test_a_malformed_json_row_names_the_file_the_line_and_the_value(
    tmp_path: Path, fmt: str, bad: str, message: str
) -> None:
    path = write(tmp_path, "t.jsonl", [json.dumps(row(0)), bad, json.dumps(row(5))])
    with pytest.raises(LlmPerfUsageError) as info:
        read_trace(path, fmt)
    assert str(info.value).startswith(f"trace {path} {message}")


BURSTGPT_HEADER = "Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type"
AZURE_HEADER = "TIMESTAMP,ContextTokens,GeneratedTokens"
BAD_CSV_ROWS = [
    ("burstgpt", BURSTGPT_HEADER, "1,GPT-4,abc,5,5,API log",
     "line 3: Request tokens must be an integer >= 0, got 'abc'"),
    ("burstgpt", BURSTGPT_HEADER, "1,GPT-4,12,-4,8,API log",
     "line 3: Response tokens must be an integer >= 0, got '-4'"),
    ("burstgpt", BURSTGPT_HEADER, "soon,GPT-4,12,4,16,API log",
     "line 3: Timestamp must be a number of seconds >= 0, got 'soon'"),
    ("burstgpt", BURSTGPT_HEADER, "1,GPT-4,12,4",
     "line 3: expected 6 fields as in the header, got 4"),
    ("azure", AZURE_HEADER, "2023-13-01 00:00:00.0000000,5,5",
     "line 3: TIMESTAMP must be a date and time (2023-11-16 18:15:46.6805900) or seconds >= 0, "
     "got '2023-13-01 00:00:00.0000000'"),
    ("azure", AZURE_HEADER, "2023-11-16 18:15:47.0000000,5,1.5",
     "line 3: GeneratedTokens must be an integer >= 0, got '1.5'"),
]  # fmt: skip


@pytest.mark.parametrize(("fmt", "header", "bad", "message"), BAD_CSV_ROWS)
def test_a_malformed_csv_row_names_the_file_the_line_and_the_value(
    tmp_path: Path, fmt: str, header: str, bad: str, message: str
) -> None:
    good = {"burstgpt": "0,GPT-4,10,5,15,API log", "azure": "2023-11-16 18:15:46.0,10,5"}[fmt]
    path = write(tmp_path, "t.csv", [header, good, bad, good])
    with pytest.raises(LlmPerfUsageError) as info:
        read_trace(path, fmt)
    assert str(info.value) == f"trace {path} {message}"


def test_a_csv_without_the_needed_columns_says_which_are_missing(tmp_path: Path) -> None:
    path = write(tmp_path, "t.csv", ["Timestamp,Model,Request tokens", "1,GPT-4,5"])
    with pytest.raises(LlmPerfUsageError) as info:
        read_trace(path, "burstgpt")
    assert f"trace {path} line 1: " in str(info.value)
    assert "missing Response tokens" in str(info.value)
    path = write(tmp_path, "m.jsonl", [json.dumps(row(0))])
    with pytest.raises(LlmPerfUsageError, match="missing TIMESTAMP, ContextTokens"):
        read_trace(path, "azure")  # a JSON file read as CSV: its "header" lacks them


def test_a_missing_file_is_a_usage_error(tmp_path: Path) -> None:
    missing = str(tmp_path / "nope.jsonl")
    with pytest.raises(LlmPerfUsageError) as info:
        read_trace(missing, "mooncake")
    assert str(info.value) == (
        f"trace workload: cannot read path={missing!r}: No such file or directory"
    )
    with pytest.raises(LlmPerfUsageError, match="is not a file"):
        read_trace(tmp_path, "mooncake")


def test_an_unknown_format_lists_the_known_ones() -> None:
    with pytest.raises(LlmPerfUsageError) as info:
        read_trace(MOONCAKE, "sharegpt")
    assert (
        str(info.value) == "format must be one of mooncake, burstgpt, azure, jsonl, got 'sharegpt'"
    )


@pytest.mark.parametrize("path", [None, 3, ""])
def test_a_bad_path_is_a_usage_error(path: object) -> None:
    with pytest.raises(LlmPerfUsageError, match=r"path must be a trace file path, got "):
        read_trace(path, "mooncake")  # type: ignore[arg-type]


def test_an_empty_trace_says_how_many_rows_were_skipped(tmp_path: Path) -> None:
    failed = write(
        tmp_path, "f.csv", [BURSTGPT_HEADER, "1,GPT-4,10,0,10,API log", "2,GPT-4,12,0,12,API log"]
    )
    with pytest.raises(LlmPerfUsageError) as info:
        read_trace(failed, "burstgpt")
    assert str(info.value) == (
        f"trace {failed} (burstgpt) has no usable rows "
        "(2 rows skipped: failed requests: 0 response or request tokens)"
    )
    blank = write(tmp_path, "e.jsonl", ["", "   "])
    with pytest.raises(LlmPerfUsageError, match=r"e\.jsonl \(mooncake\) has no usable rows$"):
        read_trace(blank, "mooncake")
    header_only = write(tmp_path, "h.csv", [AZURE_HEADER])
    with pytest.raises(LlmPerfUsageError, match=r"has no usable rows$"):
        read_trace(header_only, "azure")
    nothing = write(tmp_path, "n.csv", [])
    with pytest.raises(LlmPerfUsageError, match=r"n\.csv: empty file \(no header row\)"):
        read_trace(nothing, "azure")


def test_a_file_that_is_not_utf8_is_a_usage_error(tmp_path: Path) -> None:
    path = tmp_path / "bin.jsonl"
    path.write_bytes(b'{"timestamp": 0}\n\xff\xfe\x00')
    with pytest.raises(LlmPerfUsageError, match="not UTF-8 text"):
        read_trace(path, "mooncake")
