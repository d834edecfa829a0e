"""Schema-valid JSON from the seeded filler text: what a grammar-constrained model emits.

A server decoding through a grammar engine (vLLM's xgrammar / guidance backends)
only ever produces JSON its schema allows, so the plugin's ``valid_rate`` must be
100% against the simulator too, and any invalid output a test sees must come from
the server it measures, not from the stand-in. :func:`json_for_schema` builds a
value for the JSON Schema subset that structured-output and tool schemas use —
objects (``properties``, ``required``), strings (``minLength``, ``maxLength``,
``enum``, ``const``, ``format: date-time | date``), integers and numbers
(``minimum``, ``maximum``, exclusive bounds), booleans, ``null``, arrays
(``items``, ``minItems``, ``maxItems``), ``anyOf`` / ``oneOf`` (the first
branch), local ``$ref`` to ``#/$defs`` or ``#/definitions`` — from a stream of
seeded draws (:class:`Draws`), so the same seed gives the same JSON, and a
changed draw from some point on (the ``output_change_rate`` fault) changes the
JSON from the value that draw lands in while it stays valid.

:func:`json_pieces` cuts the text into the pieces that stream as one token each:
one approximate token (``pytest_llmperf.tokens``) with the whitespace before
it, so ``count_tokens`` of the whole equals the number of pieces, as for the
filler text.

``constrained=False`` is a server that does not constrain decoding (profile key
``constrain_outputs: false``): the model was only shown the schema, so its JSON
has the schema's shape — objects, properties, types, arrays — but not its value
bounds (lengths, ``enum``, ``const``, ranges, formats, item counts), which it
breaks whenever the seeded draws do.
"""

from __future__ import annotations

import json
import math
import random
from collections.abc import Mapping
from typing import Any

from ..apis.filler_text import WORDS
from ..tokens import TOKEN_PATTERN

__all__ = ["Draws", "SchemaError", "check_schema_shape", "json_for_schema", "json_pieces"]

_MAX_DEPTH = 8
_DEFAULT_WORDS = (1, 3)  # words of a string without length bounds
_DEFAULT_ITEMS = (1, 3)  # items of an array without bounds


class SchemaError(ValueError):
    """A schema the simulator cannot satisfy (its message names where)."""


class Draws:
    """Seeded random draws, switchable to another stream after ``switch_at`` draws.

    ``count`` is how many were drawn: the ``output_change_rate`` fault counts the
    draws of the original output, then regenerates it with the stream switched at
    a seeded draw, so the output parts from the original there (and not before)."""

    def __init__(self, seed: int, switch_at: int | None = None, other_seed: int = 0) -> None:
        self._rng = random.Random(seed)
        self._other = random.Random(other_seed) if switch_at is not None else None
        self._switch_at = switch_at
        self.count = 0

    def _next(self) -> random.Random:
        self.count += 1
        switch = self._switch_at
        if self._other is not None and switch is not None and self.count > switch:
            return self._other
        return self._rng

    def randint(self, low: int, high: int) -> int:
        return self._next().randint(low, high)

    def uniform(self, low: float, high: float) -> float:
        return self._next().uniform(low, high)

    def word(self) -> str:
        """One filler word (no leading space)."""
        return self._next().choice(WORDS)[1:]

    def pick(self, n: int) -> int:
        """An index below ``n``."""
        return self._next().randrange(n)


def _resolve(schema: Any, root: Mapping[str, Any], where: str) -> Mapping[str, Any]:
    if schema is True or schema is None:
        return {}
    if not isinstance(schema, Mapping):
        raise SchemaError(f"{where}: a schema must be an object, got {schema!r}")
    ref = schema.get("$ref")
    if isinstance(ref, str):
        for prefix in ("#/$defs/", "#/definitions/"):
            if ref.startswith(prefix):
                defs = root.get(prefix[2:-1])
                if isinstance(defs, Mapping) and ref[len(prefix) :] in defs:
                    return _resolve(defs[ref[len(prefix) :]], root, ref)
        raise SchemaError(f"{where}: cannot resolve $ref {ref!r} (only #/$defs/... is served)")
    return schema


def _string(s: Mapping[str, Any], d: Draws) -> str:
    fmt = s.get("format")
    if fmt == "date-time":
        return (
            f"2025-{d.randint(1, 12):02d}-{d.randint(1, 28):02d}T"
            f"{d.randint(0, 23):02d}:{d.randint(0, 59):02d}:00Z"
        )
    if fmt == "date":
        return f"2025-{d.randint(1, 12):02d}-{d.randint(1, 28):02d}"
    low = int(s.get("minLength", 0))
    high = s.get("maxLength")
    high = int(high) if high is not None else None
    if high is not None and high < low:
        raise SchemaError(f"maxLength {high} < minLength {low}")
    text = " ".join(d.word() for _ in range(d.randint(*_DEFAULT_WORDS)))
    if high is not None and len(text) > high:
        text = text[:high].rstrip() if high else ""
        if len(text) < low:
            text = text.ljust(low, "a")
    while len(text) < low:
        text += " " + d.word()
    if high is not None:
        text = text[:high]
    return text


