"""Which API a test drives: the names, now kept with the formats in :mod:`pytest_llmperf.apis`.

Re-exported here, where the workloads, the SLO grammar and the plugin have imported
them from (a workload builds a sample's inputs for an API, the SLO grammar refuses
token-stream metrics on an API that streams no tokens). ``TOKEN_STREAM_APIS`` and
``IMAGE_APIS`` are derived from the registry (each format says whether it streams
tokens and takes images).
"""

from __future__ import annotations

from pytest_llmperf.apis.names import Api
from pytest_llmperf.apis.registry import IMAGE_APIS, TOKEN_STREAM_APIS, parse_api

__all__ = ["IMAGE_APIS", "TOKEN_STREAM_APIS", "Api", "parse_api"]
