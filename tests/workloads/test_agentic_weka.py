"""The agentic trace readers (workloads/agentic/weka.py, jsonl.py): the recorded structure,
the waits and launch offsets derived from it, and bad input named by file, path and value."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
from agentic_fixture import conversation_a, conversation_b, write_agentic, write_weka

from pytest_llmperf.errors import LlmPerfUsageError
from pytest_llmperf.workloads.agentic.jsonl import read_agentic
from pytest_llmperf.workloads.agentic.model import AgentConversation
from pytest_llmperf.workloads.agentic.weka import read_weka

MS = 1_000_000


def _ms(ns: int) -> int:
    return round(ns / MS)


def _shape(conv: AgentConversation) -> list[Any]:
    """A conversation's structure and times, without where each call was read."""
    return [
        (
            path,
            [(c.t_ns, c.input_tokens, c.output_tokens, c.hash_ids, c.api_ns, c.wait_ns)
             for c in thread.calls],
            [(s.after, s.offset_ns, s.joined) for s in thread.spawns],
        )
        for path, thread in conv.root.walk()
    ]  # fmt: skip


def _write(tmp_path: Path, obj: Any, name: str = "t.json") -> Path:
    path = tmp_path / name
    path.write_text(json.dumps(obj), "utf-8")
    return path


def _one(tmp_path: Path, obj: Any) -> AgentConversation:
    (conv,) = read_weka(_write(tmp_path, obj))
    return conv


def test_a_folder_is_read_in_name_order_with_its_recorded_structure(tmp_path: Path) -> None:
    convs = read_weka(write_weka(tmp_path / "w"))
    assert [c.conversation_id for c in convs] == ["conv-a", "conv-b", "conv-c", "conv-d"]
    a = convs[0]
    assert a.block_size == 16 and a.shared_hashes and not convs[1].shared_hashes
    assert a.calls() == 7 and a.dropped_spawns == 0 and a.start_ns == 0
    paths = [p for p, _ in a.root.walk()]
    assert paths == ["", "agent_001", "agent_001/agent_002"]
    first = a.root.calls[0]
    assert (first.input_tokens, first.output_tokens, first.hash_ids) == (40, 8, (1, 2, 3))
    assert first.api_ns == 500 * MS and first.streaming and first.model == "m"
    assert first.where.endswith("conv-a.json requests[0]")
    nested = a.root.spawns[0].thread.spawns[0].thread.calls[0]
    assert nested.where.endswith("requests[2].requests[1].requests[0]")


def test_waits_count_from_the_call_end_or_the_joined_subagents_end(tmp_path: Path) -> None:
    a, b, *_ = read_weka(write_weka(tmp_path / "w"))
    # root of a: 0.5 s tool wait; after the joined subagent (marker 1.6 s + 1.5 s) 0.3 s;
    # then the recorded think_time (0.2 s)
    assert [_ms(c.wait_ns) for c in a.root.calls] == [0, 500, 300, 200]
    (spawn,) = a.root.spawns
    # launched after root call 1 (ends at 1.4 s) at its first call (1.7 s)
    assert (spawn.after, _ms(spawn.offset_ns), spawn.joined) == (1, 300, True)
    sub = spawn.thread
    (inner,) = sub.spawns  # nested: after the subagent's call 0 (ends 2.0 s), first call 2.15 s
    assert (inner.after, _ms(inner.offset_ns)) == (0, 150)
    # the subagent's call 1 waits from its nested subagent's end (2.1 s + 0.4 s)
    assert [_ms(c.wait_ns) for c in sub.calls] == [0, 100]
    # b: nested times relative to the marker (0.1 s < 0.5 s); the background subagent is not
    # waited for: the root's next call counts from its own previous call's end
    (bg,) = b.root.spawns
    assert not bg.joined and _ms(bg.offset_ns) == 300
    assert [_ms(c.t_ns) for c in bg.thread.calls] == [600, 1100]
    assert [_ms(c.wait_ns) for c in bg.thread.calls] == [0, 300]
    assert [_ms(c.wait_ns) for c in b.root.calls] == [0, 600, 400]
    assert "nested t values read as relative to their subagent marker" in b.notes


