"""The pytest plugin: wires pytest's options, markers, fixtures and hooks to the library.

Nothing here measures or judges; it only moves data between pytest and
:mod:`pytest_llmperf`'s packages. This package is the ``pytest11`` entry point;
each job has a module:

- the session's state, one plain object in ``config.stash[STATE_KEY]``
  (:class:`~pytest_llmperf.plugin.state.SessionState`): every module below takes it,
  none keeps state of its own: :mod:`.state`
- options and ini keys -> :class:`~pytest_llmperf.options.LlmPerfOptions`, the state
  built, the hook objects (one per job) registered over it: :mod:`.configure`
- markers -> :class:`~pytest_llmperf.specs.perf.PerfSpec` at collection (bad ones
  are usage errors that name the test and the bad word): :mod:`.markers`,
  :mod:`.collection`; a given server checked once before any test: :mod:`.preflight`
- ``llm_endpoint`` / ``llm_endpoints`` / ``llm_inconclusive`` / ``llm_loadgen``
  fixtures -> the endpoint (simulator started on first use) and a
  :class:`~pytest_llmperf.methodology.llm_loadgen.LlmLoadgen`: :mod:`.fixtures`;
  the endpoint under test and the A/B reference, started on first use:
  :mod:`.under_test`; the session's endpoints by spec, and the servers the gate
  starts for them (``--llm-server-cmd``, the simulator;
  :mod:`pytest_llmperf.managed_server`): :mod:`.endpoints` (with
  :mod:`.endpoint_spec`, :mod:`.endpoint_servers`, :mod:`.endpoint_facts`)
- servers in pytest's terms: the ``llm_server`` marker's scopes, a session server
  that exited, xdist's one server started by the controller: :mod:`.servers`
  (a worker's view of it: :mod:`.shared_server`)
- after each test body: SLO verdicts fail the test itself, JUnit properties; the
  call report carries the runs (:mod:`.payload`), so the session data also forms
  under xdist: :mod:`.judging` (greedy outputs matched first: :mod:`.output_matching`)
- why a session stops before load, recorded once: :mod:`.stops`; an interrupt,
  pytest's own stop, a lost xdist worker, SIGTERM as Ctrl-C: :mod:`.interrupts`
- the terminal header: :mod:`.header`; session end: session ruleset, JSON, HTML,
  Markdown, baseline: :mod:`.reports` (what they say of the session:
  :mod:`.session_info`; the history's trends and append: :mod:`.history`); the
  terminal summary: :mod:`.summary`
- beside them: the live status line (:mod:`.live_progress`), output paths checked
  before any load (:mod:`.output_paths`), pytest's JUnit writer
  (:mod:`.junit_xml`), pytest-asyncio's loop scope (:mod:`.asyncio_scope`).

The library's warnings (:class:`~pytest_llmperf.errors.LlmPerfInconclusiveWarning`,
:class:`~pytest_llmperf.errors.LlmPerfTokenLengthWarning`) live in
:mod:`pytest_llmperf.errors`; they are re-exported here for older imports.
"""

from __future__ import annotations

from pytest_llmperf.errors import LlmPerfInconclusiveWarning, LlmPerfTokenLengthWarning
from pytest_llmperf.plugin.configure import (
    pytest_addhooks,
    pytest_addoption,
    pytest_configure,
    pytest_load_initial_conftests,
    pytest_unconfigure,
)
from pytest_llmperf.plugin.fixtures import (
    llm_endpoint,
    llm_endpoints,
    llm_inconclusive,
    llm_loadgen,
)
from pytest_llmperf.plugin.markers import MARKERS, pytest_pycollect_makeitem
from pytest_llmperf.plugin.state import STATE_KEY, SessionState

__all__ = [
    "MARKERS",
    "STATE_KEY",
    "LlmPerfInconclusiveWarning",
    "LlmPerfTokenLengthWarning",
    "SessionState",
    "llm_endpoint",
    "llm_endpoints",
    "llm_inconclusive",
    "llm_loadgen",
    "pytest_addhooks",
    "pytest_addoption",
    "pytest_configure",
    "pytest_load_initial_conftests",
    "pytest_pycollect_makeitem",
    "pytest_unconfigure",
]
