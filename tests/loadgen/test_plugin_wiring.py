"""--llm-events and --llm-workers reach the load generator; the JSON says where the log is."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pytest_llmperf.results.event_log import analyse_event_log

TEST_FILE = """
import pytest

@pytest.mark.llm_workload("synthetic", input_tokens=8, output_tokens=4, requests=12)
@pytest.mark.llm_load("constant", rate=100, sample_order="with-replacement", seed=5)
async def test_run(llm_loadgen):
    result = await llm_loadgen.run()
    assert result.counts["completed"] == 12
"""


@pytest.mark.parametrize("workers", ["1", "2"])
def test_events_dir_and_workers_options(pytester: pytest.Pytester, workers: str) -> None:
    pytester.makepyfile(test_wired=TEST_FILE)
    result = pytester.runpytest(
        "--llm-events=events", "--llm-json=out.json", f"--llm-workers={workers}", "-q"
    )
    result.assert_outcomes(passed=1)
    report = json.loads((pytester.path / "out.json").read_text())
    [run] = report["tests"][0]["runs"]
    path = Path(run["events"])
    if not path.is_absolute():
        path = pytester.path / path
    assert path.parent.name == "events" and path.suffix == ".sqlite"
    assert "test_wired.py" in path.name
    assert run["self_check"]["workers"] == int(workers)
    assert run["workload"]["sample_order"] == {"mode": "with-replacement", "seed": 5, "pool": 12}
    assert analyse_event_log(path).counts() == run["counts"]
