"""The conversation SLOs' spelling (specs/slo.py): conversation.* and turns[<band>].*."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_llmperf.errors import LlmPerfUsageError
from pytest_llmperf.specs.rulesets import load_ruleset
from pytest_llmperf.specs.slo import parse_slo, request_limits


@pytest.mark.parametrize(
    ("expr", "metric", "stat", "target", "unit", "band"),
    [
        ("conversation.makespan_excl_tools.p90 < 60s", "conversation.makespan_excl_tools",
         "p90", 60_000.0, "ms", None),
        ("conversation.makespan.p99.9 <= 2000ms", "conversation.makespan", "p99.9", 2000.0,
         "ms", None),
        ("conversation.same_replica_rate > 90%", "conversation.same_replica_rate", None, 0.9,
         "fraction", None),
        ("conversation.tree_same_replica_rate >= 0.5", "conversation.tree_same_replica_rate",
         None, 0.5, "fraction", None),
        ("turns[11-20].ttft.p90 < 2s", "ttft", "p90", 2000.0, "ms", "11-20"),
        ("turns[1].e2e.mean < 500ms", "e2e", "mean", 500.0, "ms", "1"),
        ("turns[51+].tpot.p75 < 40ms", "tpot", "p75", 40.0, "ms", "51+"),
    ],
)  # fmt: skip
def test_parses(
    expr: str, metric: str, stat: str | None, target: float, unit: str, band: str | None
) -> None:
    slo = parse_slo(expr)
    assert (slo.metric, slo.stat, slo.unit, slo.turn_band) == (metric, stat, unit, band)
    assert slo.target == pytest.approx(target)
    assert slo.name == expr.split()[0].replace("<", "")  # one name, as written


@pytest.mark.parametrize(
    ("expr", "says"),
    [
        ("turns[7].ttft.p90 < 2s", "unknown turn band '7'; bands: 1, 2-5, 6-10, 11-20"),
        ("turns[1].itl.p90 < 2s", "'itl' has no turn-band form"),
        ("turns[1]ttft.p90 < 2s", "turns[<band>].<metric>.<stat>"),
        ("turns[1].ttft.p05 < 2s", "SLO 'turns[1].ttft.p05 < 2s': unknown statistic 'p05'"),
        ("turns[1].ttft.p90 < 2", "a unit is required"),
        ("ttft[11-20].p90 < 2s", "a band is written before the metric"),
        ("conversation.makespan < 60s", "needs a statistic, e.g. conversation.makespan.p90"),
        ("conversation.makespan.p90 < 60%", "bad unit '%' for a latency"),
        ("conversation.wait.p90 < 60s", "unknown conversation metric 'conversation.wait'"),
        ("conversation.same_replica_rate.p50 > 90%", "is a share and takes no statistic"),
        ("conversation.same_replica_rate > 90ms", "bad unit 'ms'"),
    ],
)
def test_bad_spellings_say_what_is_wrong(expr: str, says: str) -> None:
    with pytest.raises(LlmPerfUsageError) as info:
        parse_slo(expr)
    assert says in str(info.value)


def test_unknown_metric_lists_the_conversation_names() -> None:
    with pytest.raises(LlmPerfUsageError, match=r"conversation\.makespan_excl_tools"):
        parse_slo("makespan.p90 < 1s")


def test_a_turn_band_sets_no_per_request_goodput_limit() -> None:
    slos = [parse_slo("turns[11-20].ttft.p90 < 2s"), parse_slo("ttft.p99 < 5s")]
    assert request_limits(slos) == {"ttft": 5000.0}


def test_a_ruleset_names_conversation_targets(tmp_path: Path) -> None:
    path = tmp_path / "agents.yaml"
    path.write_text(
        "targets:\n"
        "  conversation.makespan_excl_tools: {p90: 60s}\n"
        "  conversation.same_replica_rate: 90%\n"
        "slos:\n"
        "  - 'turns[11-20].ttft.p90 < 2s'\n"
    )
    got = {(s.name, s.op, round(s.target, 9)) for s in load_ruleset(str(path)).slos}
    assert got == {
        ("conversation.makespan_excl_tools.p90", "<", 60_000.0),
        ("conversation.same_replica_rate", ">=", 0.9),
        ("turns[11-20].ttft.p90", "<", 2000.0),
    }
