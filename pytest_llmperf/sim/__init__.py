"""Embedded simulator of an OpenAI-compatible, continuously batching LLM server.

Real time: ``SimServer`` (in this event loop) or ``start_sim_process`` (a child
process, what the plugin uses). Virtual time: ``run_virtual`` (no sleeping).
See docs/simulator.md.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # what type checkers see; at run time __getattr__ loads these
    from .process import SimProcess, SimStartError, start_sim_process
    from .profiles import Profile, ProfileError, load_profile, profile_names
    from .serving import SimServer
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

# Each name is loaded on first use: every pytest process reads the profile names (the
# option parser), which must not pull in the real-time server and aiohttp (~0.25 s of
# a core per process), nor virtual time's numpy.
_HOMES = {
    "SimProcess": "process",
    "SimStartError": "process",
    "start_sim_process": "process",
    "Profile": "profiles",
    "ProfileError": "profiles",
    "load_profile": "profiles",
    "profile_names": "profiles",
    "SimServer": "serving",
    "VirtualResult": "virtual",
    "run_virtual": "virtual",
}


def __getattr__(name: str) -> object:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{home}"), name)
