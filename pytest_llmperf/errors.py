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
from enum import Enum

__all__ = [
    "LlmPerfBlankWarning",
    "LlmPerfInconclusiveWarning",
    "LlmPerfTokenLengthWarning",
    "LlmPerfUsageError",
    "StopCause",
    "did_you_mean",
]


class StopCause(Enum):
    """Whose an error that stops a session before load is, decided where it is raised.

    The session's exit status follows (:mod:`pytest_llmperf.gate_states`): a server
    that answers but so that no request can pass is a failed gate (exit status 1); a
    mistake of the user's, or an address where nothing answers, is a usage error (4).
    """

    USAGE = "usage error"  # a bad option, marker or file; 401/403; an unknown model or API
    UNREACHABLE = "unreachable"  # nothing answered HTTP: refused, DNS, TLS, not HTTP, no SYN-ACK
    SERVER_REFUSED = "server refused"  # it answered: 5xx/429 after retries, a stall, empty
    # replies, a body past its cap, or even the plainest request refused
    SERVER_DID_NOT_START = "server did not start"  # the started server exited or never got
    # ready before its deadline (a failed gate; a command that cannot be run is USAGE)
    SERVER_EXITED = "server exited"  # the started server exited while it was measured


class LlmPerfUsageError(ValueError):
    """A bad marker, option, SLO expression or input file; or an endpoint that cannot
    be measured at all (``cause`` says whose that is, :class:`StopCause`).

    ``where`` names the source (a test id, ``--llm-timeout``, a file path); the
    message names the bad value. ``str()`` joins the two. ``server_says``: the
    server's own words, when one answered (what a report quotes).
    """

    def __init__(
        self,
        message: str,
        *,
        where: str | None = None,
        cause: StopCause = StopCause.USAGE,
        server_says: str | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.where = where
        self.cause = cause
        self.server_says = server_says

    def located(self, where: str) -> LlmPerfUsageError:
        """The same error attributed to ``where`` (kept if already set)."""
        return LlmPerfUsageError(
            self.message,
            where=self.where or where,
            cause=self.cause,
            server_says=self.server_says,
        )

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
