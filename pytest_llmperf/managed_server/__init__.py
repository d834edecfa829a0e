"""The server under test, started, watched and stopped by the gate.

- :class:`ServerCommand` (:mod:`.command`): what to start (a command template with
  ``{port}``/``{host}``, its environment, working directory, readiness URL, deadlines,
  how long it lives: :class:`Restart`).
- :class:`ManagedServer` (:mod:`.server`): one started server: spawned in its own
  session with its log in a file (:mod:`.log_file`), ready when its readiness URL
  says so (:mod:`.readiness`), watched for its exit (:class:`ServerExit`,
  :mod:`.exits`, out-of-memory kills named where the system says so), stopped with
  its whole process tree (:mod:`.process`); the first token after spawn
  (:mod:`.first_token`).
- :class:`ResourceSampler` (:mod:`.resources`, :mod:`.gpu`): the tree's RSS, CPU and
  GPU memory over a run.
- The watchdog (:mod:`.guard`, :mod:`.watchdog`): one process per pytest process that
  ends the servers of an owner that died without ending them (SIGKILL included).

Secrets in a command line or environment are redacted wherever shown (:mod:`.secrets`).
It imports ``client/`` (only for the first-token request), ``errors`` and ``redaction``.

Each name is imported on first use (PEP 562 ``__getattr__``): the watchdog process
(``python -m pytest_llmperf.managed_server.watchdog``, started once per pytest process)
imports this package first and needs none of them (they cost it ~70 ms of its ~110 ms
start: http.client, the server, the command templates).
"""

from __future__ import annotations

from pytest_llmperf.lazy_names import lazy_names

# typing.TYPE_CHECKING without importing typing; mypy and pyright read it alike
TYPE_CHECKING = False
if TYPE_CHECKING:  # what type checkers and IDEs see; at run time __getattr__ loads these
    from pytest_llmperf.managed_server.command import Restart, ServerCommand
    from pytest_llmperf.managed_server.exits import ServerExit, ServerStartError
    from pytest_llmperf.managed_server.resources import ResourceSampler
    from pytest_llmperf.managed_server.server import ManagedServer

# public name -> the module that defines it (keep in step with the TYPE_CHECKING block)
_EXPORTS: dict[str, str] = {
    "ManagedServer": "pytest_llmperf.managed_server.server",
    "ResourceSampler": "pytest_llmperf.managed_server.resources",
    "Restart": "pytest_llmperf.managed_server.command",
    "ServerCommand": "pytest_llmperf.managed_server.command",
    "ServerExit": "pytest_llmperf.managed_server.exits",
    "ServerStartError": "pytest_llmperf.managed_server.exits",
}

__all__ = [
    "ManagedServer",
    "ResourceSampler",
    "Restart",
    "ServerCommand",
    "ServerExit",
    "ServerStartError",
]


__getattr__, __dir__ = lazy_names(__name__, _EXPORTS)
