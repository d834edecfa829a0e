import inspect
import itertools

import pytest

from pytest_llmperf.errors import LlmPerfUsageError
from pytest_llmperf.loadgen.generator import LoadGenerator
from pytest_llmperf.loadgen.plan.arrivals import arrival_offsets_ns
from pytest_llmperf.specs import PerfSpec, RunSpec
from pytest_llmperf.specs.load import LOAD_PATTERNS, LoadPattern, LoadSpec, SampleOrderMode
from pytest_llmperf.specs.run import LevelOverrides, RunOverrides, WarmUpOverrides


def spec(workload=(), wkw=None, load=(), lkw=None) -> RunSpec:
    return RunSpec.from_markers(workload, wkw, load, lkw)


def test_defaults_are_a_small_closed_loop_run() -> None:
    s = spec()
    assert s.workload_name == "synthetic" and s.requests == 100
    assert s.load == LoadSpec("concurrency", concurrency=4, seed=0)


def test_markers_combine_and_seed_flows_to_the_schedule() -> None:
    s = spec(("synthetic-uniform",), {"requests": 50, "seed": 7}, ("poisson",), {"rate": 20})
    assert s.requests == 50 and s.load.rate == 20 and s.load.seed == 7


@pytest.mark.parametrize(
    ("load", "lkw", "message"),
    [
        (("poison",), {"rate": 1}, "unknown load pattern 'poison'"),
        (("poisson",), {}, "needs rate="),
        (("poisson",), {"rate": 0}, "rate= > 0"),
        (("poisson",), {"rate": 5, "concurrency": 2}, "not concurrency="),
        (("concurrency",), {}, "needs concurrency="),
        (("concurrency",), {"concurrency": 0}, "concurrency must be an integer >= 1"),
        (("concurrency",), {"concurrency": 2, "rate": 3}, "not rate="),
        (("constant",), {"rate": 2, "burst": 3}, "does not take burst"),
        (("constant",), {"rate": 2, "duration": -1}, "duration must be"),
    ],
)
def test_bad_load_markers(load, lkw, message) -> None:
    with pytest.raises(LlmPerfUsageError, match=message):
        spec(load=load, lkw=lkw)


@pytest.mark.parametrize(
    ("wkw", "message"),
    [
        ({"requests": 0}, "requests must be"),
        ({"input_tokens": (5, 2)}, "min <= max"),
        ({"output_tokens": "many"}, "output_tokens must be"),
        ({"colour": "red"}, "colour"),
    ],
)
def test_bad_workload_markers(wkw, message) -> None:
    with pytest.raises(LlmPerfUsageError, match=message):
        spec(("synthetic",), wkw)


def test_unknown_workload_lists_the_known_ones() -> None:
    with pytest.raises(LlmPerfUsageError, match=r"unknown workload 'nope'.*synthetic"):
        spec(("nope",))


def test_overrides_switch_pattern_and_stop_rule() -> None:
    s = spec(("synthetic",), {"requests": 50}, ("poisson",), {"rate": 20})
    assert s.with_overrides({"rate": 40}).load.rate == 40
    closed = s.with_overrides({"pattern": "concurrency", "concurrency": 8})
    assert closed.load.concurrency == 8 and closed.load.rate is None
    timed = s.with_overrides({"duration": 5})
    assert (timed.requests, timed.duration) == (None, 5.0)
    with pytest.raises(LlmPerfUsageError, match="does not take colour"):
        s.with_overrides({"colour": 1})


def test_the_typed_overrides_are_what_run_and_with_overrides_take() -> None:
    keys = RunOverrides.__optional_keys__
    s = spec(("synthetic",), {"requests": 50}, ("poisson",), {"rate": 20})
    for key in keys:  # each is known to with_overrides (a bad value is another error)
        try:
            s.with_overrides({key: object()})
        except LlmPerfUsageError as exc:
            assert "does not take" not in str(exc), key
        except (TypeError, ValueError):
            pass
    run_keywords = set(inspect.signature(LoadGenerator.run).parameters) - {"self"}
    assert run_keywords == keys | {"gate", "label"}
    levels = {"pattern", "rate", "concurrency", "stages", "ramp"}
    assert LevelOverrides.__optional_keys__ == keys - levels
    assert WarmUpOverrides.__optional_keys__ == keys - {"requests", "duration"}


def test_closed_sets_are_str_enums_equal_to_their_names() -> None:
    load = LoadSpec("poisson", rate=5.0, sample_order="with-replacement")
    assert load.pattern is LoadPattern.POISSON and load.open_loop
    assert load.sample_order is SampleOrderMode.WITH_REPLACEMENT
    assert load.describe() == {
        "pattern": "poisson",
        "rate": 5.0,
        "seed": 0,
        "sample_order": "with-replacement",
    }
    assert all(type(v) is not LoadPattern for v in load.describe().values())
    assert LOAD_PATTERNS == ("poisson", "constant", "concurrency", "max-throughput", "trace")


def test_scale_multiplies_counts_and_durations() -> None:
    s = spec(wkw={"requests": 1000, "warmup": 10})
    assert s.scaled(0.1).requests == 100 and s.scaled(0.1).warmup == 1
    assert s.scaled(0.0001).requests == 1
    assert spec(lkw={"duration": 10}).scaled(0.5).duration == 5


def test_perf_spec_collects_slos_and_rulesets() -> None:
    p = PerfSpec.from_markers(
        None, None, [(("ttft.p50 < 1s",), {}), ((), {"ruleset": "mlperf-llama3.1-8b-server"})]
    )
    assert [s.expr for s in p.slos] == ["ttft.p50 < 1s", "ttft.p99 < 2000ms", "tpot.p99 < 100ms"]
    with pytest.raises(LlmPerfUsageError, match="takes ruleset"):
        PerfSpec.from_markers(None, None, [((), {"rulset": "x"})])
    with pytest.raises(LlmPerfUsageError, match="llm_slo declares no objective"):
        PerfSpec.from_markers(None, None, [((), {"per_model": True})])


def test_constant_schedule_is_exact_and_cumulative() -> None:
    offsets = arrival_offsets_ns(LoadSpec("constant", rate=3.0))
    got = [next(offsets) for _ in range(7)]
    assert got == [round(i * 1e9 / 3) for i in range(7)]


def test_poisson_schedule_is_seeded_and_has_the_planned_rate() -> None:
    def take(seed: int, n: int) -> list[int]:
        it = arrival_offsets_ns(LoadSpec("poisson", rate=100.0, seed=seed))
        return [next(it) for _ in range(n)]

    assert take(1, 50) == take(1, 50) and take(1, 50) != take(2, 50)
    offsets = take(3, 20_001)
    assert offsets[0] == 0 and all(b >= a for a, b in itertools.pairwise(offsets))
    assert 20_000 / (offsets[-1] / 1e9) == pytest.approx(100.0, rel=0.03)


def test_sample_order_survives_and_takes_overrides() -> None:
    s = spec(load=("poisson",), lkw={"rate": 5, "sample_order": "with-replacement"})
    assert s.with_overrides({"rate": 10}).load.sample_order == "with-replacement"
    assert s.with_overrides({"sample_order": "sequential"}).load.sample_order == "sequential"
    with pytest.raises(LlmPerfUsageError, match="unknown sample_order 'shuffled'"):
        s.with_overrides({"sample_order": "shuffled"})
