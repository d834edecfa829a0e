"""Parsing of the token-length parameters the workload markers take.

``input_tokens=128`` means a fixed length and ``input_tokens=(128, 512)`` a
uniform range; both are checked here so every workload rejects the same bad
values with the same message.
"""

from __future__ import annotations

from typing import Any

from pytest_llmperf.errors import LlmPerfUsageError

__all__ = ["TokenRange", "fraction", "output_controls", "positive_int", "token_range"]

TokenRange = tuple[int, int]


def positive_int(name: str, value: Any, *, minimum: int = 1) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise LlmPerfUsageError(f"{name} must be an integer >= {minimum}, got {value!r}")
    return value


def token_range(name: str, value: Any) -> TokenRange:
    """``value`` as an inclusive ``(low, high)`` range of token counts."""
    if isinstance(value, int) and not isinstance(value, bool):
        positive_int(name, value)
        return (value, value)
    if isinstance(value, (tuple, list)) and len(value) == 2:
        low = positive_int(f"{name}[0]", value[0])
        high = positive_int(f"{name}[1]", value[1])
        if low > high:
            raise LlmPerfUsageError(
                f"{name} range must be (min, max) with min <= max, got {value!r}"
            )
        return (low, high)
    raise LlmPerfUsageError(f"{name} must be an int or a (min, max) pair, got {value!r}")


def fraction(name: str, value: Any) -> float:
    """A share between 0 and 1 inclusive."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= 1:
        raise LlmPerfUsageError(f"{name} must be a number between 0 and 1, got {value!r}")
    return float(value)


def output_controls(ignore_eos: Any) -> dict[str, Any]:
    """The request-body fields that control output length beyond ``max_tokens``.

    The client sends ``ignore_eos: true`` by default so every request
    generates its planned length; ``ignore_eos=False`` lets the model stop
    early (the draft's "stop sequence" control) and is recorded in the report.
    """
    if not isinstance(ignore_eos, bool):
        raise LlmPerfUsageError(f"ignore_eos must be True or False, got {ignore_eos!r}")
    return {} if ignore_eos else {"ignore_eos": False}
