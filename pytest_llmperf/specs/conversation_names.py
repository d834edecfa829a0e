"""The names of what an agent feels: turn bands, prompt-length bands and the
conversation metrics SLOs may name (docs/measurement.md, "Agentic conversations").

Here, below the results layer, because an SLO's spelling is checked before any run
(``turns[11-20].ttft.p90 < 2s``, ``conversation.makespan_excl_tools.p90 < 60s``) and
the accumulator sorts requests into the same bands.
"""

from __future__ import annotations

__all__ = [
    "BAND_SLO_METRICS",
    "CONVERSATION_LATENCY_METRICS",
    "CONVERSATION_RATE_METRICS",
    "PROMPT_BANDS",
    "TURN_BANDS",
    "prompt_band",
    "turn_band",
]

# Turn bands by the 1-based turn number within a thread (record.turn + 1): the first
# turn (a cold prefix), the early turns, then bands that double as the context grows.
TURN_BANDS: tuple[str, ...] = ("1", "2-5", "6-10", "11-20", "21-50", "51+")
_TURN_UPPER = (1, 5, 10, 20, 50)  # the last turn number of each band but the last
# Prompt-length bands by the server-counted prompt tokens (k = 1024 tokens).
PROMPT_BANDS: tuple[str, ...] = ("<1k", "1k-4k", "4k-16k", "16k-64k", "64k+")
_PROMPT_BELOW = (1024, 4096, 16384, 65536)  # the first length past each band but the last
# Latencies of a whole conversation (ms; any statistic): conversation.makespan.p90
CONVERSATION_LATENCY_METRICS: tuple[str, ...] = (
    "conversation.makespan",
    "conversation.makespan_excl_tools",
)
# Shares of consecutive calls that reached the same replica (fractions, no statistic)
CONVERSATION_RATE_METRICS: tuple[str, ...] = (
    "conversation.same_replica_rate",
    "conversation.tree_same_replica_rate",
)
# The per-request latencies a turn band's SLO may name (turns[11-20].ttft.p90): ITL is
# pooled per token event and left out of the band breakdowns.
BAND_SLO_METRICS: tuple[str, ...] = ("ttft", "ttfo", "tpot", "e2e")


def turn_band(turn: int) -> str:
    """The band of 0-based turn index ``turn`` (``0`` -> ``"1"``, ``11`` -> ``"11-20"``)."""
    number = turn + 1
    for band, upper in zip(TURN_BANDS, _TURN_UPPER, strict=False):
        if number <= upper:
            return band
    return TURN_BANDS[-1]


def prompt_band(prompt_tokens: int) -> str:
    """The band of a prompt of ``prompt_tokens`` server-counted tokens."""
    for band, below in zip(PROMPT_BANDS, _PROMPT_BELOW, strict=False):
        if prompt_tokens < below:
            return band
    return PROMPT_BANDS[-1]
