"""Per-run metrics, accumulated request by request (docs/measurement.md, Metrics).

For each request, with ``t_sched`` the planned send time, ``t_first`` and
``t_last`` the arrival of the first and last token events (reasoning and
empty deltas included), ``t_out`` the first event with answer content or a
tool call, and ``n_out`` its output tokens (``usage`` when reported, else
the event count):

- ``ttft = t_first - t_sched``  (open loop counts from the plan, so a client
  that fell behind cannot hide server queueing: coordinated omission)
- ``ttfo = t_out - t_sched``  (time to first output: after any reasoning)
- ``e2e = t_last - t_sched``
- ``tpot = (t_last - t_first) / (n_out - 1)`` per request, for n_out >= 2
  (request-weighted; ``tpot_token_weighted`` weights each by n_out - 1)
- ``itl``: every gap between consecutive token events, pooled over requests
- ``itl_request_mean``: each request's mean gap, one sample per request with
  gaps (how many requests stand behind ``itl``: the unit its regression
  bootstrap resamples by)
- ``schedule_lag = t_send - t_sched - queue_wait``: the generator's own delay
- ``queue_wait``: under ``max_concurrency``, how long a planned request
  waited for a free slot (only capped runs record it)

An embeddings request streams no tokens: its ``e2e = t_last - t_sched`` with
``t_last`` the instant its whole answer was read, and nothing else; the run
counts its vectors (``embedding_inputs``, their mean ``embedding_dimensions`` and
``embedding_inputs_per_s`` over the window). Images in prompts are counted as
sent, whatever became of the request (``images``, ``image_bytes``).

A *blank* request (``record.blank``: completed, its tokens generated but no
visible text, reasoning or tool-call arguments; docs/measurement.md, "Blank
replies") is a completed request like any other, counted in ``blank`` too:
``blank_rate = blank / completed`` (0 with nothing completed; its SLO is then
inconclusive). Its empty deltas are token events, timed as any (``ttft``,
``itl``, ``tpot``); one with no event at all (``transformers serve`` streams
nothing for such tokens, a non-streamed blank answer has none) has ``e2e``
alone, to the end of its stream (``t_end``), and no other latency sample.
Another completed request without a token event has no latency samples (a
record read back from an older event log).

``connection_retries`` counts the requests (issued, whatever their outcome)
that were lost on a reused connection before any byte of their response and
sent once more on a new one (docs/measurement.md, "Connections"): 0 against a
server that keeps its keep-alive promises.

Run-level: ``window`` = first planned send to last request end;
``request_throughput = completed / window``; ``output_throughput = Σ n_out /
window`` (completed requests); ``error_rate = failed / issued`` (requests
still in flight at a hard cap count as failed and are listed as
incomplete); ``goodput`` = share of issued requests that completed within
every per-request limit of the test (with a valid output where it was
checked). Failed requests never enter latency histograms.

A *cancelled* request (``llm_load(cancel=)``: the client abandoned it on
purpose) is counted as issued and ``cancelled``, neither completed nor
failed: it enters no latency histogram, no throughput, and neither
``error_rate`` nor ``goodput``, whose denominator is the issued requests
that were not cancelled.

The server's own timings (where its responses carry them: vLLM's per-request
``metrics``, llama.cpp's ``timings``; :mod:`pytest_llmperf.client.server_timing`)
fill :attr:`MetricsAccumulator.server_histograms`, made at the first request
that has them (a run without any pays one check per record). For each
completed request whose server said its engine time (first scheduled -> first
token), its TTFT is split into four parts that add up to it exactly:

- ``client_queue = t_send - t_sched``: the client's own wait before the bytes left
  (``schedule_lag`` plus any ``queue_wait`` for a ``max_concurrency`` slot; a
  closed loop's is about 0);
- ``server_queue``: queued in the engine until first scheduled (0 in the sum
  where the server reports none, llama.cpp: its queue is then in the remainder);
- ``engine``: first scheduled until the first token (the server's prefill);
- ``remainder = ttft - client_queue - server_queue - engine``: network, HTTP,
  the server's API layer (tokenization, detokenization, the hop to its engine)
  and the client's reading; negative only where the two clocks' readings
  disagree (counted in :attr:`MetricsAccumulator.server_remainder_negative`, and
  recorded as 0).

``split_ttft`` holds those requests' client TTFT (the same population). The
``server.*`` names come from ``server_queue`` (queue time), ``engine`` (prefill
time), ``server_ttft`` (queue + engine, for requests with both), ``server_decode``
(first to last token) and ``server_itl`` (each request's mean inter-token
latency): :mod:`pytest_llmperf.results.server_per_request`.

Breakdowns: a record planned in a load stage (``record.stage >= 0``) is also
added to that stage's own accumulator (:attr:`stages`), a multi-turn
conversation's turn to its turn's (:attr:`turns`, turns past
:data:`MAX_TURN_BREAKDOWN` pooled in the last), and a request that named its
served model (``llm_workload(adapters=...)``: ``record.model``, the base model by
its own name) to that model's (:attr:`models`), and a request whose response named
the replica that served it (``record.replica``, from a response header:
client/affinity.py) to that replica's (:attr:`replicas`), so a run reports per-stage,
per-turn, per-model and per-replica results from the same definitions. A run with
attributed requests counts those it could not attribute in ``replica_unattributed``
(:meth:`MetricsAccumulator.counts`); a run without any has no such count.

Outputs (``llm_workload(structured=..., tools=..., greedy=True)``): a completed
request whose output was checked (``record.output_checked``) counts in
``checked``, one that failed its check (``record.invalid``, the reason's kind) in
``invalid`` too, with a few distinct reasons in :attr:`invalid_samples`. An
invalid output is still a completed request: it stays in every latency
histogram and throughput, but is not *good* (``goodput``).
``valid_rate = (checked - invalid) / checked`` (no value without a checked output).
With greedy decoding each completed request's output fingerprint is kept by
(sample index, turn, agent thread) in :attr:`outputs`, so every turn of a conversation
is kept (the whole run's only, not its breakdowns'). A
record without these fields costs three attribute checks (``model``,
``output_checked``, ``output_digest``) and nothing else.

Steady-state window (``llm_load(..., steady=...)``, :mod:`pytest_llmperf.results.steady`):
the load generator opens :attr:`MetricsAccumulator.steady` when the run reaches its
level, and every tracked record started in it is also added to :attr:`steady_part`.
With a window, ``request_throughput``, ``output_throughput``, ``input_throughput`` and
``goodput`` are the window's (its requests' completions and tokens over its length;
NaN when it is empty), whatever reads them (:meth:`MetricsAccumulator.rate`, the
summary, the verdicts); with ``latency=True`` the latency figures are its requests'
too (:meth:`MetricsAccumulator.latency_histogram`). Counts, the timeline and the
breakdowns keep every request. A run without a window pays one attribute check.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping
from enum import StrEnum
from typing import Any

from pytest_llmperf.client.records import ErrorKind, RequestRecord
from pytest_llmperf.metrics.histogram import LatencyHistogram
from pytest_llmperf.results.conversations import ConversationTracker, prompt_band, turn_band
from pytest_llmperf.results.error_samples import ErrorSamples
from pytest_llmperf.results.output_samples import InvalidSamples
from pytest_llmperf.results.outputs import SampleOutputs
from pytest_llmperf.results.steady import STEADY_RATE_METRICS, SteadyWindow

__all__ = [
    "LATENCY_METRICS",
    "MAX_TURN_BREAKDOWN",
    "OUTPUT_RATE_METRICS",
    "RATE_METRICS",
    "SERVER_TIMING_HISTOGRAMS",
    "TIMELINE_FIELDS",
    "TTFT_PARTS",
    "MetricsAccumulator",
    "TokenCountSource",
    "ttft_parts_ns",
]


class TokenCountSource(StrEnum):
    """Where a run's output-token counts came from (the report's ``token_count_source``; a
    ``StrEnum``: equal to, and written as, ``"usage"`` etc.)."""

    USAGE = "usage"  # the server's usage.completion_tokens
    EVENTS = "events"  # counted from the stream's token events
    MIXED = "mixed"  # some requests one way, some the other
    NONE = "none"  # no completed request


LATENCY_METRICS: tuple[str, ...] = (
    "ttft",
    "ttfo",
    "tpot",
    "itl",
    "e2e",
    "schedule_lag",
    "queue_wait",
)
MAX_TURN_BREAKDOWN = 32  # turns from the 32nd on share one breakdown
RATE_METRICS: tuple[str, ...] = (
    "error_rate",
    "blank_rate",
    "goodput",
    "request_throughput",
    "output_throughput",
    "input_throughput",
)
# Rate metrics of the outputs: no value in a run that did not measure them
# (valid_rate: no checked output; the other two: RunResult.output_match/consistency).
OUTPUT_RATE_METRICS: tuple[str, ...] = ("valid_rate", "output_match", "output_consistency")
# itl_request_mean: each request's mean token gap, one sample per request with gaps. Its
# count is the number of requests behind the pooled ``itl`` histogram, which is what
# the regression bootstrap resamples ITL by (gaps within a request are correlated).
_EXTRA_HISTOGRAMS = ("tpot_token_weighted", "itl_request_mean")
# A timeline bucket: the requests that completed in one second of the window (by t_last).
# All add up across merges except the maximum. States from before the latency fields
# hold the first two only (read back with zeros: "no latency known" for that second).
TIMELINE_FIELDS: tuple[str, ...] = (
    "completed",
    "output_tokens",
    "ttft_sum_ns",
    "ttft_max_ns",
    "tpot_sum_ns",
    "tpot_count",  # requests with 2+ output tokens (a TPOT)
)
_TIMELINE_MAX = TIMELINE_FIELDS.index("ttft_max_ns")
# The TTFT split's parts, in the order they happen (they add up to the request's TTFT).
TTFT_PARTS: tuple[str, ...] = ("client_queue", "server_queue", "engine", "remainder")
# Histograms of the requests with the server's own timings (see the module's docstring).
SERVER_TIMING_HISTOGRAMS: tuple[str, ...] = (
    *TTFT_PARTS,
    "split_ttft",
    "server_ttft",
    "server_decode",
    "server_itl",
)
# Their integer counters, which merge by addition (in to_state()["server_timing"]).
_SERVER_COUNTERS = ("server_remainder_negative", "server_spec_accepted", "server_spec_draft")
# The integer counters that merge by addition and travel in to_state()["counts"].
_COUNTERS = (
    "issued",
    "completed",
    "failed",
    "incomplete",
    "cancelled",
    "connection_retries",
    "good",
    "output_tokens",
    "input_tokens",
    "cached_tokens",
    "reasoning_tokens",
    "token_events",
    "input_requested",
    "output_requested",
    "input_usage_requests",  # completed requests whose usage gave prompt tokens
    "output_usage_requests",  # ... and completion tokens
    "input_usage_tokens",  # their prompt tokens (the means in token_lengths)
    "output_usage_tokens",
    "input_usage_requested",  # what those requests asked for
    "output_usage_requested",
    "images",  # images sent in prompts (every issued request's)
    "image_bytes",  # their encoded size
    "embedding_inputs",  # vectors of the completed embeddings requests
    "embedding_values",  # their numbers (inputs x dimensions): the mean dimension
    "checked",  # completed requests whose output was checked (schema or tools)
    "invalid",  # ... and failed the check
    "blank",  # completed requests with no visible output (generated but blank)
    "cache_reported",  # completed requests whose usage said their cached prompt tokens ...
    "cache_reported_prompt_tokens",  # ... their prompt tokens ...
    "cache_reported_cached_tokens",  # ... and those cached (the prefix-cache hit rate)
)


class MetricsAccumulator:
    """Counts and histograms of one run (or of many, after :meth:`merge`).

    ``request_limits_ms`` are the per-request limits that define goodput,
    e.g. ``{"ttft": 500.0, "tpot": 50.0}``: a completed request is *good*
    when each named metric of it is within its limit.
    """

    def __init__(self, *, request_limits_ms: Mapping[str, float] | None = None) -> None:
        self.histograms: dict[str, LatencyHistogram] = {
            name: LatencyHistogram() for name in (*LATENCY_METRICS, *_EXTRA_HISTOGRAMS)
        }
        self.request_limits_ns = {k: v * 1e6 for k, v in (request_limits_ms or {}).items()}
        self.issued = 0
        self.completed = 0
        self.failed = 0
        self.incomplete = 0
        self.cancelled = 0
        self.connection_retries = 0
        self.good = 0
        self.output_tokens = 0
        self.input_tokens = 0
        self.cached_tokens = 0
        self.reasoning_tokens = 0
        self.token_events = 0
        self.input_requested = 0
        self.output_requested = 0
        self.input_usage_requests = 0
        self.output_usage_requests = 0
        self.input_usage_tokens = 0
        self.output_usage_tokens = 0
        self.input_usage_requested = 0
        self.output_usage_requested = 0
        self.images = 0
        self.image_bytes = 0
        self.embedding_inputs = 0
        self.embedding_values = 0
        self.checked = 0
        self.invalid = 0
        self.blank = 0
        self.cache_reported = 0
        self.cache_reported_prompt_tokens = 0
        self.cache_reported_cached_tokens = 0
        self.invalid_samples = InvalidSamples()
        self.outputs = SampleOutputs()  # greedy: sample index -> output fingerprint
        self.errors: Counter[str] = Counter()
        self.error_samples = ErrorSamples()
        self.token_sources: Counter[TokenCountSource] = Counter()
        self.window_start_ns: int | None = None
        self.window_end_ns: int | None = None
        # second of the window -> TIMELINE_FIELDS (completions in that second, by t_last)
        self.timeline: dict[int, list[int]] = {}
        self.stages: dict[int, MetricsAccumulator] = {}
        self.turns: dict[int, MetricsAccumulator] = {}
        self.models: dict[str, MetricsAccumulator] = {}  # record.model -> its requests
        # record.replica (the replica a response header named) -> its requests
        self.replicas: dict[str, MetricsAccumulator] = {}
        # conversations' requests by turn band and by prompt-length band (results/conversations.py)
        self.turn_bands: dict[str, MetricsAccumulator] = {}
        self.prompt_bands: dict[str, MetricsAccumulator] = {}
        # per-conversation figures, made at the first record of a conversation
        self.conversations: ConversationTracker | None = None
        self._breaks_down = True
        self._pools_gaps = True  # a band's breakdown leaves the per-token-event ITL out
        # SERVER_TIMING_HISTOGRAMS, made at the first request with the server's own timings
        self.server_histograms: dict[str, LatencyHistogram] = {}
        self.server_remainder_negative = 0  # requests whose TTFT parts overran their TTFT
        self.server_spec_accepted = 0  # speculative decoding: accepted draft tokens ...
        self.server_spec_draft = 0  # ... of these drafted, over the requests that said so
        # llm_load(steady=...): the window (opened by the load generator) and its requests
        self.steady: SteadyWindow | None = None
        self.steady_part: MetricsAccumulator | None = None

    def declare_steady(self, mode: str = "auto", *, latency: bool = False) -> SteadyWindow:
        """Give this run a steady-state window (not yet open); returns it for the issuing
        side to open (:meth:`~pytest_llmperf.results.steady.SteadyWindow.open_at`)."""
        self.steady = SteadyWindow(mode, latency=latency)
        self.steady_part = self._part()
        return self.steady

    # -- writing ---------------------------------------------------------------

    def add(self, record: RequestRecord) -> None:
        if not record.tracked:
            return
        if self._breaks_down:
            if record.stage >= 0:
                self._breakdown(self.stages, record.stage).add(record)
            if record.turn >= 0:
                self._breakdown(self.turns, min(record.turn, MAX_TURN_BREAKDOWN - 1)).add(record)
            if record.model:
                self._breakdown(self.models, record.model).add(record)
            if record.replica:
                self._breakdown(self.replicas, record.replica).add(record)
            if record.conversation >= 0 or record.turn >= 0:
                self._add_conversation(record)
            window = self.steady
            if window is not None and window.admits(record.t_sched):
                assert self.steady_part is not None
                self.steady_part.add(record)
        self.issued += 1
        self.connection_retries += record.connection_retries
        if record.images:
            self.images += record.images
            self.image_bytes += record.image_bytes
        end = record.t_end or record.t_last or record.t_send or record.t_sched
        self._extend_window(record.t_sched, end)
        queued = record.queue_wait_ns
        if queued >= 0:
            self.histograms["queue_wait"].record_ns(queued)
        if record.t_send:
            lag = record.t_send - record.t_sched - (queued if queued > 0 else 0)
            self.histograms["schedule_lag"].record_ns(lag)
        if record.cancelled and record.ok:
            self.cancelled += 1
            return
        if not record.ok:
            self.failed += 1
            kind = str(record.error or ErrorKind.CLIENT)  # a plain str: reports cross xdist
            self.errors[kind] += 1
            self.error_samples.add(kind, record.status, record.error_detail)
            if record.error == ErrorKind.INCOMPLETE:
                self.incomplete += 1
            return
        self.completed += 1
        if record.blank:
            self.blank += 1
        n_out = record.output_tokens
        if record.output_checked:
            self.checked += 1
            if record.invalid:
                self.invalid += 1
                self.invalid_samples.add(str(record.invalid), record.invalid_detail)
        if record.output_digest and self._breaks_down:
            self.outputs.add(
                record.index,
                record.output_digest,
                n_out,
                record.output_marks,
                turn=record.turn,
                agent=record.agent,
            )
        self.output_tokens += n_out
        self.token_events += record.token_events
        self.reasoning_tokens += record.reasoning_tokens
        self.input_requested += record.input_requested
        self.output_requested += record.output_requested
        if record.usage_completion_tokens is not None:
            self.token_sources[TokenCountSource.USAGE] += 1
            self.output_usage_requests += 1
            self.output_usage_tokens += record.usage_completion_tokens
            self.output_usage_requested += record.output_requested
        else:
            self.token_sources[TokenCountSource.EVENTS] += 1
        if record.usage_prompt_tokens is not None:
            self.input_tokens += record.usage_prompt_tokens
            self.input_usage_requests += 1
            self.input_usage_tokens += record.usage_prompt_tokens
            self.input_usage_requested += record.input_requested
        if record.usage_cached_tokens is not None:
            self.cached_tokens += record.usage_cached_tokens
            if record.usage_prompt_tokens is not None:
                self.cache_reported += 1
                self.cache_reported_prompt_tokens += record.usage_prompt_tokens
                self.cache_reported_cached_tokens += record.usage_cached_tokens
        if not record.t_first:
            # an answer without a token stream (embeddings), or a blank reply without a
            # token event (to the end of its stream): e2e alone
            last = record.t_last or (record.t_end if record.blank else 0)
            if last:
                e2e = last - record.t_sched
                self.histograms["e2e"].record_ns(e2e)
                self.embedding_inputs += record.embedding_inputs
                self.embedding_values += record.embedding_inputs * record.embedding_dimensions
                self._count_good({"e2e": e2e}, record)
            else:  # no times to measure (a record from an older event log)
                self._count_good({}, record)
            return
        ttft = record.t_first - record.t_sched
        e2e = record.t_last - record.t_sched
        h = self.histograms
        h["ttft"].record_ns(ttft)
        h["e2e"].record_ns(e2e)
        values = {"ttft": ttft, "e2e": e2e, "ttfo": e2e}  # no answer: ttfo's limit needs e2e
        if record.t_out:
            values["ttfo"] = record.t_out - record.t_sched
            h["ttfo"].record_ns(values["ttfo"])
        tpot = -1
        if n_out >= 2:
            tpot = (record.t_last - record.t_first) // (n_out - 1)
            h["tpot"].record_ns(tpot)
            h["tpot_token_weighted"].record_ns(tpot, n_out - 1)
            values["tpot"] = tpot
        gaps = record.gaps_ns
        if gaps and self._pools_gaps:
            h["itl"].record_many_ns(gaps)
            h["itl_request_mean"].record_ns(sum(gaps) // len(gaps))
        if (
            record.server_ttft_ms is not None
            or record.server_queue_ms is not None
            or record.server_decode_ms is not None
            or record.server_spec_draft is not None
        ):
            self._add_server_timing(record, ttft)
        self._count_good(values, record)
        if self.window_start_ns is not None:
            second = int(max(0, (record.t_last - self.window_start_ns) // 1_000_000_000))
            bucket = self.timeline.get(second)
            if bucket is None:
                bucket = self.timeline[second] = [0, 0, 0, 0, 0, 0]
            bucket[0] += 1
            bucket[1] += n_out
            bucket[2] += ttft
            if ttft > bucket[3]:
                bucket[3] = ttft
            if tpot >= 0:
                bucket[4] += tpot
                bucket[5] += 1

    def _add_server_timing(self, record: RequestRecord, ttft: int) -> None:
        """A completed request's own timings from its server (see the module's docstring)."""
        h = self.server_histograms or self._make_server_histograms()
        queue_ms = record.server_queue_ms
        if queue_ms is not None:
            h["server_queue"].record_ns(round(queue_ms * 1e6))
        parts = ttft_parts_ns(record)
        if parts is not None:
            client_queue, queue, engine, remainder = parts
            h["client_queue"].record_ns(client_queue)
            h["engine"].record_ns(engine)
            h["remainder"].record_ns(remainder)
            h["split_ttft"].record_ns(ttft)
            if remainder < 0:
                self.server_remainder_negative += 1
            if queue_ms is not None:
                h["server_ttft"].record_ns(queue + engine)
        value = record.server_decode_ms
        if value is not None:
            h["server_decode"].record_ns(round(value * 1e6))
        value = record.server_mean_itl_ms
        if value is not None:
            h["server_itl"].record_ns(round(value * 1e6))
        drafted = record.server_spec_draft
        if drafted is not None and record.server_spec_accepted is not None:
            self.server_spec_accepted += record.server_spec_accepted
            self.server_spec_draft += drafted

    def _add_conversation(self, record: RequestRecord) -> None:
        """A conversation's request: its conversation's figures, its turn band's and (with
        a server-counted prompt) its prompt-length band's breakdowns."""
        if record.conversation >= 0:
            if self.conversations is None:
                self.conversations = ConversationTracker()
            self.conversations.add(record)
        if record.turn >= 0:
            self._band(self.turn_bands, turn_band(record.turn)).add(record)
        if record.usage_prompt_tokens is not None:
            self._band(self.prompt_bands, prompt_band(record.usage_prompt_tokens)).add(record)

    def end_conversation(self, conversation: int) -> None:
        """Conversation ``conversation`` will send no more calls: fold its figures and drop
        its calls (a load generator that knows when a tree or chat ended calls this; one
        that does not leaves it to the first reading, which folds a copy)."""
        if self.conversations is not None:
            self.conversations.end(conversation)

    def _band(self, parts: dict[str, MetricsAccumulator], key: str) -> MetricsAccumulator:
        part = self._breakdown(parts, key)
        part._pools_gaps = False
        return part

    @property
    def cache_hit_rate(self) -> float | None:
        """Cached prompt tokens / prompt tokens over the completed requests whose usage
        said their cached tokens; None where none did (the server does not report it)."""
        if not self.cache_reported or not self.cache_reported_prompt_tokens:
            return None
        return self.cache_reported_cached_tokens / self.cache_reported_prompt_tokens

    def _make_server_histograms(self) -> dict[str, LatencyHistogram]:
        self.server_histograms = {name: LatencyHistogram() for name in SERVER_TIMING_HISTOGRAMS}
        return self.server_histograms

    def _breakdown(self, parts: dict[Any, MetricsAccumulator], key: Any) -> MetricsAccumulator:
        part = parts.get(key)
        if part is None:
            part = parts[key] = self._part()
        return part

    def _part(self) -> MetricsAccumulator:
        part = MetricsAccumulator()
        part.request_limits_ns = self.request_limits_ns
        part._breaks_down = False  # a stage's requests are not split again
        return part

    def _count_good(self, values: Mapping[str, int], record: RequestRecord) -> None:
        """A completed request is good within every per-request limit, and with a valid
        output where its output was checked (an invalid JSON answer is not a good one)."""
        if record.invalid:
            return
        if all(values.get(k, 0) <= limit for k, limit in self.request_limits_ns.items()):
            self.good += 1

    def _extend_window(self, start: int, end: int) -> None:
        if self.window_start_ns is None or start < self.window_start_ns:
            self.window_start_ns = start
        if self.window_end_ns is None or end > self.window_end_ns:
            self.window_end_ns = end

    def merge(self, other: MetricsAccumulator) -> None:
        """Add ``other``'s requests to this one (for sessions and worker processes)."""
        for name, hist in other.histograms.items():
            self.histograms[name].merge(hist)
        for attr in _COUNTERS:
            setattr(self, attr, getattr(self, attr) + getattr(other, attr))
        self.errors.update(other.errors)
        self.error_samples.merge(other.error_samples)
        self.invalid_samples.merge(other.invalid_samples)
        if other.outputs:
            self.outputs.merge(other.outputs)
        self.token_sources.update(other.token_sources)
        if other.window_start_ns is not None and other.window_end_ns is not None:
            self._extend_window(other.window_start_ns, other.window_end_ns)
        for second, counted in other.timeline.items():
            bucket = self.timeline.get(second)
            if bucket is None:
                self.timeline[second] = list(counted)
                continue
            for i, value in enumerate(counted):
                bucket[i] = max(bucket[i], value) if i == _TIMELINE_MAX else bucket[i] + value
        if other.server_histograms:
            hists = self.server_histograms or self._make_server_histograms()
            for name, hist in other.server_histograms.items():
                hists[name].merge(hist)
            for attr in _SERVER_COUNTERS:
                setattr(self, attr, getattr(self, attr) + getattr(other, attr))
        breakdowns: tuple[tuple[dict[Any, MetricsAccumulator], dict[Any, MetricsAccumulator]], ...]
        breakdowns = (
            (self.stages, other.stages),
            (self.turns, other.turns),
            (self.models, other.models),
            (self.replicas, other.replicas),
        )
        for mine, theirs in breakdowns:
            for key, part in theirs.items():
                self._breakdown(mine, key).merge(part)
        for mine, theirs in (
            (self.turn_bands, other.turn_bands),
            (self.prompt_bands, other.prompt_bands),
        ):
            for key, part in theirs.items():
                self._band(mine, key).merge(part)
        if other.conversations:
            if self.conversations is None:
                self.conversations = ConversationTracker()
            self.conversations.merge(other.conversations)
        if other.steady is not None and other.steady_part is not None:
            if self.steady is None or self.steady_part is None:
                self.declare_steady(other.steady.mode, latency=other.steady.latency)
                assert self.steady is not None and self.steady_part is not None
            self.steady.merge(other.steady)
            self.steady_part.merge(other.steady_part)

    # -- reading ---------------------------------------------------------------

    @property
    def window_s(self) -> float:
        if self.window_start_ns is None or self.window_end_ns is None:
            return 0.0
        return max(0, self.window_end_ns - self.window_start_ns) / 1e9

    def rate(self, name: str) -> float:
        """A rate metric: fractions for error_rate/blank_rate/goodput, per second for
        throughputs."""
        if self.steady is not None and name in STEADY_RATE_METRICS:
            return self._steady_rate(name)
        return self.whole_run_rate(name)

    def whole_run_rate(self, name: str) -> float:
        """``name`` over the whole run, steady window or not (the report's reference)."""
        window = self.window_s
        judged = self.issued - self.cancelled  # abandoned on purpose: neither good nor failed
        if name == "error_rate":
            return self.failed / judged if judged else 0.0
        if name == "blank_rate":  # of the completed replies: a failed one is no reply
            return self.blank / self.completed if self.completed else 0.0
        if name == "goodput":
            return self.good / judged if judged else 0.0
        if name == "request_throughput":
            return self.completed / window if window else 0.0
        if name == "output_throughput":
            return self.output_tokens / window if window else 0.0
        if name == "input_throughput":
            return self.input_tokens / window if window else 0.0
        if name == "valid_rate":  # no checked output: nan, which no SLO passes (inconclusive)
            return (self.checked - self.invalid) / self.checked if self.checked else math.nan
        raise KeyError(name)

    def _steady_rate(self, name: str) -> float:
        """A steady-window rate: its requests' completions (tokens) over its length, its
        good share; NaN for an empty window (no number: an SLO on it is inconclusive)."""
        window, part = self.steady, self.steady_part
        assert window is not None and part is not None
        if window.why_empty():
            return math.nan
        if name == "goodput":
            judged = part.issued - part.cancelled
            return part.good / judged if judged else math.nan
        length = window.duration_s
        if name == "request_throughput":
            return part.completed / length
        if name == "output_throughput":
            return part.output_tokens / length
        return part.input_tokens / length

    def latency_histogram(self, name: str) -> LatencyHistogram:
        """The histogram a latency figure and its verdict read: the steady window's
        requests' with ``steady={"latency": True}``, every request's otherwise."""
        part = self.steady_part
        if part is not None and self.steady is not None and self.steady.latency:
            return part.histograms[name]
        return self.histograms[name]

    def steady_summary(self) -> dict[str, Any] | None:
        """The report's ``runs[].steady`` (None without a window): the window (seconds
        from the run's first send), requests in and out, ``drain_s`` (its last request's
        end after the window's end), and the whole run's throughput figures beside the
        window's (which are the run's ``metrics``)."""
        window = self.steady
        if window is None:
            return None
        out = window.describe(self.window_start_ns)
        part, end = self.steady_part, window.end_ns
        last = part.window_end_ns if part is not None else None
        # how long after the window's end its last request ended: about one latency for
        # a server that keeps up, growing with the window for an open loop it cannot
        out["drain_s"] = None if last is None or end is None else round((last - end) / 1e9, 6)
        out["whole_run"] = {
            name: round(self.whole_run_rate(name), 6) for name in STEADY_RATE_METRICS
        }
        return out

    @property
    def token_count_source(self) -> TokenCountSource:
        """Where ``n_out`` came from: ``usage``, ``events`` or ``mixed``."""
        if not self.token_sources:
            return TokenCountSource.NONE
        if len(self.token_sources) == 1:
            return next(iter(self.token_sources))
        return TokenCountSource.MIXED

    def summary(self) -> dict[str, Any]:
        """The JSON report's ``metrics`` object (ms, per second, fractions); a run with
        conversations adds ``conversation.makespan`` and ``conversation.makespan_excl_tools``
        (ms, like a latency) and, where replicas were said, ``conversation.same_replica_rate``
        and ``conversation.tree_same_replica_rate`` (results/conversations.py)."""
        hist = self.latency_histogram
        out: dict[str, Any] = {name: hist(name).summary() for name in LATENCY_METRICS}
        out["tpot_token_weighted"] = hist("tpot_token_weighted").summary()
        for name in RATE_METRICS:
            value = self.rate(name)  # NaN: an empty steady window's throughput (no number)
            out[name] = None if math.isnan(value) else round(value, 6)
        if self.checked:
            out["valid_rate"] = round(self.rate("valid_rate"), 6)
        out["window_s"] = round(self.window_s, 6)
        out["output_tokens"] = self.output_tokens
        out["input_tokens"] = self.input_tokens
        out["cached_tokens"] = self.cached_tokens
        out["reasoning_tokens"] = self.reasoning_tokens
        out["token_events"] = self.token_events
        out["token_count_source"] = self.token_count_source.value
        if self.images:
            out["images"] = self.images
            out["image_bytes"] = self.image_bytes
        if self.conversations:  # by their SLO names, so history and baselines read them
            stats = self.conversations.stats()
            out["conversation.makespan"] = stats.makespan.summary()
            out["conversation.makespan_excl_tools"] = stats.makespan_excl_tools.summary()
            for name in ("same_replica_rate", "tree_same_replica_rate"):
                rate = getattr(stats, name)
                if rate is not None:
                    out[f"conversation.{name}"] = round(rate, 6)
        if self.embedding_inputs:
            window = self.window_s
            out["embedding_inputs"] = self.embedding_inputs
            out["embedding_dimensions"] = round(self.embedding_values / self.embedding_inputs, 3)
            out["embedding_inputs_per_s"] = (
                round(self.embedding_inputs / window, 6) if window else 0.0
            )
        return out

    def token_lengths(self, tokenizer: str = "") -> dict[str, Any]:
        """Requested vs server-reported lengths, per completed request (the report's
        ``token_lengths``); server means are over the requests whose usage gave them."""

        def mean(total: int, n: int) -> float | None:
            return round(total / n, 3) if n else None

        done = self.completed
        return {
            "input_requested_mean": mean(self.input_requested, done),
            "input_server_mean": mean(self.input_usage_tokens, self.input_usage_requests),
            "output_requested_mean": mean(self.output_requested, done),
            "output_server_mean": mean(self.output_usage_tokens, self.output_usage_requests),
            "output_events_mean": mean(self.token_events, done),
            "input_deviation": _deviation(
                self.input_usage_tokens, self.input_usage_requested, self.input_usage_requests
            ),
            "output_deviation": _deviation(
                self.output_usage_tokens, self.output_usage_requested, self.output_usage_requests
            ),
            "tokenizer": tokenizer,
        }

    def counts(self) -> dict[str, int]:
        return {
            "issued": self.issued,
            "completed": self.completed,
            "failed": self.failed,
            "incomplete": self.incomplete,
            "cancelled": self.cancelled,
            "connection_retries": self.connection_retries,
            "invalid": self.invalid,
            "blank": self.blank,
            **({"checked": self.checked} if self.checked else {}),
            **({"replica_unattributed": self.unattributed} if self.replicas else {}),
        }

    @property
    def unattributed(self) -> int:
        """Issued requests whose response named no replica (0 where none did: then
        nothing was attributed, and :attr:`replicas` is empty)."""
        if not self.replicas:
            return 0
        return self.issued - sum(part.issued for part in self.replicas.values())

    def to_state(self) -> dict[str, Any]:
        """A lossless JSON-able form, for worker processes and baselines (with
        ``server_timing`` only when some request had the server's own timings)."""
        state: dict[str, Any] = {
            "histograms": {k: v.to_state() for k, v in self.histograms.items()},
            "counts": {k: getattr(self, k) for k in _COUNTERS},
            "errors": dict(self.errors),
            "error_samples": self.error_samples.to_state(),
            "token_sources": {source.value: n for source, n in self.token_sources.items()},
            "window_ns": [self.window_start_ns, self.window_end_ns],
            "timeline": {str(k): v for k, v in self.timeline.items()},
            "stages": {str(k): v.to_state() for k, v in self.stages.items()},
            "turns": {str(k): v.to_state() for k, v in self.turns.items()},
        }
        if self.models:
            state["models"] = {k: v.to_state() for k, v in self.models.items()}
        if self.replicas:
            state["replicas"] = {k: v.to_state() for k, v in self.replicas.items()}
        if self.turn_bands:
            state["turn_bands"] = {k: v.to_state() for k, v in self.turn_bands.items()}
        if self.prompt_bands:
            state["prompt_bands"] = {k: v.to_state() for k, v in self.prompt_bands.items()}
        if self.conversations:
            state["conversations"] = self.conversations.to_state()
        if self.invalid_samples:
            state["invalid_samples"] = self.invalid_samples.to_state()
        if self.outputs:
            state["outputs"] = self.outputs.to_state()
        if self.steady is not None and self.steady_part is not None:
            state["steady"] = {
                "window": self.steady.to_state(),
                "part": self.steady_part.to_state(),
            }
        if self.server_histograms:
            state["server_timing"] = {
                "histograms": {k: v.to_state() for k, v in self.server_histograms.items()},
                "counts": {k: getattr(self, k) for k in _SERVER_COUNTERS},
            }
        return state

    @classmethod
    def from_state(cls, state: Mapping[str, Any]) -> MetricsAccumulator:
        acc = cls()
        for name, hist in state["histograms"].items():
            acc.histograms[name] = LatencyHistogram.from_state(hist)
        for key, value in state["counts"].items():
            if key in _COUNTERS:
                setattr(acc, key, int(value))
        acc.errors.update(state.get("errors", {}))
        acc.error_samples = ErrorSamples.from_state(state.get("error_samples", []))
        for source, n in state.get("token_sources", {}).items():
            # "chunks": what states written before the token-event rules called "events"
            acc.token_sources[TokenCountSource("events" if source == "chunks" else source)] += n
        acc.window_start_ns, acc.window_end_ns = state.get("window_ns", [None, None])
        acc.timeline = {
            # states written before the latency fields held [completed, output tokens] only
            int(k): [*map(int, v), *[0] * (len(TIMELINE_FIELDS) - len(v))]
            for k, v in state.get("timeline", {}).items()
        }
        acc.stages = {int(k): cls.from_state(v) for k, v in state.get("stages", {}).items()}
        acc.turns = {int(k): cls.from_state(v) for k, v in state.get("turns", {}).items()}
        acc.models = {str(k): cls.from_state(v) for k, v in state.get("models", {}).items()}
        acc.replicas = {str(k): cls.from_state(v) for k, v in state.get("replicas", {}).items()}
        for attr in ("turn_bands", "prompt_bands"):
            for key, part_state in state.get(attr, {}).items():
                acc._band(getattr(acc, attr), str(key)).merge(cls.from_state(part_state))
        if state.get("conversations"):
            acc.conversations = ConversationTracker.from_state(state["conversations"])
        acc.invalid_samples = InvalidSamples.from_state(state.get("invalid_samples", []))
        acc.outputs = SampleOutputs.from_state(state.get("outputs"))
        steady = state.get("steady")
        if steady:
            acc.steady = SteadyWindow.from_state(steady["window"])
            acc.steady_part = cls.from_state(steady["part"])
            acc.steady_part._breaks_down = False
        server = state.get("server_timing")
        if server:
            hists = acc._make_server_histograms()
            for name, hist in server["histograms"].items():
                if name in hists:
                    hists[name] = LatencyHistogram.from_state(hist)
            for key, value in server.get("counts", {}).items():
                if key in _SERVER_COUNTERS:
                    setattr(acc, key, int(value))
        return acc


def ttft_parts_ns(record: RequestRecord) -> tuple[int, int, int, int] | None:
    """``(client_queue, server_queue, engine, remainder)`` of a completed request's TTFT,
    in ns, adding up to ``t_first - t_sched`` exactly; None unless its server said its
    engine time (``server_ttft_ms``) and it has a first token. ``server_queue`` is 0
    where the server reports none (llama.cpp): that wait is then in ``remainder``."""
    engine_ms = record.server_ttft_ms
    if engine_ms is None or not record.t_first:
        return None
    client_queue = record.t_send - record.t_sched if record.t_send else 0
    queue_ms = record.server_queue_ms
    queue = 0 if queue_ms is None else round(queue_ms * 1e6)
    engine = round(engine_ms * 1e6)
    remainder = record.t_first - record.t_sched - client_queue - queue - engine
    return client_queue, queue, engine, remainder


def _deviation(server: int, requested: int, n: int) -> float | None:
    """(server mean - requested mean) / requested mean, over the same requests."""
    if not n or not requested:
        return None
    return round((server - requested) / requested, 4)
