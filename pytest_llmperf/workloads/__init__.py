"""Workloads: what requests to send (prompts, lengths, classes), seeded.

Importing this package registers the built-in workloads.
"""

from pytest_llmperf.workloads import conversation as _conversation  # noqa: F401  (registers)
from pytest_llmperf.workloads import long_context as _long_context  # noqa: F401  (registers)
from pytest_llmperf.workloads import shared_prefix as _shared_prefix  # noqa: F401  (registers)
from pytest_llmperf.workloads import skewed as _skewed  # noqa: F401  (registers)
from pytest_llmperf.workloads import synthetic as _synthetic  # noqa: F401  (registers)
from pytest_llmperf.workloads.base import (
    WORKLOADS,
    Sample,
    Workload,
    build_workload,
    register_workload,
    workload_names,
)

__all__ = [
    "WORKLOADS",
    "Sample",
    "Workload",
    "build_workload",
    "register_workload",
    "workload_names",
]
