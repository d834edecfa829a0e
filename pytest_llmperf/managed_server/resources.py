"""ResourceSampler: a server's process tree sampled over a run (RSS, CPU, GPU memory).

A daemon thread reads the tree (the leader and its descendants, psutil) every
``interval_s`` from :meth:`~ResourceSampler.start` to :meth:`~ResourceSampler.stop`:
RSS summed over the tree, CPU (user + system) summed over every process seen (one
that exits between samples keeps its last reading), GPU memory of the tree's pids
where NVML answers. The pid need not be this process's child (an xdist worker
samples the controller's server): psutil reading it is enough.
"""

from __future__ import annotations

import contextlib
import threading
from typing import Any

import psutil

from pytest_llmperf.managed_server.gpu import gpu_memory_mb, gpu_note
from pytest_llmperf.managed_server.tree import tree_of

__all__ = ["ResourceSampler"]

_MB = 2**20


class ResourceSampler:
    """Samples the tree of ``server_pid`` every ``interval_s`` seconds (see the module)."""

    def __init__(self, server_pid: int, interval_s: float = 0.5) -> None:
        self.server_pid = server_pid
        self.interval_s = interval_s
        self._by_pid: dict[int, psutil.Process] = {}
        self._cpu_start: dict[tuple[int, float], float] = {}
        self._cpu_last: dict[tuple[int, float], float] = {}
        self._rss: list[int] = []
        self._gpu_max: float | None = None
        self._lock = threading.Lock()
        self._done = threading.Event()
        self._thread: threading.Thread | None = None
        self._first = True

    def start(self) -> ResourceSampler:
        """Take the first sample now and the rest in a daemon thread."""
        self._sample()
        self._thread = threading.Thread(
            target=self._loop, name=f"llmperf-resources-{self.server_pid}", daemon=True
        )
        self._thread.start()
        return self

    def _loop(self) -> None:
        while not self._done.wait(self.interval_s):
            self._sample()

    def _tree(self) -> list[psutil.Process]:
        """The leader and its descendants (psutil objects kept from one sample to the next:
        a pid reused by another process is a new object, found by its create time)."""
        tree: list[psutil.Process] = []
        for pid in [self.server_pid, *tree_of(self.server_pid)]:
            proc = self._by_pid.get(pid)
            if proc is None or not proc.is_running():
                try:
                    proc = self._by_pid[pid] = psutil.Process(pid)
                except (psutil.Error, OSError):
                    continue
            tree.append(proc)
        return tree

    def _sample(self) -> None:
        rss = 0
        alive = False
        pids: list[int] = []
        tree = self._tree()
        with self._lock:
            for proc in tree:
                try:
                    with proc.oneshot():
                        if proc.status() == psutil.STATUS_ZOMBIE:  # exited, not reaped: no
                            continue  # memory left to count (its RSS reads 0)
                        key = (proc.pid, proc.create_time())
                        memory = proc.memory_info().rss
                        times = proc.cpu_times()
                except (psutil.Error, OSError):
                    continue
                alive = True
                pids.append(proc.pid)
                rss += memory
                cpu = times.user + times.system
                if key not in self._cpu_last:
                    # there at the first sample: counts from here; born later: from zero
                    self._cpu_start[key] = cpu if self._first else 0.0
                self._cpu_last[key] = cpu
            if alive:
                self._rss.append(rss)
            self._first = False
        if pids:
            gpu = gpu_memory_mb(pids)
            if gpu is not None:
                with self._lock:
                    self._gpu_max = gpu if self._gpu_max is None else max(self._gpu_max, gpu)

    def stop(self, output_tokens: int) -> dict[str, Any]:
        """Take the last sample and stop; the run's ``resources`` block: rss_start_mb,
        rss_end_mb, rss_max_mb, rss_growth_mb, cpu_s, cpu_ms_per_output_token (None
        without output tokens), samples, gpu_mem_max_mb, gpu_note."""
        self._done.set()
        if self._thread is not None:
            with contextlib.suppress(RuntimeError):
                self._thread.join(max(5.0, 2 * self.interval_s))
        self._sample()
        with self._lock:
            rss = list(self._rss)
            cpu_s = sum(self._cpu_last[k] - self._cpu_start.get(k, 0.0) for k in self._cpu_last)
            gpu_max = self._gpu_max
        note = gpu_note()

        def mb(value: float | None) -> float | None:
            return None if value is None else round(value / _MB, 3)

        return {
            "rss_start_mb": mb(rss[0]) if rss else None,
            "rss_end_mb": mb(rss[-1]) if rss else None,
            "rss_max_mb": mb(max(rss)) if rss else None,
            "rss_growth_mb": mb(rss[-1] - rss[0]) if rss else None,
            "cpu_s": round(max(0.0, cpu_s), 6) if rss else None,
            "cpu_ms_per_output_token": (
                round(cpu_s * 1000 / output_tokens, 6) if rss and output_tokens > 0 else None
            ),
            "samples": len(rss),
            "gpu_mem_max_mb": None if gpu_max is None else round(gpu_max, 3),
            "gpu_note": note,
        }
