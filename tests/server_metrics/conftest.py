"""Server-metrics tests: real Prometheus pages (prom_pages.py) and the hardening tests'
misbehaving servers on 127.0.0.1 (tests/hardening/odd_servers.py)."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(0, str(Path(__file__).parents[1] / "hardening"))
