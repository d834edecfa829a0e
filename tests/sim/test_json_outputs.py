"""Schema-valid JSON from seeded draws (sim/json_outputs.py), checked with jsonschema."""

from __future__ import annotations

import json
from typing import Any

import jsonschema
import pytest

from pytest_llmperf.sim.json_outputs import Draws, SchemaError, json_for_schema, json_pieces
from pytest_llmperf.tokens import count_tokens

SCHEMAS: list[dict[str, Any]] = [
    {"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"]},
    {
        "type": "object",
        "properties": {
            "name": {"type": "string", "minLength": 3, "maxLength": 8},
            "age": {"type": "integer", "minimum": 18, "maximum": 20},
            "score": {"type": "number", "exclusiveMinimum": 0, "exclusiveMaximum": 1},
            "when": {"type": "string", "format": "date-time"},
            "day": {"type": "string", "format": "date"},
            "unit": {"type": "string", "enum": ["c", "f"]},
            "ok": {"type": "boolean"},
            "none": {"type": "null"},
            "tags": {"type": "array", "items": {"type": "string"}, "minItems": 2, "maxItems": 4},
            "nested": {
                "type": "object",
                "properties": {"x": {"type": ["integer", "null"]}, "k": {"const": "v"}},
                "required": ["x", "k"],
            },
        },
        "required": ["name", "age", "score", "when", "unit", "ok", "tags", "nested"],
        "additionalProperties": False,
    },
    {"type": "object", "properties": {"s": {"type": "string", "maxLength": 0}}, "required": ["s"]},
    {
        "$defs": {"point": {"type": "object", "properties": {"x": {"type": "integer"}}}},
        "type": "array",
        "items": {"$ref": "#/$defs/point"},
        "minItems": 1,
    },
    {"anyOf": [{"type": "integer", "minimum": 5, "maximum": 5}, {"type": "string"}]},
]


@pytest.mark.parametrize("schema", SCHEMAS)
@pytest.mark.parametrize("seed", range(20))
def test_valid_against_its_schema(schema: dict[str, Any], seed: int) -> None:
    text = json_for_schema(schema, Draws(seed))
    value = json.loads(text)
    jsonschema.validators.validator_for(schema)(schema).validate(value)
    if "format" in json.dumps(schema):
        checker = jsonschema.FormatChecker()
        jsonschema.Draft202012Validator(schema, format_checker=checker).validate(value)


def test_same_seed_same_json_other_seed_other() -> None:
    schema = SCHEMAS[1]
    assert json_for_schema(schema, Draws(7)) == json_for_schema(schema, Draws(7))
    assert len({json_for_schema(schema, Draws(s)) for s in range(10)}) == 10


def test_switched_draws_part_after_a_shared_prefix_and_stay_valid() -> None:
    schema = SCHEMAS[1]
    first = Draws(3)
    original = json_for_schema(schema, first)
    changed = json_for_schema(schema, Draws(3, switch_at=first.count // 2, other_seed=4))
    assert changed != original
    common = next(k for k, (a, b) in enumerate(zip(original, changed, strict=False)) if a != b)
    assert common > 10  # the values drawn before the switch are the same
    jsonschema.Draft202012Validator(schema).validate(json.loads(changed))


def test_pieces_are_one_token_each_and_rejoin() -> None:
    text = json_for_schema(SCHEMAS[1], Draws(1))
    pieces = json_pieces(text)
    assert "".join(pieces) == text
    assert count_tokens(text) == len(pieces)
    assert all(count_tokens(p) == 1 for p in pieces)


@pytest.mark.parametrize(
    "schema",
    [
        {"type": "integer", "minimum": 3, "maximum": 2},
        {"type": "string", "minLength": 4, "maxLength": 2},
        {"$ref": "https://example.com/s.json"},
        {"type": "tuple"},
    ],
)
def test_unsatisfiable_schemas_are_schema_errors(schema: dict[str, Any]) -> None:
    with pytest.raises(SchemaError):
        json_for_schema(schema, Draws(0))


def test_unconstrained_keeps_the_shape_and_breaks_the_bounds() -> None:
    schema = {"type": "object", "properties": {"x": {"type": "string", "maxLength": 0}}}
    schema["required"] = ["x"]
    value = json.loads(json_for_schema(schema, Draws(0), constrained=False))
    assert set(value) == {"x"} and isinstance(value["x"], str) and value["x"]
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.Draft202012Validator(schema).validate(value)
