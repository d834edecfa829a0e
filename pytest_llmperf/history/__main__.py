"""``python -m pytest_llmperf.history PATH|URL list|show|trend|detect|export``."""

from __future__ import annotations

import sys

from pytest_llmperf.history.cli import main

if __name__ == "__main__":
    sys.exit(main())
