"""The measurement of one request, filled in as its bytes arrive.

All times are ``time.monotonic_ns()`` integers taken in the process and at
the point where the socket's bytes are read. A record is fed to the metrics
accumulator when the request ends and then dropped, so memory stays bounded
however long the run.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum

__all__ = ["ErrorKind", "RequestRecord"]


class ErrorKind(StrEnum):
    """Reason categories for failed requests (a ``StrEnum``: equal to, and written as, the
    plain strings reports show, e.g. ``"http_error"``)."""

    CONNECT = "connect_error"
    CONNECT_TIMEOUT = "connect_timeout"
    DNS = "dns_error"  # the host name resolves nowhere
    TLS = "tls_error"  # handshake or certificate failure
    FIRST_TOKEN_TIMEOUT = "first_token_timeout"
    READ_TIMEOUT = "stall_timeout"
    TOTAL_TIMEOUT = "total_timeout"
    HTTP = "http_error"
    RATE_LIMITED = "rate_limited"  # HTTP 429 (never retried: retries would bend the schedule)
    STREAM_ERROR = "stream_error_frame"
    PROTOCOL = "protocol_error"
    TRUNCATED = "truncated_stream"
    EMPTY = "empty_response"
    INCOMPLETE = "incomplete_at_cap"
    CLIENT = "client_error"


@dataclass(slots=True)
class RequestRecord:
    """Timestamps and counts of one request.

    ``t_sched`` is when the load pattern planned the send (equal to ``t_send``
    for closed-loop loads); ``t_first``/``t_last`` are the arrival times of
    the first and last token events (reasoning and empty deltas included, see
    :class:`~pytest_llmperf.apis.events.ChunkInfo`); ``t_out`` is the first
    event with answer content or a tool call (``ttfo``); ``gaps_ns`` are the
    gaps between consecutive token events (the pooled ITL samples).
    ``input_requested``/``output_requested`` are what the workload asked for
    (prompt tokens, ``max_tokens``), compared with ``usage`` in the report's
    ``token_lengths``.

    Load shapes add: ``stage`` (the index of the load stage the request was
    planned in, -1 in a run without stages), ``turn`` (its 0-based turn in a
    multi-turn session, -1 outside sessions), ``queue_wait_ns`` (how long it
    waited for a slot under ``max_concurrency``, -1 with no cap),
    ``cancelled`` (the client abandoned it on purpose, ``llm_load(cancel=)``:
    neither completed nor failed) and ``reply`` (the answer's text pieces,
    collected only when a later session turn needs them; None otherwise).

    ``connection_retries`` is 1 when the request was lost on a reused
    connection before any byte of its response and sent once more on a new
    one (docs/measurement.md, "Connections"); ``t_send`` stays the first
    write, which every time of the request counts from, and ``t_resend`` is the
    second (0 when there was none). ``has_output`` is set by the first
    non-empty piece of the reply (answer text, reasoning text, tool-call
    arguments). A reply that ends without one is ``blank`` — still completed —
    when something says tokens were generated (a token event, empty deltas
    included, or a usage that counts output tokens), and ``empty_response``
    when nothing does (docs/measurement.md, "Blank replies").

    The server's own timings of the request, where its response says them
    (:mod:`~pytest_llmperf.client.server_timing`; None where it does not), in
    milliseconds of the server's clock: ``server_queue_ms`` (queued until first
    scheduled: vLLM's ``queue_time_ms``; llama.cpp reports none),
    ``server_ttft_ms`` (first scheduled until the first token: vLLM's
    ``time_to_first_token_ms``, llama.cpp's ``prompt_ms`` — the engine's
    prefill, not the client's TTFT), ``server_decode_ms`` (first to last token)
    and ``server_mean_itl_ms`` (that over the output tokens less one), and
    speculative decoding's ``server_spec_accepted`` / ``server_spec_draft``
    draft tokens.

    ``images``/``image_bytes``: how many images the request's prompt carried and
    their encoded size (set when it is sent). An embeddings request streams no
    tokens: ``t_first``/``t_out`` stay 0, ``t_last`` is when its answer was
    whole (``e2e``), ``embedding_inputs`` the vectors it asked for and
    ``embedding_dimensions`` their length, once the answer checked out.

    The request paths of ``llm_workload(structured=, tools=, adapters=, greedy=)``:
    ``model`` is the served model the request named (an adapter, or the base
    model by its own name), set only when the sample chose one (what
    ``runs[].by_model`` groups by; "" otherwise). ``output_checked`` marks a
    completed request whose output was validated (a schema, or tools), and
    ``invalid`` why it failed the check (an
    :class:`~pytest_llmperf.client.output_check.InvalidKind` value; "" = valid),
    with the validator's message in ``invalid_detail``: an invalid output is
    still a completed request, never a failed one. With greedy decoding,
    ``output_digest`` is the output's fingerprint (16 hex digits of its sha256)
    and ``output_marks`` one 2-byte checksum per token event, base64: where two
    outputs of the same prompt part (:mod:`~pytest_llmperf.client.output_check`).

    Agentic conversations (:mod:`~pytest_llmperf.workloads.agent_script`):
    ``conversation`` is the run-wide number of the conversation the request belongs to
    (-1: none), ``agent`` the thread within it (``""`` the root, ``"a/b"`` subagent
    ``b`` of subagent ``a``), ``think_ns`` the tool or think wait the load generator
    held before sending it (planned, ns; 0 for none), and ``replica`` which replica
    served it where the server or router says so (a response header; ``""`` = not
    attributed). ``route_token`` is the router's own session token from the response
    (``--llm-affinity=token:HEADER``; ``""`` = none), which the conversation's next call
    sends back (:mod:`~pytest_llmperf.client.affinity`).
    """

    index: int
    t_sched: int
    category: str = ""
    tracked: bool = True
    t_send: int = 0
    t_first: int = 0
    t_last: int = 0
    t_out: int = 0
    t_end: int = 0
    token_events: int = 0
    reasoning_events: int = 0
    gaps_ns: list[int] = field(default_factory=list)
    input_requested: int = 0
    output_requested: int = 0
    usage_prompt_tokens: int | None = None
    usage_completion_tokens: int | None = None
    usage_cached_tokens: int | None = None
    usage_reasoning_tokens: int | None = None
    finish_reason: str | None = None
    status: int | None = None
    error: ErrorKind | None = None
    error_detail: str = ""
    stage: int = -1
    turn: int = -1
    queue_wait_ns: int = -1
    cancelled: bool = False
    reply: list[str] | None = None
    connection_retries: int = 0
    t_resend: int = 0
    has_output: bool = False
    blank: bool = False
    server_queue_ms: float | None = None
    server_ttft_ms: float | None = None
    server_decode_ms: float | None = None
    server_mean_itl_ms: float | None = None
    server_spec_accepted: int | None = None
    server_spec_draft: int | None = None
    images: int = 0
    image_bytes: int = 0
    embedding_inputs: int = 0
    embedding_dimensions: int = 0
    model: str = ""
    output_checked: bool = False
    invalid: str = ""
    invalid_detail: str = ""
    output_digest: str = ""
    output_marks: str = ""
    conversation: int = -1
    agent: str = ""
    think_ns: int = 0
    replica: str = ""
    route_token: str = ""

    @property
    def ok(self) -> bool:
        return self.error is None

    @property
    def output_tokens(self) -> int:
        """Server-reported completion tokens when given, else the token-event count."""
        if self.usage_completion_tokens is not None:
            return self.usage_completion_tokens
        return self.token_events

    @property
    def reasoning_tokens(self) -> int:
        """Server-reported reasoning tokens when given, else the reasoning-event count."""
        if self.usage_reasoning_tokens is not None:
            return self.usage_reasoning_tokens
        return self.reasoning_events

    def fail(self, kind: ErrorKind, detail: str = "", *, now: int | None = None) -> None:
        if self.error is None:  # the first cause wins; later ones are consequences
            self.error = kind
            self.error_detail = detail[:500]
        if now is not None and not self.t_end:
            self.t_end = now
