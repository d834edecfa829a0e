"""GPU tests: DCGM exporter pages (dcgm_pages.py) and a double of pynvml's functions
(nvml_double.py): no GPU is at hand where these tests run."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
