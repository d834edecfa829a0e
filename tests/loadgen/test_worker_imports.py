"""A worker process or Ray actor imports only what a worker runs.

Each ``--llm-workers`` process starts as ``python -m`` its entry module, and each
Ray actor unpickles its shell class (which loads the actor's module by name): a
fresh interpreter that imports that module and nothing else. It must not load
the parent's side with it (the generator, the run, the dispatcher, the pools:
their imports, and the plugin, verdicts and reports above them), which an eager
``loadgen/__init__`` or an import reaching up would bring in. Checked in a
subprocess, so this test process's own imports do not count.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

LOADGEN = "pytest_llmperf.loadgen"

# the parent's side of a run, and every layer above the load generator
NOT_IN_A_WORKER = (
    f"{LOADGEN}.generator",
    f"{LOADGEN}.run",
    f"{LOADGEN}.scale_out.dispatcher",
    f"{LOADGEN}.scale_out.workers",
    f"{LOADGEN}.scale_out.ray_workers",
    f"{LOADGEN}.progress",
    f"{LOADGEN}.self_check",
    f"{LOADGEN}.server_watch",
    "pytest_llmperf.plugin",
    "pytest_llmperf.slo",
    "pytest_llmperf.reports",
    "pytest_llmperf.methodology",
    "pytest_llmperf.analysis",
    "pytest_llmperf.history",
)

# What each kind of worker imports when it starts (the Ray actor: its shell, which Ray
# unpickles by reference, then the module the shell loads by name; neither needs Ray
# until the actor asks where it runs).
ENTRIES = {
    "worker_process": [f"{LOADGEN}.scale_out.worker_process"],
    "ray_actor": [f"{LOADGEN}.scale_out.ray_shell", f"{LOADGEN}.scale_out.ray_actor"],
}


def loaded_by(modules: list[str]) -> set[str]:
    """The ``pytest_llmperf`` modules a fresh interpreter holds after importing ``modules``."""
    code = (
        "import importlib, json, sys\n"
        f"for name in {modules!r}:\n"
        "    importlib.import_module(name)\n"
        "print(json.dumps(sorted(m for m in sys.modules if m.startswith('pytest_llmperf'))))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    return set(json.loads(out.stdout))


@pytest.mark.parametrize("kind", sorted(ENTRIES))
def test_a_worker_loads_no_parent_side_and_nothing_above_the_generator(kind: str) -> None:
    loaded = loaded_by(ENTRIES[kind])
    assert set(ENTRIES[kind]) <= loaded
    assert f"{LOADGEN}.issue.local" in loaded  # it does load what it runs
    unwanted = sorted(
        m for m in loaded for bad in NOT_IN_A_WORKER if m == bad or m.startswith(bad + ".")
    )
    assert not unwanted, f"a {kind} loads the parent's side: {unwanted}"


def test_the_package_front_doors_stay_lazy() -> None:
    """``import pytest_llmperf.loadgen`` alone loads none of the generator: its names are
    imported on first use (``lazy_names``, the leaf that does it), as the package's own
    front door does."""
    loaded = loaded_by([LOADGEN])
    assert loaded == {"pytest_llmperf", "pytest_llmperf.lazy_names", LOADGEN}, sorted(loaded)
