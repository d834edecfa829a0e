"""The plugin object: the session's state and its jobs joined into one pytest plugin."""

from __future__ import annotations

import pytest

from pytest_llmperf.plugin.collection import CollectionPart
from pytest_llmperf.plugin.judging import JudgingPart
from pytest_llmperf.plugin.reports import ReportsPart
from pytest_llmperf.plugin.servers import ServersPart


class LlmPerfPlugin(ServersPart, CollectionPart, JudgingPart, ReportsPart):
    """Session state: options, the endpoints, collected results (one object, registered as
    ``llmperf-session``; each job is a part: started servers, collection, judging,
    reports)."""


PLUGIN_KEY = pytest.StashKey[LlmPerfPlugin]()
