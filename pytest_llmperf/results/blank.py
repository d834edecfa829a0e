"""Blank replies: generated, but nothing visible (docs/measurement.md, "Blank replies").

A reply whose tokens decode to no text, reasoning or tool-call arguments is
*completed* when something says the server generated them — a token event
(empty deltas included) or a usage that counts output tokens — and counted in
``counts.blank`` and ``blank_rate``; with no such sign it is a failed request,
``empty_response``. A random-weight model (vLLM's ``--load-format dummy``)
often repeats one token that decodes to nothing: a healthy server, not a
failure. A run whose completed replies were *all* blank is said in one line
(:func:`all_blank_note`), so a server that answers nothing is never a silent
success; a ``blank_rate`` SLO is how a test gates on it.
"""

from __future__ import annotations

from collections.abc import Mapping

__all__ = ["all_blank_note"]


def all_blank_note(counts: Mapping[str, int]) -> str:
    """The one line for a run (or a run's ``counts``) whose completed replies were all
    blank, saying what to do; ``""`` otherwise (none completed, or one had text)."""
    completed = int(counts.get("completed") or 0)
    if not completed or int(counts.get("blank") or 0) < completed:
        return ""
    return (
        f"all {completed} completed replies were blank: the server generated tokens (its "
        "usage or empty deltas say so) but no visible text; check the model and its weights "
        "(a random-weight model can emit tokens that decode to nothing), or gate on it with "
        'llm_slo("blank_rate < 5%")'
    )
