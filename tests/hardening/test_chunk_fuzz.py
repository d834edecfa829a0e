"""Any JSON a server may put in a stream chunk is either understood or a protocol error.

The request layer turns ``ValueError``/``TypeError``/``KeyError``/``AttributeError``
from :func:`parse_chunk` into ``protocol_error``; anything else would surface as a
miscategorised ``client_error``. Property-based, over JSON built from the keys real
servers use.
"""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from pytest_llmperf.apis.chunks import parse_chunk
from pytest_llmperf.apis.events import error_message
from pytest_llmperf.client.sse import SSEParser

KEYS = [
    "choices",
    "delta",
    "content",
    "text",
    "message",
    "usage",
    "error",
    "finish_reason",
    "reasoning_content",
    "detail",
    "code",
    "completion_tokens",
]
LEAF = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=4)
JSON = st.recursive(
    LEAF,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.sampled_from(KEYS), inner, max_size=4)
    ),
    max_leaves=16,
)
HANDLED = (ValueError, TypeError, KeyError, AttributeError)


@settings(max_examples=500, deadline=None)
@given(JSON)
def test_any_json_chunk_is_understood_or_a_handled_error(obj):
    try:
        info = parse_chunk(json.dumps(obj))
    except HANDLED:
        return
    assert isinstance(info.event, bool)
    assert info.event or not (info.answer or info.reasoning)  # answers are token events
    assert isinstance(error_message(obj), str)


@settings(max_examples=500, deadline=None)
@given(st.lists(st.binary(max_size=40), max_size=8))
def test_any_bytes_split_anyhow_never_break_the_sse_parser(chunks):
    parser = SSEParser()
    events = [e for chunk in chunks for e in parser.feed(chunk)] + parser.close()
    assert all(isinstance(e, str) for e in events)
