"""Reading OpenTelemetry GenAI spans as agentic conversations (workloads/agentic/otel.py):
the tree (root thread, joined and background subagents), the waits and the tool spans that
explain them, each accepted file layout, and errors that name the file, the span and the value."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from pytest_llmperf.errors import LlmPerfUsageError
from pytest_llmperf.workloads.agentic.model import AgentThread
from pytest_llmperf.workloads.agentic.otel import read_otel

MS = 1_000_000
EPOCH = 1_700_000_000_000_000_000


class Trace:
    """Builds the spans of one trace; times in ms from the trace's start."""

    def __init__(self, trace_id: str = "a" * 32, base_ms: int = 0) -> None:
        self.trace_id = trace_id
        self.base = base_ms
        self.spans: list[dict[str, Any]] = []

    def span(self, name: str, parent: str, start: int, end: int, **attrs: Any) -> str:
        span_id = f"{len(self.spans) + 1:016x}"
        self.spans.append(
            {
                "traceId": self.trace_id,
                "spanId": span_id,
                "parentSpanId": parent,
                "name": name,
                "startTimeUnixNano": str(EPOCH + (self.base + start) * MS),
                "endTimeUnixNano": str(EPOCH + (self.base + end) * MS),
                "attributes": [
                    {
                        "key": k.replace("__", "."),
                        "value": {"intValue": str(v)} if isinstance(v, int) else {"stringValue": v},
                    }
                    for k, v in attrs.items()
                ],
            }
        )
        return span_id

    def agent(self, parent: str, start: int, end: int, name: str = "coder") -> str:
        return self.span(
            f"invoke_agent {name}",
            parent,
            start,
            end,
            gen_ai__operation__name="invoke_agent",
            gen_ai__agent__name=name,
        )

    def chat(self, parent: str, start: int, end: int, n_in: int = 100, n_out: int = 10) -> str:
        return self.span(
            "chat m",
            parent,
            start,
            end,
            gen_ai__operation__name="chat",
            gen_ai__usage__input_tokens=n_in,
            gen_ai__usage__output_tokens=n_out,
            gen_ai__request__model="m",
        )

    def tool(self, parent: str, start: int, end: int) -> str:
        return self.span(
            "execute_tool grep",
            parent,
            start,
            end,
            gen_ai__operation__name="execute_tool",
            gen_ai__tool__name="grep",
        )


def shape(thread: AgentThread) -> tuple[Any, ...]:
    """A thread's structure without the ``where`` labels (which name the file)."""
    calls = tuple(replace(c, where="") for c in thread.calls)
    spawns = tuple((s.after, s.offset_ns, s.joined, shape(s.thread)) for s in thread.spawns)
    return (thread.agent_id, calls, spawns)


def otlp(*traces: Trace) -> dict[str, Any]:
    spans = [s for t in traces for s in t.spans]
    return {"resourceSpans": [{"resource": {}, "scopeSpans": [{"scope": {}, "spans": spans}]}]}


def write(tmp_path: Path, doc: Any, name: str = "spans.json") -> Path:
    path = tmp_path / name
    path.write_text(doc if isinstance(doc, str) else json.dumps(doc), encoding="utf-8")
    return path


def coding_agent() -> Trace:
    """A root agent: call 0, a joined subagent, a background subagent, calls 1 and 2.

    root calls: [0, 100) [500, 600) [900, 1000); tool spans [150, 250) and [650, 850).
    "explore" (joined): calls [110, 200) [300, 400), ends 400; "watch" (background):
    call [120, 700), ends 700 after root call 1 starts (500).
    """
    t = Trace()
    root = t.agent("", 0, 1000)
    t.chat(root, 0, 100, n_in=1000, n_out=50)
    explore = t.agent(root, 105, 400, name="explore")
    t.chat(explore, 110, 200, n_in=300, n_out=20)
    t.tool(explore, 210, 290)
    t.chat(explore, 300, 400, n_in=400, n_out=30)
    watch = t.agent(root, 115, 700, name="watch")
    t.chat(watch, 120, 700, n_in=200, n_out=40)
    t.tool(root, 150, 250)
    t.chat(root, 500, 600, n_in=1500, n_out=60)
    t.tool(root, 650, 850)
    t.chat(root, 900, 1000, n_in=2000, n_out=70)
    return t