def test_absolute_nested_times_are_kept_as_they_are(tmp_path: Path) -> None:
    obj = conversation_b()
    bg = obj["requests"][1]
    for call in bg["requests"]:
        call["t"] += bg["t"]  # SemiAnalysis-style: absolute
    conv = _one(tmp_path, obj)
    assert [_ms(c.t_ns) for c in conv.root.spawns[0].thread.calls] == [600, 1100]
    assert conv.notes == ()


def test_a_subagent_before_any_call_is_dropped_and_counted(tmp_path: Path) -> None:
    obj = conversation_a()
    early = copy.deepcopy(obj["requests"][2])
    early["t"] = 0.0
    obj["requests"].insert(0, early)  # with its nested subagent: two markers
    conv = _one(tmp_path, obj)
    assert conv.dropped_spawns == 2
    assert [p for p, _ in conv.root.walk()] == ["", "agent_001", "agent_001/agent_002"]


def test_overlapping_records_give_zero_waits_and_a_note(tmp_path: Path) -> None:
    obj = conversation_a()
    obj["requests"][1]["t"] = 0.2  # before call 0 ended (0.5 s)
    conv = _one(tmp_path, obj)
    assert conv.root.calls[1].wait_ns == 0
    assert any("negative waits" in n for n in conv.notes)


def test_defaults_for_what_a_file_leaves_out(tmp_path: Path) -> None:
    obj = {"requests": [{"type": "n", "t": 0, "in": 10, "out": 2},
                        {"type": "n", "t": 3, "in": 20, "out": 2}]}  # fmt: skip
    conv = _one(tmp_path, obj)
    assert conv.conversation_id == "t" and conv.block_size == 64 and not conv.shared_hashes
    first, second = conv.root.calls
    assert first.api_ns is None and not first.streaming and first.hash_ids == ()
    assert second.wait_ns == 3_000_000_000  # no api_time: the whole gap
    (again,) = read_weka(_write(tmp_path, obj, "u.json"), default_block_size=32)
    assert again.block_size == 32


BAD = [
    (lambda o: o.__setitem__("requests", {}), "requests must be a list", "{}"),
    (lambda o: o["requests"][1].__setitem__("in", -3), "requests[1].in must be an integer", "-3"),
    (lambda o: o["requests"][1].__setitem__("in", "70"), "requests[1].in must be", "'70'"),
    (lambda o: o["requests"][0].__setitem__("out", 0), "requests[0].out must be", "0"),
    (lambda o: o["requests"][0].__setitem__("t", -1), "requests[0].t must be a number", "-1"),
    (lambda o: o["requests"][0].__setitem__("type", "x"), "requests[0].type must be", "'x'"),
    (lambda o: o["requests"][0]["hash_ids"].__setitem__(1, "b"), "requests[0].hash_ids[1]",
     "'b'"),
    (lambda o: o["requests"][2]["requests"][1].__setitem__("requests", None),
     "requests[2].requests[1].requests must be a list", "None"),
    (lambda o: o["requests"][2]["requests"][2].__setitem__("api_time", float("nan")),
     "requests[2].requests[2].api_time must be", "nan"),
    (lambda o: o["requests"][2].__setitem__("duration_ms", -5), "requests[2].duration_ms", "-5"),
    (lambda o: o["requests"][2].__setitem__("agent_id", "a/b"), "requests[2].agent_id", "'a/b'"),
    (lambda o: o.__setitem__("hash_id_scope", "galaxy"), "hash_id_scope must be", "'galaxy'"),
    (lambda o: o.__setitem__("block_size", 0), "block_size must be an integer >= 1", "0"),
    (lambda o: o.__setitem__("requests", []), "holds no call", ""),
]  # fmt: skip


