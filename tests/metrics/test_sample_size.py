from pytest_llmperf.metrics.sample_size import min_samples, supported_percentile


def test_minimum_samples_per_percentile() -> None:
    assert [min_samples(p) for p in (50, 90, 95, 99, 99.9)] == [20, 100, 200, 1000, 10000]
    assert min_samples(None) == min_samples(100) == 1


def test_supported_percentile_falls_back_to_what_the_count_supports() -> None:
    fallbacks = (90.0, 50.0)
    assert supported_percentile(5000, 99.0, fallbacks) == 99.0
    assert supported_percentile(999, 99.0, fallbacks) == 90.0
    assert supported_percentile(100, 99.0, fallbacks) == 90.0
    assert supported_percentile(99, 99.0, fallbacks) == 50.0
    assert supported_percentile(19, 99.0, fallbacks) is None