def test_the_tree_waits_and_tool_coverage(tmp_path: Path) -> None:
    [conv] = read_otel(write(tmp_path, otlp(coding_agent())))
    assert conv.conversation_id == "a" * 32
    root = conv.root
    assert root.agent_id == ""
    assert [(c.input_tokens, c.output_tokens, c.model) for c in root.calls] == [
        (1000, 50, "m"),
        (1500, 60, "m"),
        (2000, 70, "m"),
    ]
    assert [c.t_ns for c in root.calls] == [0, 500 * MS, 900 * MS]
    assert [c.api_ns for c in root.calls] == [100 * MS, 100 * MS, 100 * MS]
    # call 1 waits from the joined subagent's end (400), not from call 0's end (100);
    # the background one (ends 700) is nobody's wait
    assert [c.wait_ns for c in root.calls] == [0, 100 * MS, 300 * MS]
    explore, watch = root.spawns
    assert (explore.after, explore.joined, explore.thread.agent_id) == (0, True, "explore")
    assert (watch.after, watch.joined, watch.thread.agent_id) == (0, False, "watch")
    assert explore.offset_ns == 10 * MS  # its first call starts 10 ms after root call 0 ends
    assert [c.wait_ns for c in explore.thread.calls] == [0, 100 * MS]
    # waits: root [400, 500) + [600, 900), explore [200, 300): 500 ms; tools cover
    # root [650, 850) and explore [210, 290) = 280 ms (root's [150, 250) is in no wait)
    assert conv.notes[0] == "waits: 0.500 s, 56.0% of it covered by execute_tool spans " + (
        "(tool_coverage=0.5600)"
    )
    assert conv.dropped_spawns == 0
    assert conv.calls() == 6
    assert conv.root.calls[0].hash_ids == ()  # OTel records no KV blocks


