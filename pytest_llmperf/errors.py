"""Errors that the plugin turns into usage errors rather than tracebacks.

A wrong marker argument, SLO string, option or file must stop the run *before*
any load is sent, with a message that names where the bad value came from and
what it was. Library code raises :class:`LlmPerfUsageError`; the plugin adds
the test id or option name and reports it through pytest's usage-error path.

The library's warnings live here too, so importing them never imports pytest.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable

__all__ = [
    "LlmPerfBlankWarning",
    "LlmPerfInconclusiveWarning",
    "LlmPerfTokenLengthWarning",
    "LlmPerfUsageError",
    "did_you_mean",
]


class LlmPerfUsageError(ValueError):
    """A bad marker, option, SLO expression or input file.

    ``where`` names the source (a test id, ``--llm-timeout``, a file path); the
    message names the bad value. ``str()`` joins the two.
    """

    def __init__(self, message: str, *, where: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.where = where

    def located(self, where: str) -> LlmPerfUsageError:
        """The same error attributed to ``where`` (kept if already set)."""
        return LlmPerfUsageError(self.message, where=self.where or where)

    def __str__(self) -> str:
        return f"{self.where}: {self.message}" if self.where else self.message


def did_you_mean(word: str, known: Iterable[str]) -> str:
    """``" (did you mean llm_slo?)"`` when one of ``known`` is close to ``word``, else ``""``:
    a misspelt name is fixed from the message alone."""
    close = difflib.get_close_matches(word, list(known), n=1, cutoff=0.6)
    return f" (did you mean {close[0]}?)" if close else ""


class LlmPerfInconclusiveWarning(UserWarning):
    """An SLO could not be judged (too few samples, or the load generator was the bottleneck)."""


class LlmPerfBlankWarning(UserWarning):
    """Every completed reply of a run was blank: tokens generated, none visible (the model
    or its weights output nothing; a ``blank_rate`` SLO gates on it)."""


class LlmPerfTokenLengthWarning(UserWarning):
    """Prompts or outputs reached the server more than 10% off the lengths the workload asked
    for: the tokenizer is not the model's, or the model stopped early."""
