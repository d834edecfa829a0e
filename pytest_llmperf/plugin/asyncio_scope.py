"""A quiet first run: pytest-asyncio's fixture loop scope, chosen for a suite that has not.

pytest-asyncio (>= 0.24) warns on every run whose configuration leaves
``asyncio_default_fixture_loop_scope`` unset, and a new user's bare suite with
async tests always does. pytest-llmperf's tests are async, so the warning
would be the first thing a user sees. The plugin sets the value its own
fixtures need, ``function`` (the default pytest-asyncio announces for its next
versions), before pytest-asyncio reads it, and only when the user has not set
it: an ini line or ``-o asyncio_default_fixture_loop_scope=...`` always wins.

pytest has no public setter for an ini value, so this writes pytest's ini
cache. Should a future pytest lose it, nothing is set and pytest-asyncio's own
warning (which names the ini line to add) shows again: the one-line fix is
also in the README.
"""

from __future__ import annotations

from typing import Any

__all__ = ["DEFAULT_FIXTURE_LOOP_SCOPE", "SCOPE_OPTION", "set_default_fixture_loop_scope"]

SCOPE_OPTION = "asyncio_default_fixture_loop_scope"
DEFAULT_FIXTURE_LOOP_SCOPE = "function"


def set_default_fixture_loop_scope(config: Any) -> bool:
    """Set ``asyncio_default_fixture_loop_scope = function`` on a pytest ``config`` whose
    user left it unset; True when it was set here. Without pytest-asyncio (``-p
    no:asyncio``) the option is unknown and nothing is done."""
    try:
        current = config.getini(SCOPE_OPTION)
    except ValueError:  # not registered: pytest-asyncio is not loaded
        return False
    if current:
        return False  # the user's choice, from an ini file or -o
    cache = getattr(config, "_inicache", None)
    if not isinstance(cache, dict):
        return False
    cache[SCOPE_OPTION] = DEFAULT_FIXTURE_LOOP_SCOPE
    return True
