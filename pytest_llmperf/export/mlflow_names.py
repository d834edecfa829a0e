"""MLflow's rules for names and values, applied before anything is sent.

A tracking server rejects a whole batch for one bad key: a key may hold only letters,
digits, ``_ - . / :`` and spaces, must not read as another path (``a/../b``, ``/a``) and
is at most 250 characters; a parameter's value at most 6,000 characters, a tag's 8,000.
An SLO expression (``ttft.p99 < 500ms``, ``error_rate < 1%``) breaks the first rule, so
its operator is spelled in words (``ttft.p99 lt 500ms``, ``error_rate lt 1pct``). The
limits are MLflow's own (``mlflow/utils/validation.py``), copied here so that the records
can be built, and tested, without MLflow installed.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

__all__ = [
    "MAX_KEY",
    "MAX_PARAM_VALUE",
    "MAX_TAG_VALUE",
    "metric_value",
    "mlflow_key",
    "param_value",
    "slo_key",
    "tag_value",
]

MAX_KEY = 250
MAX_PARAM_VALUE = 6000
MAX_TAG_VALUE = 8000

# the operators of the SLO grammar, longest first (``<=`` before ``<``)
_OPERATORS = (("<=", " le "), (">=", " ge "), ("==", " eq "), ("<", " lt "), (">", " gt "))
# slashes and colons left out too: MLflow's UI groups keys at a slash, as folders, and a
# Windows server refuses colons
_NOT_ALLOWED = re.compile(r"[^\w.\- ]")
_SPACES = re.compile(r"\s+")
_DOTS = re.compile(r"\.{2,}")


def mlflow_key(name: str) -> str:
    """``name`` as a key MLflow accepts: characters it refuses (and ``/``) become ``_``,
    ``%`` reads ``pct``, and nothing reads as a path of another name."""
    key = _NOT_ALLOWED.sub("_", name.replace("%", "pct"))
    key = _SPACES.sub(" ", _DOTS.sub(".", key)).strip()[:MAX_KEY].strip()
    return "_" if key in ("", ".") else key


def slo_key(expr: str, *, stage: int | None = None, model: str | None = None) -> str:
    """The tag key of one SLO verdict: ``slo.<expr>`` with its operator in words, and
    ``.stage<N>`` / ``.model <name>`` where the verdict is a stage's or one model's."""
    text = expr.strip()
    for op, word in _OPERATORS:
        text = text.replace(op, word)
    key = f"slo.{text}"
    if stage is not None:
        key += f".stage{stage}"
    if model:
        key += f".model {model}"
    return mlflow_key(key)


def _shorten(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def param_value(value: Any) -> str:
    """A parameter's text: scalars as written, anything else as compact JSON; cut to
    MLflow's limit (the reports hold the whole)."""
    if isinstance(value, str):
        text = value
    elif value is None or isinstance(value, (bool, int, float)):
        text = json.dumps(value)
    else:
        text = json.dumps(value, sort_keys=True, separators=(",", ":"), default=str)
    return _shorten(text, MAX_PARAM_VALUE)


def tag_value(value: Any) -> str:
    """A tag's text, cut to MLflow's limit."""
    return _shorten(value if isinstance(value, str) else param_value(value), MAX_TAG_VALUE)


def metric_value(value: Any) -> float | None:
    """A reported number as a metric (None: not a number, a bool, or not finite: MLflow
    stores NaN but every plot and comparison of it misleads)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    number = float(value)
    return number if math.isfinite(number) else None
