"""Workloads: what requests to send (prompts, lengths, classes), seeded.

Importing this package registers the built-in workloads. Every workload also
takes ``structured=, tools=, tool_choice=, adapters=, greedy=`` (the request
paths its samples take, :mod:`.request_paths`).
"""

from pytest_llmperf.workloads import conversation as _conversation  # noqa: F401  (registers)
from pytest_llmperf.workloads import long_context as _long_context  # noqa: F401  (registers)
from pytest_llmperf.workloads import shared_prefix as _shared_prefix  # noqa: F401  (registers)
from pytest_llmperf.workloads import skewed as _skewed  # noqa: F401  (registers)
from pytest_llmperf.workloads import synthetic as _synthetic  # noqa: F401  (registers)
from pytest_llmperf.workloads import traces as _traces  # noqa: F401  (registers)
from pytest_llmperf.workloads.adapters import AdapterMix, parse_adapters
from pytest_llmperf.workloads.agentic import synthetic as _agentic  # noqa: F401  (registers)
from pytest_llmperf.workloads.base import (
    REQUEST_PATH_PARAMS,
    WORKLOADS,
    Sample,
    Workload,
    build_workload,
    register_workload,
    workload_names,
)
from pytest_llmperf.workloads.output_contract import (
    SAMPLE_TOOLS,
    OutputContract,
    ToolChoiceMode,
    parse_output_contract,
)
from pytest_llmperf.workloads.request_paths import RequestPathsWorkload
from pytest_llmperf.workloads.tokenizer import ApproximateTokenizer, Tokenizer, resolve_tokenizer

__all__ = [
    "REQUEST_PATH_PARAMS",
    "SAMPLE_TOOLS",
    "WORKLOADS",
    "AdapterMix",
    "ApproximateTokenizer",
    "OutputContract",
    "RequestPathsWorkload",
    "Sample",
    "Tokenizer",
    "ToolChoiceMode",
    "Workload",
    "build_workload",
    "parse_adapters",
    "parse_output_contract",
    "register_workload",
    "resolve_tokenizer",
    "workload_names",
]
