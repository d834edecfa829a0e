"""Workloads: what requests to send (prompts, lengths, classes), seeded.

Importing this package registers the built-in workloads.
"""

from pytest_llmperf.workloads import conversation as _conversation  # noqa: F401  (registers)
from pytest_llmperf.workloads import long_context as _long_context  # noqa: F401  (registers)
from pytest_llmperf.workloads import shared_prefix as _shared_prefix  # noqa: F401  (registers)
from pytest_llmperf.workloads import skewed as _skewed  # noqa: F401  (registers)
from pytest_llmperf.workloads import synthetic as _synthetic  # noqa: F401  (registers)
from pytest_llmperf.workloads import traces as _traces  # noqa: F401  (registers)
from pytest_llmperf.workloads.base import (
    WORKLOADS,
    Sample,
    Workload,
    build_workload,
    register_workload,
    workload_names,
)
from pytest_llmperf.workloads.tokenizer import ApproximateTokenizer, Tokenizer, resolve_tokenizer

__all__ = [
    "WORKLOADS",
    "ApproximateTokenizer",
    "Sample",
    "Tokenizer",
    "Workload",
    "build_workload",
    "register_workload",
    "resolve_tokenizer",
    "workload_names",
]
