"""The outcome of one load-generator run, as tests and reports see it."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from pytest_llmperf.gpu.figures import GpuFigures
from pytest_llmperf.metrics.histogram import LatencyHistogram
from pytest_llmperf.results import server_per_request as per_request
from pytest_llmperf.results.accumulator import LATENCY_METRICS, RATE_METRICS, MetricsAccumulator
from pytest_llmperf.results.conversations import (
    CONVERSATION_HISTOGRAMS,
    PROMPT_BANDS,
    TURN_BANDS,
    ConversationStats,
)
from pytest_llmperf.results.outputs import OutputMatch
from pytest_llmperf.server_metrics.fleet import FleetMetrics
from pytest_llmperf.server_metrics.summary import ServerMetrics
from pytest_llmperf.specs.stages import Stage

__all__ = [
    "CONVERSATION_RATES",
    "TOKEN_LENGTH_TOLERANCE",
    "RunResult",
    "StopReason",
    "token_length_warnings",
]

TOKEN_LENGTH_TOLERANCE = 0.10
# The conversations' affinity shares, as SLOs name them (conversation.same_replica_rate > 90%)
CONVERSATION_RATES = ("conversation.same_replica_rate", "conversation.tree_same_replica_rate")


class StopReason(StrEnum):
    """Why a run stopped issuing (a ``StrEnum``: equal to, and written as, ``"completed"`` etc.)."""

    COMPLETED = "completed"  # every planned request was sent
    DURATION = "duration"  # a closed loop's clock ran out
    STOPPED = "stop()"  # LoadGenerator.stop() / LoadRun.stop()
    SIGINT = "SIGINT"  # Ctrl-C: drained, kept, then the session stops
    CANCELLED = "cancelled"  # the run's task was cancelled
    WORKER_LOST = "worker_lost"  # a Ray load-generator actor died or its node left
    DECIDED = "decided"  # until="decided": every gated SLO was decided (slo/sequential.py)
    SERVER_EXITED = "server_exited"  # the server the gate started exited mid-run


def token_length_warnings(
    lengths: Mapping[str, Any],
    request_fields: Mapping[str, Any],
    workload: Mapping[str, Any] | None = None,
) -> list[str]:
    """Why the lengths the server saw are not the ones the workload asked for, each
    with what to do about it.

    A prompt off by more than 10% means the tokenizer is not the model's (or
    the chat template was not accounted for): every "N-token prompt" SLO
    then measures something else. Output shorter than asked means the model
    stopped early: said only where ``max_tokens`` was meant as the length
    (``workload["output_control"]`` with ``ignore_eos``). Where it is a cap (a
    structured or tool-call output, which ends where its JSON or call ends, or a
    workload with ``ignore_eos=False``), an output that ends at its natural end
    is what was asked for; ``token_lengths`` still records the lengths. Output
    longer than asked is always said: the server did not honour ``max_tokens``.
    """
    out: list[str] = []
    dev = lengths.get("input_deviation")
    # Prompts with images: the server counts the image tokens, the workload its text
    # alone; the difference is the images' (``image_tokens_mean``), not the tokenizer's.
    if dev is not None and abs(dev) > TOKEN_LENGTH_TOLERANCE and "image_tokens_mean" not in lengths:
        out.append(
            f"prompts reached the server {dev * 100:+.0f}% off the requested length "
            f"({lengths['input_server_mean']:g} vs {lengths['input_requested_mean']:g} tokens "
            f"by {lengths.get('tokenizer') or 'the workload tokenizer'}); "
            "set --llm-tokenizer to the model's tokenizer"
        )
    dev = lengths.get("output_deviation")
    control = str((workload or {}).get("output_control") or "max_tokens + ignore_eos")
    capped = "ignore_eos" not in control  # max_tokens is a cap, not the length
    if dev is not None and abs(dev) > TOKEN_LENGTH_TOLERANCE and not (capped and dev < 0):
        if dev > 0:
            why = "the server generated past max_tokens: check that it honours the length field"
        elif request_fields.get("ignore_eos") is False:
            why = (
                "the server refused ignore_eos, so the model stops where it likes; to measure "
                "its own lengths say so with llm_workload(..., ignore_eos=False), for fixed "
                "lengths use a server that takes ignore_eos (vLLM, SGLang)"
            )
        else:
            why = (
                "the model stopped early or the server capped max_tokens; check the server's "
                "output limit (a context or max_tokens cap), or set "
                "llm_workload(..., ignore_eos=False) if the model's own lengths are wanted"
            )
        out.append(
            f"outputs were {dev * 100:+.0f}% off the requested length "
            f"({lengths['output_server_mean']:g} vs {lengths['output_requested_mean']:g} "
            f"tokens): {why}"
        )
    return out


@dataclass
class RunResult:
    """One run: its configuration, its measurements and the generator's self-check.

    ``metrics["ttft"]`` etc. are :class:`LatencyHistogram` (``.p(99)`` in ms,
    ``.mean``, ``.max``, ``.count``); ``metrics["error_rate"]`` etc. are floats, and
    so are ``valid_rate``, ``output_match`` and ``output_consistency`` where the run
    measured them (checked outputs; greedy outputs compared with another side, or
    alone). ``by_model``, ``by_replica``, ``invalid_samples``, ``outputs`` and the two matches are
    also in the report's run (:meth:`to_dict`) only where the run has them.
    ``self_check["generator_bound"]`` is true when the load generator, not
    the server, limited the run; verdicts on such a run are inconclusive.
    ``stop_reason`` says why issuing ended (a :class:`StopReason`: ``completed``,
    ``duration``, ``stop()``, ``SIGINT``, ``cancelled``; None in a result not
    made by a run, written ``""`` in the report); ``events_path`` is the run's
    event log (``--llm-events``), re-analysable with
    :func:`pytest_llmperf.results.event_log.analyse_event_log`.
    """

    workload: dict[str, Any]
    load: dict[str, Any]
    endpoint: dict[str, Any]
    accumulator: MetricsAccumulator
    self_check: dict[str, Any] = field(default_factory=dict)
    started_at: str = ""
    duration_s: float = 0.0
    interrupted: bool = False
    label: str = ""
    gated: bool = True
    stop_reason: StopReason | None = None
    events_path: str | None = None
    stage_plan: tuple[Stage, ...] = ()
    stage_sends: list[int] = field(default_factory=list)
    # the server's own metrics over the run (--llm-server-metrics), and over each stage
    server_metrics: ServerMetrics | None = None
    stage_server_metrics: list[ServerMetrics] = field(default_factory=list)
    # several /metrics pages (a fleet: router, replicas, prefill/decode pools): each page and
    # each role's pool; ``server_metrics`` is then the fleet as one (server_metrics/fleet.py)
    fleet: FleetMetrics | None = None
    # the GPUs' power, energy, memory over the run (--llm-gpu, a DCGM page): docs/gpu.md;
    # None: no GPU was read (no block in the JSON)
    gpu: GpuFigures | None = None
    # what --llm-reset-cache did before the run: {"done": bool, "how": str, "why": str}
    cache_reset: dict[str, Any] | None = None
    # until="decided": when and why the run stopped ("every SLO decided after 212 samples")
    stop_detail: str = ""
    # greedy outputs against the baseline's / history's / reference's (set by the plugin
    # before the verdicts), and against the same samples sent alone (by the generator)
    output_match: OutputMatch | None = None
    output_consistency: OutputMatch | None = None
    # why one of those two was not measured: {"output_match" | "output_consistency": why}
    output_notes: dict[str, str] = field(default_factory=dict)
    # the server process the gate started and watched over this run (``runs[].server_process``:
    # name, cmd, pid, log, restart, startup, resources, exit); None for a URL it did not start
    server_process: dict[str, Any] | None = None

    @property
    def metrics(self) -> Mapping[str, LatencyHistogram | float]:
        hist = self.accumulator.latency_histogram  # the steady window's with latency=True
        out: dict[str, LatencyHistogram | float] = {name: hist(name) for name in LATENCY_METRICS}
        out["tpot_token_weighted"] = hist("tpot_token_weighted")
        for name in RATE_METRICS:
            out[name] = self.accumulator.rate(name)
        # the output shares, where the run measured them
        if self.accumulator.checked:
            out["valid_rate"] = self.accumulator.rate("valid_rate")
        for name, match in (
            ("output_match", self.output_match),
            ("output_consistency", self.output_consistency),
        ):
            if match is not None:
                out[name] = match.share
        return out

    def histogram(self, name: str) -> LatencyHistogram:
        """``metrics[name]`` for a latency metric (``ttft``, ..., ``tpot_token_weighted``), or a
        conversation's (``conversation.makespan``, ``conversation.makespan_excl_tools``)."""
        head, _, rest = name.partition(".")
        if head == "conversation" and rest in CONVERSATION_HISTOGRAMS:
            return self.conversation_stats.histogram(rest)
        return self.accumulator.latency_histogram(name)

    def rate(self, name: str) -> float:
        """``metrics[name]`` for a rate metric (``error_rate``, ``output_throughput``, ...), or
        ``conversation.same_replica_rate`` / ``conversation.tree_same_replica_rate`` (NaN
        where no consecutive calls had their replica said)."""
        if name in CONVERSATION_RATES:
            stats = self.conversation_stats
            value = getattr(stats, name.partition(".")[2])
            return math.nan if value is None else float(value)
        return self.accumulator.rate(name)

    def rate_samples(self, name: str) -> int:
        """What a rate metric is a share of: consecutive attributed call pairs for the
        conversation rates, completed requests for ``blank_rate``, else issued requests."""
        if name == "conversation.same_replica_rate":
            return self.conversation_stats.thread_pairs
        if name == "conversation.tree_same_replica_rate":
            return self.conversation_stats.tree_pairs
        if name == "blank_rate":
            return self.accumulator.completed
        return self.accumulator.issued

    @property
    def conversation_stats(self) -> ConversationStats:
        """The run's per-conversation figures (empty where it had no conversation)."""
        tracker = self.accumulator.conversations
        return tracker.stats() if tracker is not None else ConversationStats()

    def turn_band_result(self, band: str) -> RunResult:
        """The requests of turn band ``band`` (``"11-20"``: :data:`TURN_BANDS`) as a run of
        their own, labelled ``"<label> turns 11-20"`` (for ``turns[11-20].ttft.p90``)."""
        return self._part(self.accumulator.turn_bands.get(band), f"turns {band}")

    @property
    def conversations(self) -> dict[str, Any] | None:
        """What an agent feels (``runs[].conversations``; docs/measurement.md, "Agentic
        conversations"): the per-conversation figures of
        :class:`~pytest_llmperf.results.conversations.ConversationStats` plus, per turn band
        and per prompt-length band, the requests' counts, TTFT, e2e and prefix-cache hit
        rate (``null``: the server did not say its cached tokens). None in a run without
        conversations or turns."""
        acc = self.accumulator
        if acc.conversations is None and not acc.turn_bands:
            return None
        out = self.conversation_stats.summary()
        out["by_turn_band"] = [
            {"turns": band, **_band_entry(acc.turn_bands[band])}
            for band in TURN_BANDS
            if band in acc.turn_bands
        ]
        out["by_prompt_band"] = [
            {"prompt": band, **_band_entry(acc.prompt_bands[band])}
            for band in PROMPT_BANDS
            if band in acc.prompt_bands
        ]
        return out

    @property
    def counts(self) -> dict[str, int]:
        return self.accumulator.counts()

    @property
    def token_lengths(self) -> dict[str, Any]:
        """Requested vs server-reported prompt and output lengths, with a warning for each
        that differs by more than :data:`TOKEN_LENGTH_TOLERANCE` (see docs/measurement.md)."""
        out = self.accumulator.token_lengths(str(self.workload.get("tokenizer") or ""))
        served, asked = out.get("input_server_mean"), out.get("input_requested_mean")
        if self.accumulator.images and served is not None and asked is not None:
            out["image_tokens_mean"] = round(served - asked, 3)  # per request, by difference
        out["warnings"] = token_length_warnings(
            out, self.endpoint.get("request_fields") or {}, self.workload
        )
        return out

    @property
    def error_samples(self) -> list[dict[str, Any]]:
        """A few distinct failures with the server's own message and their counts."""
        return self.accumulator.error_samples.to_list()

    @property
    def errors(self) -> dict[str, int]:
        return dict(self.accumulator.errors)

    @property
    def invalid_samples(self) -> list[dict[str, Any]]:
        """A few distinct reasons why outputs failed their check (``[{"kind", "message",
        "count"}]``, most frequent first): ``runs[].invalid_samples``."""
        return self.accumulator.invalid_samples.to_list()

    @property
    def outputs(self) -> dict[str, dict[str, Any]]:
        """Greedy runs: each sample's output fingerprint, ``{"<index>": {"digest",
        "tokens", "marks"}}`` (``runs[].outputs``); empty otherwise."""
        return self.accumulator.outputs.to_dict()

    @property
    def models(self) -> list[str]:
        """The served models the run's requests named (``adapters=``), sorted."""
        return sorted(self.accumulator.models)

    def model_result(self, name: str) -> RunResult:
        """The requests that named model ``name`` as a run of their own (for its SLO
        verdicts, ``llm_slo(..., per_model=True)``)."""
        return self._part(self.accumulator.models.get(name), f"model {name}")

    @property
    def by_model(self) -> dict[str, dict[str, Any]]:
        """Per served model (``runs[].by_model``): ``{name: {"counts", "metrics",
        "token_lengths"}}``, by name; empty in a run without ``adapters=``."""
        tokenizer = str(self.workload.get("tokenizer") or "")
        return {
            name: {
                "counts": acc.counts(),
                "metrics": acc.summary(),
                "token_lengths": acc.token_lengths(tokenizer),
            }
            for name, acc in sorted(self.accumulator.models.items())
        }

    @property
    def replicas(self) -> list[str]:
        """The replicas the run's responses named as having served them (a response
        header: ``--llm-replica-header``), sorted; empty where none was named."""
        return sorted(self.accumulator.replicas)

    def replica_result(self, name: str) -> RunResult:
        """The requests replica ``name`` served as a run of their own (for the
        ``replica.*`` SLOs' verdicts, one per replica), labelled ``"<label> replica <name>"``."""
        return self._part(self.accumulator.replicas.get(name), f"replica {name}")

    @property
    def by_replica(self) -> dict[str, dict[str, Any]]:
        """Per replica that served requests (``runs[].by_replica``): ``{name: {"counts",
        "metrics"}}``, by name; empty where no response named its replica. The requests no
        response attributed are counted in ``counts.replica_unattributed``."""
        return {
            name: {"counts": acc.counts(), "metrics": acc.summary()}
            for name, acc in sorted(self.accumulator.replicas.items())
        }

    def stage_result(self, index: int) -> RunResult:
        """Stage ``index`` of a staged run as a run of its own (for its SLO verdicts)."""
        server = self.stage_server_metrics
        return self._part(
            self.accumulator.stages.get(index),
            f"stage {index}",
            server[index] if index < len(server) else None,
        )

    def _part(
        self,
        acc: MetricsAccumulator | None,
        what: str,
        server_metrics: ServerMetrics | None = None,
    ) -> RunResult:
        """A breakdown of this run (a stage's, a model's requests) as a run of its own,
        labelled ``"<label> <what>"``, with this run's configuration and self-check."""
        return RunResult(
            workload=self.workload,
            load=self.load,
            endpoint=self.endpoint,
            accumulator=acc or MetricsAccumulator(),
            self_check=self.self_check,
            started_at=self.started_at,
            label=f"{self.label} {what}" if self.label else what,
            gated=self.gated,
            server_metrics=server_metrics,
        )

    @property
    def stages(self) -> list[dict[str, Any]]:
        """Per-stage results (``run["stages"]``): plan, achieved rate, counts, metrics.

        A request belongs to the stage it was planned in (a closed loop's: the
        stage it was sent in). ``achieved_rate`` is the tracked sends that
        happened on the clock within the stage's window, per second of it: a
        generator that fell behind pushes sends into the next stage.
        ``schedule_rate`` is the requests the drawn schedule planned in the
        stage, per second (a Poisson draw differs from the nominal rate).
        """
        out: list[dict[str, Any]] = []
        start = 0.0
        for k, stage in enumerate(self.stage_plan):
            acc = self.accumulator.stages.get(k) or MetricsAccumulator()
            sends = self.stage_sends[k] if k < len(self.stage_sends) else 0
            entry: dict[str, Any] = {"index": k, "start_s": round(start, 6)}
            entry["duration_s"] = stage.duration_s
            if stage.concurrency is not None:
                entry["concurrency"] = stage.concurrency
            else:
                entry["planned_rate"] = round(stage.mean_rate or 0.0, 6)
                if stage.rate_end is not None and stage.rate_end != stage.rate:
                    entry["rate_from"], entry["rate_to"] = stage.rate, stage.rate_end
            # a Poisson draw puts about rate*duration ± its square root in a stage
            entry["schedule_rate"] = round(acc.issued / stage.duration_s, 6)
            entry["achieved_rate"] = round(sends / stage.duration_s, 6)
            entry["counts"] = acc.counts()
            entry["metrics"] = acc.summary()
            if k < len(self.stage_server_metrics):
                entry["server_metrics"] = self.stage_server_metrics[k].to_dict()
            split = per_request.ttft_split(acc)
            if split is not None:
                entry["ttft_split"] = split
            if stage.slos:
                entry["slo"] = [slo.expr for slo in stage.slos]
            out.append(entry)
            start += stage.duration_s
        return out

    @property
    def turns(self) -> list[dict[str, Any]]:
        """Per-turn results of a multi-turn run (``run["turns"]``; turn 1 is the first)."""
        return [
            {"turn": k + 1, "counts": acc.counts(), "metrics": acc.summary()}
            for k, acc in sorted(self.accumulator.turns.items())
        ]

    @property
    def steady(self) -> dict[str, Any] | None:
        """The steady-state window (``runs[].steady``; None without ``steady=``): its
        ``start_s``/``end_s`` from the run's first send, ``requests_in``/``requests_out``,
        its ``state`` and the ``whole_run`` throughput figures beside the window's
        (:mod:`pytest_llmperf.results.steady`)."""
        return self.accumulator.steady_summary()

    @property
    def ttft_split(self) -> dict[str, Any] | None:
        """Where the TTFT went: each request's split into client queue, server queue,
        engine and the remainder, where the responses carried the server's own timings
        (:func:`pytest_llmperf.results.server_per_request.ttft_split`); None otherwise."""
        return per_request.ttft_split(self.accumulator)

    def to_dict(self) -> dict[str, Any]:
        """The JSON report's ``runs[]`` entry."""
        split = self.ttft_split
        conversations = self.conversations
        steady = self.steady
        return {
            "label": self.label,
            "load": self.load,
            "workload": self.workload,
            "counts": self.counts,
            "metrics": self.accumulator.summary(),
            "errors": self.errors,
            "error_samples": self.error_samples,
            "token_lengths": self.token_lengths,
            "self_check": self.self_check,
            "started_at": self.started_at,
            "duration_s": round(self.duration_s, 6),
            "interrupted": self.interrupted,
            "stop_reason": self.stop_reason.value if self.stop_reason else "",
            **({"stop_detail": self.stop_detail} if self.stop_detail else {}),
            "events": self.events_path,
            "gated": self.gated,
            "server_metrics": self.server_metrics.to_dict() if self.server_metrics else None,
            **({"fleet": self.fleet.to_dict()} if self.fleet is not None else {}),
            **({"gpu": self.gpu.to_dict()} if self.gpu is not None else {}),
            **({"by_replica": self.by_replica} if self.accumulator.replicas else {}),
            **({"cache_reset": self.cache_reset} if self.cache_reset is not None else {}),
            **({"server_process": self.server_process} if self.server_process is not None else {}),
            **({"stages": self.stages} if self.stage_plan else {}),
            **({"turns": self.turns} if self.accumulator.turns else {}),
            **({"conversations": conversations} if conversations is not None else {}),
            **({"steady": steady} if steady is not None else {}),
            **({"ttft_split": split} if split is not None else {}),
            **self._output_entries(),
        }

    def _output_entries(self) -> dict[str, Any]:
        """The run's output keys, each only where the run has it: ``by_model``,
        ``invalid_samples`` (with checked outputs), ``outputs`` (greedy),
        ``output_match``, ``output_consistency`` and ``output_notes``."""
        acc = self.accumulator
        out: dict[str, Any] = {}
        if acc.models:
            out["by_model"] = self.by_model
        if acc.checked:
            out["invalid_samples"] = self.invalid_samples
        if acc.outputs:
            out["outputs"] = self.outputs
        if self.output_match is not None:
            out["output_match"] = self.output_match.to_dict()
        if self.output_consistency is not None:
            out["output_consistency"] = self.output_consistency.to_dict()
        if self.output_notes:
            out["output_notes"] = dict(self.output_notes)
        return out


def _band_entry(acc: MetricsAccumulator) -> dict[str, Any]:
    """One band's row of ``runs[].conversations``: counts, TTFT and e2e (ms), and the
    prefix-cache hit over the requests whose server said its cached tokens."""
    hit = acc.cache_hit_rate
    return {
        "counts": acc.counts(),
        "ttft": acc.histograms["ttft"].summary(),
        "e2e": acc.histograms["e2e"].summary(),
        "prompt_tokens_mean": (
            round(acc.input_usage_tokens / acc.input_usage_requests, 3)
            if acc.input_usage_requests
            else None
        ),
        "cache_hit_rate": None if hit is None else round(hit, 6),
        "cache_reported": acc.cache_reported,
    }
