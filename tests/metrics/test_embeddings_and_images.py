"""An answer without a token stream (embeddings) and prompts with images, in a run's numbers."""

from __future__ import annotations

import pytest

from pytest_llmperf.client.records import ErrorKind, RequestRecord
from pytest_llmperf.results import MetricsAccumulator

MS = 1_000_000
BASE = 10_000 * MS  # monotonic clocks never read 0


def embedded(
    i: int, sched_ms: float, done_ms: float, inputs: int = 8, dims: int = 64
) -> RequestRecord:
    r = RequestRecord(index=i, t_sched=BASE + int(sched_ms * MS))
    r.t_send = r.t_sched
    r.t_last = r.t_end = BASE + int(done_ms * MS)
    r.usage_prompt_tokens = 10 * inputs
    r.input_requested = 10 * inputs
    r.embedding_inputs, r.embedding_dimensions = inputs, dims
    r.has_output = True
    return r


def test_an_embeddings_answer_has_e2e_from_the_plan_and_nothing_of_a_stream() -> None:
    acc = MetricsAccumulator(request_limits_ms={"e2e": 25.0})
    for i, (sched, done) in enumerate([(0, 10), (5, 25), (10, 40), (20, 30)]):
        acc.add(embedded(i, sched, done))
    m = acc.summary()
    assert m["e2e"]["count"] == 4
    assert m["e2e"]["max"] == pytest.approx(30.0, rel=0.01)  # 10 -> 40
    assert m["e2e"]["p50"] == pytest.approx(10.0, rel=0.01)
    for name in ("ttft", "ttfo", "tpot", "itl"):
        assert m[name]["count"] == 0, name
    assert m["token_events"] == 0 and m["output_tokens"] == 0
    assert m["input_tokens"] == 4 * 80
    assert m["embedding_inputs"] == 32 and m["embedding_dimensions"] == 64
    # window 0 -> 40 ms: 32 vectors, 320 tokens
    assert m["embedding_inputs_per_s"] == pytest.approx(32 / 0.040, rel=1e-6)
    assert m["input_throughput"] == pytest.approx(320 / 0.040, rel=1e-6)
    assert acc.good == 3  # the 30 ms one is over the 25 ms limit


def test_the_embeddings_counts_merge_across_workers() -> None:
    one, two = MetricsAccumulator(), MetricsAccumulator()
    one.add(embedded(0, 0, 10, inputs=8, dims=64))
    two.add(embedded(1, 0, 12, inputs=4, dims=64))
    restored = MetricsAccumulator.from_state(two.to_state())
    one.merge(restored)
    m = one.summary()
    assert m["embedding_inputs"] == 12 and m["embedding_dimensions"] == 64
    assert m["e2e"]["count"] == 2


def test_a_failed_embeddings_request_counts_no_vectors() -> None:
    acc = MetricsAccumulator()
    bad = embedded(0, 0, 10)
    bad.error = None
    bad.fail(ErrorKind.PROTOCOL, "embeddings answer has 7 vectors for 8 inputs")
    acc.add(bad)
    m = acc.summary()
    assert acc.failed == 1 and "embedding_inputs" not in m and m["e2e"]["count"] == 0


def test_images_are_counted_as_sent_whatever_became_of_the_request() -> None:
    acc = MetricsAccumulator()
    for i, fail in enumerate([False, True, False]):
        r = RequestRecord(index=i, t_sched=BASE, images=2, image_bytes=1000 + i)
        r.t_send = BASE
        if fail:
            r.fail(ErrorKind.HTTP, "HTTP 400: image too large", now=BASE + MS)
        else:
            r.t_first = r.t_last = r.t_end = BASE + 5 * MS
            r.token_events = 1
            r.has_output = True
        acc.add(r)
    m = acc.summary()
    assert m["images"] == 6 and m["image_bytes"] == 3003
    assert "images" not in MetricsAccumulator().summary()
