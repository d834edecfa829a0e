"""The metric definitions of DESIGN.md, checked on hand-built request records."""

import itertools

import pytest

from pytest_llmperf.client.records import ErrorKind, RequestRecord
from pytest_llmperf.results import MetricsAccumulator

MS = 1_000_000
BASE_MS = 10_000  # monotonic clocks never read 0; 0 means "did not happen"


def record(
    sched_ms: float,
    send_ms: float,
    first_ms: float,
    chunk_ms: list[float],
    tokens: int | None = None,
    error: str | None = None,
) -> RequestRecord:
    sched_ms, send_ms, first_ms = (t + BASE_MS for t in (sched_ms, send_ms, first_ms))
    chunk_ms = [t + BASE_MS for t in chunk_ms]
    r = RequestRecord(index=0, t_sched=int(sched_ms * MS))
    r.t_send = int(send_ms * MS)
    if error:
        r.fail(error, "boom", now=int(first_ms * MS))
        return r
    times = [first_ms, *chunk_ms]
    r.t_first = int(first_ms * MS)
    r.t_last = int(times[-1] * MS)
    r.t_end = r.t_last
    r.token_events = len(times)
    r.gaps_ns = [int((b - a) * MS) for a, b in itertools.pairwise(times)]
    r.usage_completion_tokens = tokens
    return r


def test_latencies_count_from_the_planned_send_time() -> None:
    acc = MetricsAccumulator()
    # planned at 0, sent late at 30 ms, first text at 100, last at 190 with 10 tokens
    acc.add(record(0, 30, 100, [130, 160, 190], tokens=10))
    h = acc.histograms
    assert h["ttft"].p(50) == pytest.approx(100.0)
    assert h["e2e"].p(50) == pytest.approx(190.0)
    assert h["schedule_lag"].p(50) == pytest.approx(30.0)
    assert h["tpot"].p(50) == pytest.approx(10.0)  # (190 - 100) / (10 - 1)
    assert h["itl"].count == 3 and h["itl"].p(50) == pytest.approx(30.0)
    assert h["tpot_token_weighted"].count == 9


def test_chunk_count_is_the_fallback_for_output_tokens() -> None:
    acc = MetricsAccumulator()
    acc.add(record(0, 0, 10, [20, 30]))
    assert acc.output_tokens == 3
    assert acc.token_count_source == "events"
    acc.add(record(0, 0, 10, [20], tokens=5))
    assert acc.token_count_source == "mixed"


def test_failures_stay_out_of_latencies_and_count_in_error_rate() -> None:
    acc = MetricsAccumulator()
    acc.add(record(0, 0, 50, [60], tokens=2))
    acc.add(record(10, 10, 20, [], error=ErrorKind.HTTP))
    acc.add(record(20, 20, 30, [], error=ErrorKind.INCOMPLETE))
    assert acc.counts() == {
        "issued": 3,
        "completed": 1,
        "failed": 2,
        "incomplete": 1,
        "cancelled": 0,
        "connection_retries": 0,
        "invalid": 0,
        "blank": 0,
    }
    assert acc.histograms["ttft"].count == 1
    assert acc.histograms["schedule_lag"].count == 3
    assert acc.rate("error_rate") == pytest.approx(2 / 3)
    assert acc.errors == {ErrorKind.HTTP: 1, ErrorKind.INCOMPLETE: 1}


def test_throughput_window_runs_from_first_planned_send_to_last_end() -> None:
    acc = MetricsAccumulator()
    acc.add(record(0, 0, 100, [200], tokens=4))
    acc.add(record(500, 500, 900, [1000], tokens=6))
    assert acc.window_s == pytest.approx(1.0)
    assert acc.rate("request_throughput") == pytest.approx(2.0)
    assert acc.rate("output_throughput") == pytest.approx(10.0)