def _number(s: Mapping[str, Any], d: Draws, integer: bool) -> int | float:
    low = s.get("minimum")
    high = s.get("maximum")
    xlow = s.get("exclusiveMinimum")
    xhigh = s.get("exclusiveMaximum")
    lo = float(low) if isinstance(low, int | float) else None
    hi = float(high) if isinstance(high, int | float) else None
    if isinstance(xlow, int | float) and not isinstance(xlow, bool):
        lo = max(lo, xlow + (1 if integer else 1e-3)) if lo is not None else xlow + 1e-3
    if isinstance(xhigh, int | float) and not isinstance(xhigh, bool):
        hi = min(hi, xhigh - (1 if integer else 1e-3)) if hi is not None else xhigh - 1e-3
    if lo is None and hi is None:
        lo, hi = 0.0, 100.0
    elif lo is None:
        assert hi is not None
        lo = hi - 100.0
    elif hi is None:
        hi = lo + 100.0
    if hi < lo:
        raise SchemaError(f"no number between {lo} and {hi}")
    if integer:
        ilo, ihi = math.ceil(lo), math.floor(hi)
        if ihi < ilo:
            raise SchemaError(f"no integer between {lo} and {hi}")
        return d.randint(ilo, ihi)
    return round(d.uniform(lo, hi), 2) if hi - lo > 0.02 else lo


def _type_of(s: Mapping[str, Any]) -> str:
    t = s.get("type")
    if isinstance(t, list):
        t = next((x for x in t if x != "null"), t[0] if t else None)
    if isinstance(t, str):
        return t
    if "properties" in s or "required" in s:
        return "object"
    if "items" in s:
        return "array"
    return "string"


_BOUNDS = (
    "const",
    "enum",
    "minLength",
    "maxLength",
    "format",
    "minimum",
    "maximum",
    "exclusiveMinimum",
    "exclusiveMaximum",
    "minItems",
    "maxItems",
)


def _value(
    schema: Any, root: Mapping[str, Any], d: Draws, depth: int, where: str, free: bool = False
) -> Any:
    if depth > _MAX_DEPTH:
        raise SchemaError(f"{where}: nested deeper than {_MAX_DEPTH} levels")
    s = _resolve(schema, root, where)
    if free:  # an unconstrained server: the shape, not the bounds
        if "enum" in s and "type" not in s:
            s = {"type": "string"}
        s = {k: v for k, v in s.items() if k not in _BOUNDS}
    if "const" in s:
        return s["const"]
    enum = s.get("enum")
    if isinstance(enum, list) and enum:
        return enum[d.pick(len(enum))]
    for key in ("anyOf", "oneOf", "allOf"):
        branches = s.get(key)
        if isinstance(branches, list) and branches:
            if key == "allOf":
                merged: dict[str, Any] = {}
                for b in branches:
                    merged.update(_resolve(b, root, where))
                return _value(merged, root, d, depth + 1, where, free)
            return _value(branches[0], root, d, depth + 1, f"{where}/{key}/0", free)
    t = _type_of(s)
    if t == "object":
        props = s.get("properties") or {}
        required = list(s.get("required") or [])
        out: dict[str, Any] = {}
        for name, sub in props.items():  # every property, required or not, in their order
            out[name] = _value(sub, root, d, depth + 1, f"{where}/{name}", free)
        for name in required:
            if name not in out:
                out[name] = _value({}, root, d, depth + 1, f"{where}/{name}", free)
        return out
    if t == "array":
        low = int(s.get("minItems", _DEFAULT_ITEMS[0]))
        high_raw = s.get("maxItems")
        high = int(high_raw) if high_raw is not None else max(low, _DEFAULT_ITEMS[1])
        if high < low:
            raise SchemaError(f"{where}: maxItems {high} < minItems {low}")
        n = d.randint(low, min(high, low + 2))
        items = s.get("items", {})
        return [_value(items, root, d, depth + 1, f"{where}/{k}", free) for k in range(n)]
    if t == "string":
        return _string(s, d)
    if t == "integer":
        return _number(s, d, integer=True)
    if t == "number":
        return _number(s, d, integer=False)
    if t == "boolean":
        return d.pick(2) == 1
    if t == "null":
        return None
    raise SchemaError(f"{where}: unsupported type {t!r}")


def json_for_schema(schema: Mapping[str, Any], draws: Draws, constrained: bool = True) -> str:
    """A JSON text valid against ``schema``, compact but for a space after ``:`` and
    ``,`` (as models write it), drawn from ``draws``. SchemaError if unsatisfiable.
    ``constrained=False``: the schema's shape only, its value bounds ignored."""
    value = _value(schema, schema, draws, 0, "#", not constrained)
    return json.dumps(value, ensure_ascii=False)


def check_schema_shape(schema: Any, param: str) -> Mapping[str, Any]:
    """``schema`` if it is a JSON object (the simulator's only upfront check), else
    SchemaError naming ``param``."""
    if not isinstance(schema, Mapping):
        raise SchemaError(f"{param} must be a JSON Schema object, got {type(schema).__name__}")
    return schema


def json_pieces(text: str) -> list[str]:
    """``text`` cut into one approximate token per piece, each with the whitespace
    before it; ``"".join`` gives ``text`` back (for text without trailing space)."""
    pieces: list[str] = []
    start = 0
    for m in TOKEN_PATTERN.finditer(text):
        pieces.append(text[start : m.end()])
        start = m.end()
    if start < len(text) and pieces:
        pieces[-1] += text[start:]
    elif start < len(text):
        pieces.append(text[start:])
    return pieces
