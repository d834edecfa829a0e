"""Structured outputs: every request asks for JSON against a schema, and every output is
checked against it.

``structured=`` sends the schema as ``response_format`` (chat; ``text.format`` on the
Responses API): the server decodes through its grammar engine, which is slower than free
text and can break on its own. ``valid_rate`` is the share of completed requests whose
output parsed as JSON and met the schema (``jsonschema``); an invalid output is a
completed request, counted in ``counts.invalid`` with the validator's reason in the
report (docs/structured-outputs.md).
"""

import pytest

TICKET = {
    "type": "object",
    "properties": {
        "title": {"type": "string", "maxLength": 80},
        "priority": {"enum": ["low", "medium", "high"]},
        "estimate_hours": {"type": "integer", "minimum": 1, "maximum": 40},
        "labels": {"type": "array", "items": {"type": "string"}, "maxItems": 4},
    },
    "required": ["title", "priority", "estimate_hours"],
    "additionalProperties": False,
}


@pytest.mark.llm_workload(
    "synthetic", input_tokens=(64, 256), output_tokens=128, requests=60, structured=TICKET
)
@pytest.mark.llm_load("poisson", rate=40)
@pytest.mark.llm_slo("valid_rate >= 100%", "ttft.p90 < 300ms", "error_rate < 1%")
async def test_json_tickets_are_valid_and_fast(llm_loadgen):
    result = await llm_loadgen.run()
    assert result.counts["invalid"] == 0