def test_goodput_counts_requests_within_every_per_request_limit() -> None:
    acc = MetricsAccumulator(request_limits_ms={"ttft": 150, "tpot": 20})
    acc.add(record(0, 0, 100, [110, 120], tokens=3))  # good
    acc.add(record(0, 0, 200, [210], tokens=2))  # ttft too slow
    acc.add(record(0, 0, 100, [150, 200], tokens=3))  # tpot 50 ms too slow
    acc.add(record(0, 0, 100, [], error=ErrorKind.HTTP))  # failed
    assert acc.rate("goodput") == pytest.approx(1 / 4)


def test_untracked_warmup_requests_are_ignored() -> None:
    acc = MetricsAccumulator()
    r = record(0, 0, 10, [20], tokens=2)
    r.tracked = False
    acc.add(r)
    assert acc.issued == 0 and acc.histograms["ttft"].count == 0


def test_state_round_trip_and_merge() -> None:
    a, b = MetricsAccumulator(), MetricsAccumulator()
    a.add(record(0, 0, 100, [200], tokens=4))
    b.add(record(300, 300, 350, [400], tokens=2))
    b.add(record(300, 300, 350, [], error=ErrorKind.CONNECT))
    restored = MetricsAccumulator.from_state(a.to_state())
    restored.merge(MetricsAccumulator.from_state(b.to_state()))
    a.merge(b)
    assert restored.summary() == a.summary()
    assert restored.counts() == {
        "issued": 3,
        "completed": 2,
        "failed": 1,
        "incomplete": 0,
        "cancelled": 0,
        "connection_retries": 0,
        "invalid": 0,
        "blank": 0,
    }


def _blank_without_events(sched_ms: float, end_ms: float, tokens: int) -> RequestRecord:
    """A reply whose usage counts ``tokens`` and that streamed no event (transformers
    serve's shape for tokens that decode to nothing): completed, blank, ended at end_ms."""
    r = RequestRecord(index=0, t_sched=int((sched_ms + BASE_MS) * MS))
    r.t_send = r.t_sched
    r.t_end = int((end_ms + BASE_MS) * MS)
    r.usage_completion_tokens = tokens
    r.blank = True
    return r


def test_blank_replies_are_completed_counted_blank_and_timed_where_they_had_events() -> None:
    acc = MetricsAccumulator(request_limits_ms={"e2e": 1000.0})
    acc.add(record(0, 0, 40, [50, 60], tokens=3))  # text
    with_events = record(0, 0, 30, [35], tokens=2)  # vLLM: empty deltas, each an event
    with_events.blank = True
    acc.add(with_events)
    acc.add(_blank_without_events(0, 80, tokens=32))
    acc.add(record(0, 0, 20, [], error=ErrorKind.EMPTY))  # nothing generated: failed
    counts = acc.counts()
    assert (counts["completed"], counts["failed"], counts["blank"]) == (3, 1, 2)
    assert acc.rate("blank_rate") == pytest.approx(2 / 3)  # of the completed: not the issued
    assert acc.rate("error_rate") == pytest.approx(1 / 4)
    assert acc.summary()["blank_rate"] == round(2 / 3, 6)
    h = acc.histograms
    assert h["ttft"].count == 2  # the no-event blank has no first token
    assert h["e2e"].count == 3 and h["e2e"].max == pytest.approx(80.0, rel=0.01)
    assert acc.output_tokens == 3 + 2 + 32 and acc.good == 3


def test_blank_counts_merge_and_survive_the_state_and_no_completion_rates_zero() -> None:
    assert MetricsAccumulator().rate("blank_rate") == 0.0
    a, b = MetricsAccumulator(), MetricsAccumulator()
    a.add(_blank_without_events(0, 10, tokens=4))
    b.add(record(0, 0, 10, [20], tokens=2))
    b.add(_blank_without_events(0, 30, tokens=4))
    a.merge(b)
    assert a.blank == 2 and a.completed == 3
    again = MetricsAccumulator.from_state(a.to_state())
    assert again.counts() == a.counts() and again.rate("blank_rate") == pytest.approx(2 / 3)
