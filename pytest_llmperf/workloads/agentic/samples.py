"""Where the project's agentic sample traces are (shipped with the package).

The same three conversations in each agentic format (made by
``scripts/make_agentic_sample.py``: generated, no copied data), so a suite or a
test can replay one without a trace of its own::

    @pytest.mark.llm_load("trace", path=str(agentic_sample("weka")), format="weka")
"""

from __future__ import annotations

from pathlib import Path

from pytest_llmperf.errors import LlmPerfUsageError

__all__ = ["AGENTIC_SAMPLES", "agentic_sample"]

_DATA = Path(__file__).resolve().parent.parent / "traces" / "data"
AGENTIC_SAMPLES: dict[str, Path] = {
    "weka": _DATA / "agentic-sample.weka",  # a folder: one Weka JSON file per conversation
    "agentic": _DATA / "agentic-sample.jsonl",
    "otel": _DATA / "agentic-sample.otel.json",
}


def agentic_sample(fmt: str) -> Path:
    """The sample trace in format ``fmt`` (``"weka"``, ``"agentic"`` or ``"otel"``)."""
    try:
        return AGENTIC_SAMPLES[fmt]
    except KeyError:
        raise LlmPerfUsageError(
            f"no agentic sample in format {fmt!r}; there is one in "
            f"{', '.join(map(repr, AGENTIC_SAMPLES))}"
        ) from None