@pytest.mark.parametrize(("spoil", "says", "value"), BAD)
def test_bad_input_names_the_file_the_path_and_the_value(
    tmp_path: Path, spoil: Any, says: str, value: str
) -> None:
    obj = conversation_a()
    spoil(obj)
    path = _write(tmp_path, obj)
    with pytest.raises(LlmPerfUsageError) as err:
        read_weka(path)
    message = str(err.value)
    assert str(path) in message and says in message and value in message, message


def test_files_that_are_not_traces_are_usage_errors(tmp_path: Path) -> None:
    (tmp_path / "bad.json").write_text("{not json", "utf-8")
    with pytest.raises(LlmPerfUsageError, match=r"bad\.json: not JSON"):
        read_weka(tmp_path / "bad.json")
    (tmp_path / "list.json").write_text("[1, 2]", "utf-8")
    with pytest.raises(LlmPerfUsageError, match=r"list\.json: the trace must be a JSON object"):
        read_weka(tmp_path / "list.json")
    (tmp_path / "empty").mkdir()
    with pytest.raises(LlmPerfUsageError, match=r"holds no \.json file"):
        read_weka(tmp_path / "empty")
    with pytest.raises(LlmPerfUsageError, match="neither a file nor a folder"):
        read_weka(tmp_path / "missing.json")


# -- the project's JSON Lines ----------------------------------------------------------


def test_agentic_lines_are_weka_objects_with_a_start(tmp_path: Path) -> None:
    convs = read_agentic(write_agentic(tmp_path / "a.jsonl"))
    assert [c.conversation_id for c in convs] == ["conv-a", "conv-b", "conv-c", "conv-d"]
    assert [c.start_ns for c in convs] == [0, 2_000_000_000, 4_000_000_000, 6_000_000_000]
    weka = read_weka(write_weka(tmp_path / "w"))
    assert list(map(_shape, convs)) == list(map(_shape, weka))  # the same structure
    untimed = read_agentic(write_agentic(tmp_path / "b.jsonl", starts=False))
    assert [c.start_ns for c in untimed] == [0, 0, 0, 0]


def test_agentic_lines_take_a_default_id_and_skip_blank_lines(tmp_path: Path) -> None:
    line = {"requests": [{"type": "s", "t": 0, "in": 5, "out": 1}]}
    path = tmp_path / "x.jsonl"
    path.write_text(f"\n{json.dumps(line)}\n\n{json.dumps(line)}\n", "utf-8")
    assert [c.conversation_id for c in read_agentic(path)] == ["line2", "line4"]


def test_agentic_errors_name_the_line(tmp_path: Path) -> None:
    good = json.dumps({"id": "x", "start": 1, "requests": [{"type": "n", "t": 0, "in": 5,
                                                              "out": 1}]})  # fmt: skip
    path = tmp_path / "x.jsonl"
    path.write_text(good + "\n" + good.replace('"in": 5', '"in": null') + "\n", "utf-8")
    with pytest.raises(LlmPerfUsageError) as err:
        read_agentic(path)
    assert f"{path} line 2: requests[0].in must be an integer >= 1, got None" in str(err.value)
    path.write_text(good + "\n" + good.replace('"start": 1, ', "") + "\n", "utf-8")
    with pytest.raises(LlmPerfUsageError, match=r"line 2: no 'start' while other lines"):
        read_agentic(path)
    path.write_text(good.replace('"start": 1', '"start": "soon"') + "\n", "utf-8")
    with pytest.raises(LlmPerfUsageError, match=r"line 1: start must be .* got 'soon'"):
        read_agentic(path)
    path.write_text("\n", "utf-8")
    with pytest.raises(LlmPerfUsageError, match="holds no conversation"):
        read_agentic(path)
