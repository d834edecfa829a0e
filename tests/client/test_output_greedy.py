"""Greedy outputs fingerprinted over loopback sockets: digests and per-token-event marks.

``record.output_digest`` is the same for the same output whatever the server's
random call ids; ``record.output_marks`` holds one 2-byte value per token event,
so two outputs of one prompt part at the first position where the marks differ.
Only a request whose contract keeps its output takes the per-event path.
"""

from __future__ import annotations

import base64
import time
import zlib

import pytest
from api_server import Reply, event
from test_output_streams import chat_calls, chat_text, send

from pytest_llmperf.client import RequestRecord, Timeouts
from pytest_llmperf.client.request import _Reading
from pytest_llmperf.workloads.output_contract import SAMPLE_TOOLS, OutputContract

pytestmark = pytest.mark.asyncio

GREEDY = OutputContract(greedy=True, greedy_seed=7)
GREEDY_TOOLS = OutputContract(tools=SAMPLE_TOOLS, tool_choice="required", greedy=True)
WORDS = ["The ", "harbour ", "is ", "quiet ", "tonight."]


def _marks(record: RequestRecord) -> list[int]:
    raw = base64.b64decode(record.output_marks)
    return [int.from_bytes(raw[i : i + 2], "big") for i in range(0, len(raw), 2)]


def _parting(a: RequestRecord, b: RequestRecord) -> int | None:
    pairs = enumerate(zip(_marks(a), _marks(b), strict=False))
    return next((i for i, (x, y) in pairs if x != y), None)


async def test_the_same_output_has_the_same_digest_and_marks() -> None:
    first = await send(chat_text(WORDS), "chat", GREEDY)
    again = await send(chat_text(WORDS), "chat", GREEDY)
    assert first.ok and again.ok
    assert len(first.output_digest) == 16 and int(first.output_digest, 16) >= 0
    assert (first.output_digest, first.output_marks) == (again.output_digest, again.output_marks)
    assert _marks(first) == [zlib.crc32(w.encode()) & 0xFFFF for w in WORDS]
    assert first.token_events == len(WORDS)
    assert not first.output_checked and first.invalid == ""  # greedy alone checks nothing


async def test_outputs_that_part_differ_in_digest_and_their_marks_say_where() -> None:
    changed = [*WORDS[:2], "was ", "loud ", "tonight."]
    base = await send(chat_text(WORDS), "chat", GREEDY)
    other = await send(chat_text(changed), "chat", GREEDY)
    assert base.output_digest != other.output_digest
    assert _parting(base, other) == 2


async def test_tool_calls_are_fingerprinted_without_the_servers_random_ids() -> None:
    args = ['{"query": "har', 'bours", ', '"limit": 5}']
    one = await send(
        chat_calls([("search", args)], call_id="chatcmpl-tool-aaa"), "chat", GREEDY_TOOLS
    )
    two = await send(
        chat_calls([("search", args)], call_id="chatcmpl-tool-bbb"), "chat", GREEDY_TOOLS
    )
    assert one.output_checked and one.invalid == ""
    assert one.output_digest == two.output_digest and one.output_marks == two.output_marks
    other = await send(
        chat_calls([("search", ['{"query": "x", "limit": 5}'])]), "chat", GREEDY_TOOLS
    )
    assert other.output_digest != one.output_digest


async def test_every_token_event_has_a_mark_vllms_blank_last_token_included() -> None:
    # vLLM sends a last token that ends inside a character as "" beside the finish; the
    # usage says it was a token, so it is a token event, and it has its mark
    steps = [event({"choices": [{"index": 0, "delta": {"content": w}}]}) for w in WORDS[:3]]
    last = {"index": 0, "delta": {"content": ""}, "finish_reason": "length"}
    steps.append(event({"choices": [last]}))
    usage = {"prompt_tokens": 4, "completion_tokens": 4, "total_tokens": 8}
    steps += [event({"choices": [], "usage": usage}), event("[DONE]")]
    record = await send(Reply([(0.0, s) for s in steps]), "chat", GREEDY)
    assert record.ok and record.token_events == 4
    assert _marks(record)[-1] == zlib.crc32(b"") & 0xFFFF and len(_marks(record)) == 4


async def test_reasoning_events_have_marks_but_only_the_answer_is_digested() -> None:
    def stream(thought: str) -> Reply:
        steps = [event({"choices": [{"index": 0, "delta": {"reasoning_content": thought}}]})]
        steps += [event({"choices": [{"index": 0, "delta": {"content": w}}]}) for w in WORDS]
        steps += [event({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})]
        return Reply([(0.0, s) for s in [*steps, event("[DONE]")]])

    one = await send(stream("hmm"), "chat", GREEDY)
    two = await send(stream("well"), "chat", GREEDY)
    assert one.token_events == len(WORDS) + 1 == len(_marks(one))
    assert one.output_digest == two.output_digest  # the same answer
    assert _parting(one, two) == 0


async def test_a_request_without_a_kept_output_stays_on_the_plain_event_loop() -> None:
    def per_event(contract: OutputContract | None, api: str = "chat") -> bool:
        record = RequestRecord(index=0, t_sched=time.monotonic_ns())
        reading = _Reading(record, Timeouts(), 0, api=api, contract=contract)
        return bool(reading._per_event)

    assert per_event(None) is False
    assert per_event(OutputContract()) is False  # nothing to keep
    assert per_event(GREEDY, "embeddings") is False  # embeddings generate no output
    assert per_event(GREEDY) is True and per_event(GREEDY_TOOLS, "messages") is True
