"""ttfo, token lengths and error samples, as the accumulator keeps and merges them."""

from __future__ import annotations

from pytest_llmperf.client.records import ErrorKind, RequestRecord
from pytest_llmperf.results.accumulator import MetricsAccumulator
from pytest_llmperf.results.error_samples import MAX_SAMPLES, ErrorSamples

MS = 1_000_000


def done(i: int, *, prompt: int, out: int, reasoning_ms: int = 0) -> RequestRecord:
    r = RequestRecord(index=i, t_sched=i * 1000 * MS, input_requested=100, output_requested=10)
    r.t_send = r.t_sched
    r.t_first = r.t_sched + 20 * MS
    r.t_out = r.t_first + reasoning_ms * MS
    r.gaps_ns = [5 * MS] * 9
    r.t_last = r.t_first + 45 * MS
    r.t_end = r.t_last
    r.token_events = 10
    r.usage_prompt_tokens, r.usage_completion_tokens = prompt, out
    return r


def failed(i: int, kind: str, status: int | None, detail: str) -> RequestRecord:
    r = RequestRecord(index=i, t_sched=i * MS, status=status)
    r.fail(kind, detail, now=i * MS + 1)
    return r


def test_ttfo_is_the_first_answer_and_counts_for_goodput():
    acc = MetricsAccumulator(request_limits_ms={"ttfo": 30.0})
    acc.add(done(0, prompt=100, out=10, reasoning_ms=5))  # answer at 25 ms: good
    acc.add(done(1, prompt=100, out=10, reasoning_ms=15))  # answer at 35 ms: not good
    no_answer = done(2, prompt=100, out=10)
    no_answer.t_out = 0  # reasoning only: its ttfo limit is judged on e2e (65 ms)
    acc.add(no_answer)
    assert acc.histograms["ttfo"].count == 2
    assert acc.histograms["ttft"].count == 3
    assert acc.good == 1


def test_token_lengths_compare_requested_with_the_servers_usage():
    acc = MetricsAccumulator()
    acc.add(done(0, prompt=110, out=10))
    acc.add(done(1, prompt=130, out=6))
    lengths = acc.token_lengths("tok")
    assert lengths["input_requested_mean"] == 100 and lengths["input_server_mean"] == 120
    assert lengths["input_deviation"] == 0.2
    assert lengths["output_server_mean"] == 8 and lengths["output_deviation"] == -0.2
    assert lengths["output_events_mean"] == 10 and lengths["tokenizer"] == "tok"


def test_a_completed_request_without_token_events_counts_but_has_no_latency():
    acc = MetricsAccumulator()
    r = RequestRecord(index=0, t_sched=0, t_send=1, t_end=5 * MS, usage_completion_tokens=4)
    acc.add(r)
    assert acc.completed == 1 and acc.output_tokens == 4
    assert acc.histograms["ttft"].count == 0 and acc.histograms["e2e"].count == 0


def test_error_samples_keep_the_servers_words_and_merge_across_workers():
    a, b = MetricsAccumulator(), MetricsAccumulator()
    for i in range(3):
        a.add(failed(i, ErrorKind.HTTP, 422, "HTTP 422: body.top_k: Extra inputs"))
    b.add(failed(9, ErrorKind.HTTP, 422, "HTTP 422: body.top_k: Extra inputs"))
    b.add(failed(10, ErrorKind.READ_TIMEOUT, None, "no bytes for 5 s (stall)"))
    a.merge(MetricsAccumulator.from_state(b.to_state()))
    assert a.error_samples.to_list() == [
        {"kind": "http_error", "status": 422, "message": "body.top_k: Extra inputs", "count": 4},
        {
            "kind": "stall_timeout",
            "status": None,
            "message": "no bytes for 5 s (stall)",
            "count": 1,
        },
    ]


def test_error_samples_stay_bounded():
    samples = ErrorSamples()
    for i in range(50):
        samples.add("http_error", 500, f"request {i} failed")
    assert len(samples.to_list()) == MAX_SAMPLES
    samples.add("http_error", 500, "x" * 5000)
    assert all(len(s["message"]) <= 300 for s in samples.to_list())
