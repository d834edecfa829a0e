"""``llm_load("trace", format="weka"|"agentic"|"otel", ...)`` from marker to workload: the
parameters that apply to agentic formats only, and the ones that do not."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from agentic_fixture import write_agentic, write_weka

from pytest_llmperf.errors import LlmPerfUsageError
from pytest_llmperf.specs.load import LoadSpec, TraceSpec
from pytest_llmperf.specs.run import RunSpec
from pytest_llmperf.workloads import build_workload
from pytest_llmperf.workloads.agent_script import AgentScript, AgentSource, agents_of
from pytest_llmperf.workloads.agentic.workload import DEFAULT_STAGGER_S, AgenticTraceWorkload
from pytest_llmperf.workloads.conversations import conversations_of
from pytest_llmperf.workloads.traces import read_trace


@pytest.fixture(scope="module")
def weka_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_weka(tmp_path_factory.mktemp("agentic") / "weka")


def _spec(**load: Any) -> RunSpec:
    return RunSpec.from_markers((), {"seed": 2}, ("trace",), load)


def test_a_weka_trace_load_builds_the_agentic_workload(weka_dir: Path) -> None:
    spec = _spec(path=str(weka_dir), format="weka", conversations=6, start="mid", stagger=0.5,
                 time_scale=2)  # fmt: skip
    assert spec.requests is None and spec.duration is None
    trace = spec.load.trace
    assert trace is not None and trace.agentic
    assert (trace.conversations, trace.start, trace.stagger, trace.time_scale) == (6, "mid", 0.5,
                                                                                   2.0)  # fmt: skip
    assert spec.load.describe()["trace"] == {
        "path": str(weka_dir), "format": "weka", "time_scale": 2.0, "start": "mid",
        "conversations": 6, "stagger": 0.5,
    }  # fmt: skip
    workload = spec.workload
    assert isinstance(workload, AgenticTraceWorkload)
    source = agents_of(workload)
    assert source is not None and source.count == 6 and workload.size == 6
    root = source.conversation(0)
    assert isinstance(root, AgentScript) and isinstance(source, AgentSource)
    assert isinstance(root.spawns(1)[0].script, AgentScript)
    assert conversations_of(workload) is None  # not a row trace's conversations
    assert source.start_ns(3) == 1_500_000_000
    described = spec.describe_workload()
    assert described["format"] == "weka" and described["start"] == "mid"
    assert described["conversations"] == 6 and described["recorded_conversations"] == 4
    assert described["subagents"] == 3 and described["dropped_spawns"] == 0
    assert described["replies"] == "server" and described["block_size"] == [16]


def test_workload_options_reach_the_agentic_workload(weka_dir: Path, tmp_path: Path) -> None:
    spec = RunSpec.from_markers(
        ("trace",), {"replies": "trace", "conversation_header": "X-Agent-Session"},
        ("trace",), {"path": str(weka_dir), "format": "weka"},
    )  # fmt: skip
    source = agents_of(spec.workload)
    assert source is not None and source.describe()["replies"] == "trace"
    assert source.conversation(0).turn(0, []).headers == {"X-Agent-Session": "conv-a"}
    assert source.start_ns(2) == round(2 * DEFAULT_STAGGER_S * 1e9)
    lines = _spec(path=str(write_agentic(tmp_path / "a.jsonl")), format="agentic")
    assert agents_of(lines.workload) is not None
    assert lines.describe_workload()["starts"] == "recorded"


@pytest.mark.parametrize(
    ("load", "says"),
    [
        ({"format": "weka", "start": 3}, "takes start='mid'"),
        ({"format": "weka", "limit": 3}, "use conversations=N instead of limit=3"),
        ({"format": "weka", "conversations": 0}, "conversations must be an integer >= 1, got 0"),
        ({"format": "weka", "stagger": -1}, "stagger must be seconds >= 0, got -1"),
        ({"format": "mooncake", "start": "mid"}, "start='mid' applies to agentic formats"),
        ({"format": "jsonl", "conversations": 2}, "conversations= apply to agentic formats"),
        ({"format": "azure", "stagger": 2}, "stagger= apply to agentic formats"),
    ],
)
def test_parameters_of_the_other_kind_of_format_are_refused(
    weka_dir: Path, load: dict[str, Any], says: str
) -> None:
    with pytest.raises(LlmPerfUsageError, match=says.replace("(", r"\(").replace("[", r"\[")):
        TraceSpec.parse({"path": str(weka_dir), **load})
    with pytest.raises(LlmPerfUsageError):
        LoadSpec.parse("trace", {"path": str(weka_dir), **load})


def test_the_workload_refuses_what_does_not_apply(weka_dir: Path) -> None:
    def build(**kw: Any) -> Any:
        return build_workload("trace", **{"path": str(weka_dir), **kw})

    with pytest.raises(LlmPerfUsageError, match="replies must be one of 'server', 'trace'"):
        build(format="weka", replies="both")
    with pytest.raises(LlmPerfUsageError, match="think_time= does not apply"):
        build(format="weka", think_time=1.0)
    with pytest.raises(LlmPerfUsageError, match="replies= apply to agentic formats"):
        build(format="mooncake", replies="trace")
    with pytest.raises(LlmPerfUsageError, match="holds agentic conversations, not rows"):
        read_trace(weka_dir, "weka")
    with pytest.raises(LlmPerfUsageError, match="does not exist"):
        build(format="weka", path=str(weka_dir / "nope"))
    with pytest.raises(LlmPerfUsageError, match="llm_load\\('trace', \\.\\.\\.\\)"):
        RunSpec.from_markers(
            ("trace",), {"conversations": 2}, ("trace",), {"path": str(weka_dir), "format": "weka"}
        )


def test_otel_is_read_by_its_own_reader_where_the_build_has_it(weka_dir: Path) -> None:
    try:
        import pytest_llmperf.workloads.agentic.otel  # noqa: F401
    except ImportError:
        with pytest.raises(LlmPerfUsageError, match=r"format='otel' .* not available"):
            build_workload("trace", path=str(weka_dir / "conv-a.json"), format="otel")
    else:
        pytest.skip("the OTel reader is in this build: its own tests cover it")
