"""One run's ``server_process`` block as the watch writes it (docs/reports.md), for the
tests that read one: the verdicts', the reports'."""

from __future__ import annotations

from typing import Any

BLOCK: dict[str, Any] = {
    "name": "vllm",
    "cmd": "vllm serve m --port 8123 --api-key ***",
    "pid": 1234,
    "log": "/tmp/llmperf-servers/vllm-1.log",
    "restart": "session",
    "startup": {"ready_s": 41.2, "first_token_s": 41.9},
    "resources": {
        "rss_start_mb": 812.0,
        "rss_end_mb": 820.5,
        "rss_max_mb": 830.1,
        "rss_growth_mb": 8.5,
        "cpu_s": 12.3,
        "cpu_ms_per_output_token": 1.9,
        "samples": 25,
        "gpu_mem_max_mb": None,
        "gpu_note": "no NVML (pip install pytest-llmperf[gpu])",
    },
    "exit": None,
}
