"""Shared helpers for the hardening tests: odd servers on 127.0.0.1 and one-request sends."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
