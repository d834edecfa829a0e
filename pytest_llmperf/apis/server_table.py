"""The simulator's table of formats: each registered format's path and server half.

Read through here, never from :data:`~pytest_llmperf.apis.served.SERVED_HALVES`
directly: importing this module loads the registry, and with it every built-in
format's module, whose last lines register its server half. A format registered
later (:func:`~pytest_llmperf.apis.registry.register`) is served once its module
has called :func:`~pytest_llmperf.apis.served.serve` too.
"""

from __future__ import annotations

from collections.abc import Iterator

from pytest_llmperf.apis.registry import API_FORMATS
from pytest_llmperf.apis.served import SERVED_HALVES, ServedPooling, ServedTokens

__all__ = ["served_formats", "served_half"]


def served_half(name: str) -> ServedTokens | ServedPooling | None:
    """The server half of the format ``name`` (None: the simulator does not serve it)."""
    return SERVED_HALVES.get(name)


def served_formats() -> Iterator[tuple[str, str, ServedTokens | ServedPooling]]:
    """``(name, path, half)`` of each format the simulator serves, in the registry's
    order (``path`` under ``/v1``)."""
    for name, fmt in API_FORMATS.items():
        half = SERVED_HALVES.get(name)
        if half is not None:
            yield name, fmt.path, half
