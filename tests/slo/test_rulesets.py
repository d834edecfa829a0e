"""Rulesets: built-in MLPerf limits, YAML targets, and errors that name file, key and value."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_llmperf.errors import LlmPerfUsageError
from pytest_llmperf.specs.rulesets import BUILTIN_RULESETS, load_ruleset

MLPERF = {
    "llama2-70b": ((2000, 200), (450, 40)),
    "llama3.1-8b": ((2000, 100), (500, 30)),
    "llama3.1-405b": ((6000, 175), (4500, 80)),
    "mixtral-8x7b": ((2000, 200), None),
    "deepseek-r1": ((2000, 80), (1500, 15)),
    "gpt-oss-120b": ((3000, 80), (2000, 20)),
}


@pytest.mark.parametrize("model", sorted(MLPERF))
def test_builtins_carry_the_mlperf_server_and_interactive_p99_limits(model: str) -> None:
    server, interactive = MLPERF[model]
    for scenario, limits in (("server", server), ("interactive", interactive)):
        name = f"mlperf-{model}-{scenario}"
        if limits is None:
            assert name not in BUILTIN_RULESETS
            continue
        ruleset = load_ruleset(name)
        by_metric = {s.metric: s for s in ruleset.slos}
        assert (by_metric["ttft"].stat, by_metric["ttft"].op) == ("p99", "<")
        assert (by_metric["ttft"].target, by_metric["tpot"].target) == limits
        assert by_metric["tpot"].unit == "ms"


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "rules.yaml"
    path.write_text(text)
    return path


def test_yaml_targets_become_slos_with_implied_directions(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        """
name: chat-tier
description: what the chat tier promises
min_samples: 2000
min_duration: 2m
targets:
  ttft: {p50: 200ms, p99: 0.5s}
  tpot: {p99: "<= 50ms"}
  error_rate: 1%
  blank_rate: 5%
  goodput: 95%
  output_throughput: 1000 tok/s
slos:
  - "itl.p99 < 100ms"
""",
    )
    ruleset = load_ruleset(str(path))
    assert ruleset.name == "chat-tier" and ruleset.source == str(path)
    assert ruleset.min_samples == 2000 and ruleset.min_duration_s == 120.0
    got = {(s.name, s.op, round(s.target, 9), s.unit) for s in ruleset.slos}
    assert got == {
        ("ttft.p50", "<", 200.0, "ms"),
        ("ttft.p99", "<", 500.0, "ms"),
        ("tpot.p99", "<=", 50.0, "ms"),
        ("error_rate", "<", 0.01, "fraction"),
        ("blank_rate", "<", 0.05, "fraction"),
        ("goodput", ">=", 0.95, "fraction"),
        ("output_throughput", ">=", 1000.0, "tok/s"),
        ("itl.p99", "<", 100.0, "ms"),
    }
    assert ruleset.describe()["min_duration_s"] == 120.0


def test_relative_paths_resolve_against_base_dir(tmp_path: Path) -> None:
    write(tmp_path, "targets: {ttft: {p50: 1s}}\n")
    assert load_ruleset("rules.yaml", base_dir=tmp_path).name == "rules"


@pytest.mark.parametrize(
    ("text", "key", "value"),
    [
        ("targets: {ttfx: {p99: 1s}}", "targets.ttfx", "ttfx"),
        ("targets: {ttft: {p100.5: 1s}}", "targets.ttft.p100.5", "p100.5"),
        ("targets: {ttft: {p99: 5 parsecs}}", "targets.ttft.p99", "parsecs"),
        ("targets: {ttft: {p99: 500}}", "targets.ttft.p99", "unit"),
        ("targets: {ttft: 500ms}", "targets.ttft", "500ms"),
        ("targets: {error_rate: {p99: 1%}}", "targets.error_rate", "p99"),
        ("targets: {error_rate: 1 tok/s}", "targets.error_rate", "tok/s"),
        ("targets: {ttft: {p99: [1, 2]}}", "targets.ttft.p99", "[1, 2]"),
        ("targets: [1, 2]", "targets", "[1, 2]"),
        ("slos: ['ttft.p99 < soon']", "slos[0]", "soon"),
        ("slos: 'ttft.p99 < 1s'", "slos", "ttft.p99 < 1s"),
        ("min_samples: -5\nslos: ['ttft.p50 < 1s']", "min_samples", "-5"),
        ("min_samples: lots\nslos: ['ttft.p50 < 1s']", "min_samples", "lots"),
        ("min_duration: forever\nslos: ['ttft.p50 < 1s']", "min_duration", "forever"),
        ("name: 7\nslos: ['ttft.p50 < 1s']", "name", "7"),
        ("slo: ['ttft.p50 < 1s']", "rules.yaml", "slo"),
        ("description: nothing to check", "rules.yaml", "targets"),
        ("- just\n- a list", "rules.yaml", "list"),
        ("targets: {ttft: {p99: 1s}\n", "rules.yaml", "YAML"),
    ],
)
def test_errors_name_the_file_the_key_and_the_bad_value(
    tmp_path: Path, text: str, key: str, value: str
) -> None:
    path = write(tmp_path, text)
    with pytest.raises(LlmPerfUsageError) as info:
        load_ruleset(str(path))
    message = str(info.value)
    assert str(path) in message
    assert key in message
    assert value in message


def test_unknown_name_lists_the_builtins() -> None:
    with pytest.raises(LlmPerfUsageError, match=r"mlperf-llama3\.1-8b-server"):
        load_ruleset("mlperf-llama9-server")
