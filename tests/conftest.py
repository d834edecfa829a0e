"""Modules loaded once for the whole test session, before any in-process pytester run.

pytester's ``runpytest`` (in-process) removes from ``sys.modules`` every module
first imported during the inner session. When that is part of httpx's stack
(httpcore's anyio backend, anyio's asyncio backend), the next import makes new
exception classes that httpx's own mapping does not know, and a plain
``ConnectError`` escapes unclassified: a test order artefact, not a bug of
the client. Importing them here keeps one copy for the session.

The started-server modules (``pytest_llmperf.managed_server``: psutil, the server, its
first-token request, the resource sampler, the watchdog's client ``guard``) are loaded
here too, for time: the plugin imports them lazily, when an inner session starts its
embedded simulator, so each inner session imported them again (~40 ms) and, with a
fresh ``guard``, started a watchdog process of its own (~100 ms of a core) where the
plugin's design is one per pytest process. Loaded once, every in-process session of a
test process shares that process's watchdog, as a real pytest process's runs do.

Property tests run without a wall-clock limit: hypothesis's default 200 ms deadline per
example and its "too slow" health check time the machine, and on a busy one (a ~180 ms
stall is ordinary) they fail correct code. A property test that must be fast says so in a
benchmark, not a deadline (tests/README.md, "The rule for timing assertions").

And no inner session of the suite appends its Markdown summary to the CI job's own step
summary (``$GITHUB_STEP_SUMMARY``): the variable is unset for every test.
"""

from collections.abc import Iterator

import anyio._backends._asyncio  # noqa: F401
import httpcore._backends.anyio  # noqa: F401
import httpx  # noqa: F401
import psutil  # noqa: F401
import pytest
from hypothesis import HealthCheck, settings

import pytest_llmperf.managed_server.first_token
import pytest_llmperf.managed_server.resources
import pytest_llmperf.managed_server.server  # noqa: F401  (and guard, process, readiness)

settings.register_profile(
    "llmperf-suite", deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.load_profile("llmperf-suite")


@pytest.fixture(autouse=True)
def _no_github_step_summary(monkeypatch: pytest.MonkeyPatch) -> None:
    """The suite's inner sessions never append to the CI job's own step summary
    (``$GITHUB_STEP_SUMMARY``, which every session that measured something appends to);
    a test that checks the appending sets it itself."""
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)


@pytest.fixture
def pytester(pytester: pytest.Pytester) -> Iterator[pytest.Pytester]:
    """pytest's own, with its inner sessions (in process or in a subprocess, xdist's
    included) run without hypothesis's pytest plugin: no inner test uses hypothesis, and
    in a new process that plugin imports all of hypothesis at the terminal summary (0.1 s
    of a core with pytest's rewritten-module cache, ~0.8 s without it, as under
    ``PYTHONDONTWRITEBYTECODE``), in each of the suite's ~50 inner pytest processes that
    print a summary. pytester clears ``PYTEST_ADDOPTS`` when it is made; it is set here
    after that, and pytester's own undo restores the outer value after this one's."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("PYTEST_ADDOPTS", "-p no:hypothesispytest")
        yield pytester
