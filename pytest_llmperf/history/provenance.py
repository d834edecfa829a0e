"""Where and on what a session ran: its history tag and the machine.

The tag is ``--llm-history-tag`` when given; otherwise ``branch@commit`` from
the CI's variables (GitHub Actions ``GITHUB_REF_NAME``/``GITHUB_SHA``, GitLab
``CI_COMMIT_REF_NAME``/``CI_COMMIT_SHA``, Buildkite
``BUILDKITE_BRANCH``/``BUILDKITE_COMMIT``), else from ``git`` in the rootdir
(2 s timeout), else ``""``. Commits are shortened to 12 hex digits.
"""

from __future__ import annotations

import os
import platform
import socket
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

__all__ = ["git_tag", "machine_info", "session_tag"]

CI_VARIABLES = (  # (branch, commit)
    ("GITHUB_REF_NAME", "GITHUB_SHA"),
    ("CI_COMMIT_REF_NAME", "CI_COMMIT_SHA"),
    ("BUILDKITE_BRANCH", "BUILDKITE_COMMIT"),
)
GIT_TIMEOUT_S = 2.0


def _join(branch: str, commit: str) -> str:
    commit = commit.strip()[:12]
    branch = branch.strip()
    return f"{branch}@{commit}" if branch and commit else branch or commit


def session_tag(
    explicit: str | None,
    rootdir: str | os.PathLike[str] | None = None,
    env: Mapping[str, str] | None = None,
) -> str:
    """The session's tag: ``explicit``, the CI's branch@commit, git's, or ``""``."""
    if explicit and explicit.strip():
        return explicit.strip()
    env = os.environ if env is None else env
    for branch_var, commit_var in CI_VARIABLES:
        if env.get(commit_var) or env.get(branch_var):
            return _join(env.get(branch_var, ""), env.get(commit_var, ""))
    return git_tag(rootdir) if rootdir is not None else ""


def git_tag(rootdir: str | os.PathLike[str]) -> str:
    """``branch@commit`` of the checkout at ``rootdir`` (``HEAD`` when detached), or ``""``."""

    def git(*args: str) -> str:
        try:
            done = subprocess.run(
                ["git", *args],
                cwd=Path(rootdir),
                capture_output=True,
                text=True,
                timeout=GIT_TIMEOUT_S,
                check=False,
            )
        except (OSError, subprocess.SubprocessError):
            return ""
        return done.stdout.strip() if done.returncode == 0 else ""

    commit = git("rev-parse", "HEAD")
    if not commit:
        return ""
    return _join(git("rev-parse", "--abbrev-ref", "HEAD"), commit)


def machine_info() -> dict[str, Any]:
    """Hostname, platform, CPU count and Python of this machine."""
    return {
        "hostname": socket.gethostname(),
        "platform": platform.platform(),
        "machine": platform.machine(),
        "cpu_count": os.cpu_count(),
        "python": sys.version.split()[0],
        "implementation": platform.python_implementation(),
    }
