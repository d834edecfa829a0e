"""Embedded simulator of an OpenAI-compatible, continuously batching LLM server.

Real time: ``SimServer`` (in this event loop) or ``start_sim_process`` (a child
process, what the plugin uses). Virtual time: ``run_virtual`` (no sleeping).
See docs/simulator.md.
"""

from __future__ import annotations

from .process import SimProcess, SimStartError, start_sim_process
from .profiles import Profile, ProfileError, load_profile, profile_names
from .server import SimServer
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
