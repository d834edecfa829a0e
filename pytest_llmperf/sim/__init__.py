"""Embedded simulator of an OpenAI-compatible, continuously batching LLM server.

Real time: ``SimServer`` (in this event loop) or ``start_sim_process`` (a child
process, what the plugin uses). Virtual time: ``run_virtual`` (no sleeping).
See docs/simulator.md.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .process import SimProcess, SimStartError, start_sim_process
from .profiles import Profile, ProfileError, load_profile, profile_names
from .serving import SimServer

if TYPE_CHECKING:
    from .virtual import VirtualResult, run_virtual

__all__ = [
    "Profile",
    "ProfileError",
    "SimProcess",
    "SimServer",
    "SimStartError",
    "VirtualResult",
    "load_profile",
    "profile_names",
    "run_virtual",
    "start_sim_process",
]


def __getattr__(name: str) -> object:
    # Virtual time needs numpy; load it only when asked, so starting the real-time
    # server (once per plugin session) does not pay for it.
    if name in ("run_virtual", "VirtualResult"):
        from . import virtual

        return getattr(virtual, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