def test_a_flat_span_list_in_the_python_sdk_spelling_reads_the_same(tmp_path: Path) -> None:
    def flat(span: dict[str, Any]) -> dict[str, Any]:
        def iso(ns: str) -> str:
            n = int(ns)
            return (
                datetime.fromtimestamp(n // 10**9, UTC)
                .replace(microsecond=n % 10**9 // 1000)
                .isoformat()
                .replace("+00:00", "Z")
            )

        return {
            "name": span["name"],
            "context": {"trace_id": "0x" + span["traceId"], "span_id": "0x" + span["spanId"]},
            "parent_id": ("0x" + span["parentSpanId"]) if span["parentSpanId"] else None,
            "start_time": iso(span["startTimeUnixNano"]),
            "end_time": iso(span["endTimeUnixNano"]),
            "attributes": {
                a["key"]: int(a["value"]["intValue"])
                if "intValue" in a["value"]
                else a["value"]["stringValue"]
                for a in span["attributes"]
            },
        }

    trace = coding_agent()
    want = read_otel(write(tmp_path, otlp(trace), "otlp.json"))
    as_list = read_otel(write(tmp_path, [flat(s) for s in trace.spans], "flat.json"))
    as_lines = "\n".join(json.dumps(flat(s)) for s in trace.spans)
    as_jsonl = read_otel(write(tmp_path, as_lines, "flat.jsonl"))
    for got in (as_list, as_jsonl):
        assert [shape(c.root) for c in got] == [shape(c.root) for c in want]
        assert got[0].notes == want[0].notes


def test_one_conversation_per_trace_in_start_order_across_json_lines(tmp_path: Path) -> None:
    late, early = Trace("b" * 32, base_ms=2500), Trace("c" * 32, base_ms=1000)
    for t in (late, early):
        root = t.agent("", 0, 300)
        t.chat(root, 0, 100)
        t.chat(root, 200, 300)
    lines = "\n".join(json.dumps(otlp(t)) for t in (late, early)) + "\n"
    got = read_otel(write(tmp_path, lines, "collector.jsonl"))
    assert [c.conversation_id for c in got] == ["c" * 32, "b" * 32]
    assert [c.start_ns for c in got] == [0, 1500 * MS]
    assert all(c.root.calls[1].wait_ns == 100 * MS for c in got)


def test_calls_outside_every_agent_are_the_root_and_agents_below_are_subagents(
    tmp_path: Path,
) -> None:
    t = Trace()
    top = t.span("request", "", 0, 1000)  # an app span, no GenAI operation
    t.chat(top, 0, 100)
    helper = t.agent(top, 100, 300, name="helper")
    t.chat(helper, 100, 300)
    t.chat(top, 400, 500)
    [conv] = read_otel(write(tmp_path, otlp(t)))
    assert len(conv.root.calls) == 2
    [spawn] = conv.root.spawns
    assert (spawn.after, spawn.joined, spawn.thread.agent_id) == (0, True, "helper")
    assert conv.root.calls[1].wait_ns == 100 * MS


def test_a_subagent_before_its_parents_first_call_is_dropped_and_counted(tmp_path: Path) -> None:
    t = Trace()
    root = t.agent("", 0, 1000)
    early = t.agent(root, 0, 200, name="early")
    t.chat(early, 10, 200)
    t.chat(root, 300, 400)
    [conv] = read_otel(write(tmp_path, otlp(t)))
    assert conv.dropped_spawns == 1
    assert conv.root.spawns == ()
    assert any("1 subagents started before" in n for n in conv.notes)


def test_sibling_subagents_with_the_same_name_get_distinct_ids(tmp_path: Path) -> None:
    t = Trace()
    root = t.agent("", 0, 1000)
    t.chat(root, 0, 100)
    for _ in range(2):
        sub = t.agent(root, 100, 300, name="worker")
        t.chat(sub, 100, 300)
    t.chat(root, 400, 500)
    [conv] = read_otel(write(tmp_path, otlp(t)))
    assert [s.thread.agent_id for s in conv.root.spawns] == ["worker", "worker#2"]


def test_older_token_attribute_names_and_zero_outputs(tmp_path: Path) -> None:
    t = Trace()
    root = t.agent("", 0, 500)
    t.span(
        "chat",
        root,
        0,
        100,
        gen_ai__operation__name="text_completion",
        gen_ai__usage__prompt_tokens=70,
        gen_ai__usage__completion_tokens=0,
    )
    [conv] = read_otel(write(tmp_path, otlp(t)))
    [call] = conv.root.calls
    assert (call.input_tokens, call.output_tokens) == (70, 1)
    assert "1 calls recorded 0 output tokens: replayed with 1" in conv.notes


@pytest.mark.parametrize(
    ("mutate", "expected"),
    [
        (
            lambda s: s["attributes"].pop(1),
            r"spans\.json: span 'chat m' \(spanId 0000000000000002\) of trace a{32}: "
            r"gen_ai\.usage\.input_tokens must be an integer >= 1, got None",
        ),
        (
            lambda s: s["attributes"][2]["value"].update(intValue="-3"),
            r"span 'chat m' .*gen_ai\.usage\.output_tokens must be an integer >= 0, got -3",
        ),
        (
            lambda s: s.update(startTimeUnixNano="yesterday"),
            r"span 'chat m' .*startTimeUnixNano must be nanoseconds .* got 'yesterday'",
        ),
        (
            lambda s: s.update(endTimeUnixNano="1"),
            r"span 'chat m' .*ends before it starts",
        ),
        (lambda s: s.pop("traceId"), r"span 'chat m' has no traceId/spanId"),
    ],
)
def test_a_bad_span_is_named_with_its_value(tmp_path: Path, mutate: Any, expected: str) -> None:
    t = Trace()
    root = t.agent("", 0, 500)
    t.chat(root, 0, 100)
    mutate(t.spans[1])
    with pytest.raises(LlmPerfUsageError, match=expected):
        read_otel(write(tmp_path, otlp(t)))


def test_files_that_are_not_spans_say_where(tmp_path: Path) -> None:
    with pytest.raises(LlmPerfUsageError, match=r"bad\.json: line 1 column 2: not JSON"):
        read_otel(write(tmp_path, "{oops", "bad.json"))
    with pytest.raises(LlmPerfUsageError, match=r"bad\.jsonl: line 3 column 2: not JSON"):
        read_otel(write(tmp_path, "{}\n\n[x\n", "bad.jsonl"))
    with pytest.raises(LlmPerfUsageError, match=r"empty\.json: no spans"):
        read_otel(write(tmp_path, {"resourceSpans": []}, "empty.json"))
    with pytest.raises(LlmPerfUsageError, match=r"missing\.json: cannot read it"):
        read_otel(tmp_path / "missing.json")
    latin = tmp_path / "latin.json"
    latin.write_bytes(b'{"name": "caf\xe9"}')
    with pytest.raises(LlmPerfUsageError, match=r"latin\.json: not UTF-8 text"):
        read_otel(latin)
    t = Trace()
    t.tool(t.agent("", 0, 100), 0, 50)
    with pytest.raises(LlmPerfUsageError, match=r"no model-call span .*chat, generate_content"):
        read_otel(write(tmp_path, otlp(t), "tools.json"))


def test_calls_only_inside_several_top_level_agents_is_an_error(tmp_path: Path) -> None:
    t = Trace()
    for name in ("a", "b"):
        t.chat(t.agent("", 0, 100, name=name), 0, 100)
    with pytest.raises(LlmPerfUsageError, match=r"no model call outside its 2 top-level"):
        read_otel(write(tmp_path, otlp(t)))
