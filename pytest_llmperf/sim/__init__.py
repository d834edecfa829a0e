"""Embedded simulator of an OpenAI-compatible, continuously batching LLM server.

Real time: ``SimServer`` (in this event loop) or ``start_sim_process`` (a child
process, what the plugin uses). Virtual time: ``run_virtual`` (no sleeping).
See docs/simulator.md.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pytest_llmperf.lazy_names import lazy_names

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
    "SimProcess": "pytest_llmperf.sim.process",
    "SimStartError": "pytest_llmperf.sim.process",
    "start_sim_process": "pytest_llmperf.sim.process",
    "Profile": "pytest_llmperf.sim.profiles",
    "ProfileError": "pytest_llmperf.sim.profiles",
    "load_profile": "pytest_llmperf.sim.profiles",
    "profile_names": "pytest_llmperf.sim.profiles",
    "SimServer": "pytest_llmperf.sim.serving",
    "VirtualResult": "pytest_llmperf.sim.virtual",
    "run_virtual": "pytest_llmperf.sim.virtual",
}

__getattr__, __dir__ = lazy_names(__name__, _HOMES)
