"""The pytest plugin: wires pytest's options, markers, fixtures and hooks to the library.

Nothing here measures or judges; it only moves data between pytest and
:mod:`pytest_llmperf`'s packages. This package is the ``pytest11`` entry point;
each job has a module:

- options and ini keys -> :class:`~pytest_llmperf.options.LlmPerfOptions`, the
  plugin object registered for the session: :mod:`.configure`
- markers -> :class:`~pytest_llmperf.specs.perf.PerfSpec` at collection (bad ones
  are usage errors that name the test and the bad word): :mod:`.markers`,
  :mod:`.collection`
- ``llm_endpoint`` / ``llm_endpoints`` / ``llm_inconclusive`` / ``llm_loadgen``
  fixtures -> the endpoint (simulator started on first use) and a
  :class:`~pytest_llmperf.methodology.llm_loadgen.LlmLoadgen`: :mod:`.fixtures`;
  the session's endpoints by spec, and the servers the gate starts for them
  (``--llm-server-cmd``, the simulator; :mod:`pytest_llmperf.managed_server`):
  :mod:`.endpoints`
- servers in pytest's terms: the ``llm_server`` marker's scopes, a session server
  that exited, xdist's one server started by the controller: :mod:`.servers`
  (a worker's view of it: :mod:`.shared_server`)
- after each test body: SLO verdicts fail the test itself, JUnit properties; the
  call report carries the runs, so the session data also forms under xdist:
  :mod:`.judging`
- session end: merged histograms, session ruleset, terminal summary, JSON, HTML,
  baseline, history: :mod:`.reports`
- the plugin object, one per session, joins those jobs over its state
  (:mod:`.base`): :mod:`.core`
- beside them: the live status line (:mod:`.live_progress`), SIGTERM as Ctrl-C
  (:mod:`.interrupts`), output paths checked before any load
  (:mod:`.output_paths`), pytest-asyncio's loop scope (:mod:`.asyncio_scope`).

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
from pytest_llmperf.plugin.core import PLUGIN_KEY, LlmPerfPlugin
from pytest_llmperf.plugin.fixtures import (
    llm_endpoint,
    llm_endpoints,
    llm_inconclusive,
    llm_loadgen,
)
from pytest_llmperf.plugin.markers import MARKERS, pytest_pycollect_makeitem

__all__ = [
    "MARKERS",
    "PLUGIN_KEY",
    "LlmPerfInconclusiveWarning",
    "LlmPerfPlugin",
    "LlmPerfTokenLengthWarning",
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
