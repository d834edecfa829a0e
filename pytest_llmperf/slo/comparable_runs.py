"""Whether two runs measured the same experiment, and if not, every field that differs.

A run is compared with a baseline's (a file's run, history's merged runs) only when
both measured the same thing: the endpoint's model and API, the load, and the
workload less its size keys (``requests``, ``duration_s``, ``warmup``, which
``--llm-scale`` changes: a scaled run is the same experiment). The workload's
tokenizer is compared by identity, not by its label
(:mod:`pytest_llmperf.workloads.tokenizer_identity`): the embedded simulator's
approximation and the same simulator's ``/tokenize`` reached by URL are one
tokenizer described two ways. A run that differs is not compared: its check is
inconclusive, and :func:`run_differences` names each differing field with both
values (``load.rate: 50 -> 60``, the baseline's first), for its message and the
JSON's ``differs``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from pytest_llmperf.workloads.tokenizer_identity import same_tokenizer

__all__ = ["SIZE_KEYS", "comparable_workload", "run_differences"]

# Workload keys that --llm-scale changes; a scaled run is still the same experiment.
SIZE_KEYS = ("requests", "duration_s", "warmup")
_TOKENIZER = ("tokenizer", "tokenizer_identity")


def _plain(value: Mapping[str, Any] | None) -> dict[str, Any]:
    """``value`` as its JSON reads back (tuples as lists, odd values as strings)."""
    return dict(json.loads(json.dumps(dict(value or {}), default=str)))


def comparable_workload(workload: Mapping[str, Any], *, legacy: bool = False) -> dict[str, Any]:
    """What of ``workload`` must match for two runs to be compared: its size keys left
    out, its tokenizer as its identity's hash and framing where it has one (``legacy``:
    the label, as runs stored before identities were compared by)."""
    plain = _plain(workload)
    identity = plain.pop("tokenizer_identity", None)
    out = {k: v for k, v in plain.items() if k not in SIZE_KEYS}
    if not legacy and isinstance(identity, dict) and identity.get("tokens_sha256"):
        out["tokenizer"] = {
            "tokens_sha256": identity["tokens_sha256"],
            "framing": identity.get("framing"),
        }
    return out


def _shown(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, sort_keys=True, default=str)
    return text if len(text) <= 90 else text[:87] + "..."


def _fields(name: str, a: Mapping[str, Any], b: Mapping[str, Any]) -> list[str]:
    """``name.key: a -> b`` for every key whose values differ (absent: ``(none)``)."""
    out = []
    for key in sorted(a.keys() | b.keys()):
        x, y = a.get(key), b.get(key)
        if x != y:
            left = _shown(x) if key in a else "(none)"
            right = _shown(y) if key in b else "(none)"
            out.append(f"{name}.{key}: {left} -> {right}")
    return out


def _tokenizers(a: Mapping[str, Any], b: Mapping[str, Any]) -> list[str]:
    """The tokenizer line, when the two workloads' tokenizers differ: by identity where
    both have one, else (a run stored before identities) by label."""
    same = same_tokenizer(a.get("tokenizer_identity"), b.get("tokenizer_identity"))
    if same is None:
        same = a.get("tokenizer") == b.get("tokenizer")
    if same:
        return []
    return [f"workload.tokenizer: {_shown(a.get('tokenizer'))} -> {_shown(b.get('tokenizer'))}"]


def run_differences(
    stored: Mapping[str, Any],
    current: Mapping[str, Any],
) -> list[str]:
    """Every field in which ``current`` (``{"model", "api", "load", "workload"}``, this
    run's) differs from ``stored`` (the baseline's), one ``field: baseline -> now`` line
    each; empty when they measured the same experiment. A model or API one side does
    not know is not a difference."""
    out = []
    for key in ("model", "api"):
        x, y = stored.get(key), current.get(key)
        if x and y and x != y:
            out.append(f"{key}: {_shown(x)} -> {_shown(y)}")
    out += _fields("load", _plain(stored.get("load")), _plain(current.get("load")))
    a, b = _plain(stored.get("workload")), _plain(current.get("workload"))
    out += _fields(
        "workload",
        {k: v for k, v in a.items() if k not in (*SIZE_KEYS, *_TOKENIZER)},
        {k: v for k, v in b.items() if k not in (*SIZE_KEYS, *_TOKENIZER)},
    )
    out += _tokenizers(a, b)
    return out
