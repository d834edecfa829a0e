"""Reading GPUs around and during one run, in a daemon thread: :class:`GpuSampler`.

``start()`` takes one read (so the run has a reading at its start) and starts the
thread, which reads every ``interval_s`` (10 Hz by default) on an absolute schedule (a
slow read is not caught up in a burst); ``stop()`` ends the thread and takes the last
read. The run's event loop never waits for a read (the plugin calls :meth:`astart` and
:meth:`astop`, which wait in a worker thread), and a read that fails is counted with its
reason, never raised: GPU figures explain a run, they never fail or slow it. The
thread's own CPU time is kept (:attr:`GpuRecording.cpu_s`): what the sampling costs.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from pytest_llmperf.gpu.readings import GpuTick

__all__ = ["DEFAULT_INTERVAL_S", "GpuRecording", "GpuSampler"]

DEFAULT_INTERVAL_S = 0.1  # 10 Hz: NVML's power reading itself is averaged over ~0.1-1 s


@dataclass
class GpuRecording:
    """One run's reads: ``ticks`` in time order, ``failures`` (how many reads raised) and
    the first ``failure``'s reason, the thread's ``cpu_s``, the interval asked for."""

    ticks: list[GpuTick] = field(default_factory=list)
    interval_s: float = DEFAULT_INTERVAL_S
    failures: int = 0
    failure: str | None = None
    cpu_s: float = 0.0
    started_ns: int = 0
    stopped_ns: int = 0

    @property
    def cpu_s_per_read(self) -> float | None:
        """The thread's CPU time per read (None: no read in the thread)."""
        reads = len(self.ticks) + self.failures - 2  # start() and stop() read outside it
        return self.cpu_s / reads if reads > 0 else None


class GpuSampler:
    """Calls ``read`` at ``start()``, every ``interval_s`` until ``stop()``, and at
    ``stop()`` (module docstring). Runs once."""

    def __init__(
        self, read: Callable[[], GpuTick], *, interval_s: float = DEFAULT_INTERVAL_S
    ) -> None:
        self.read = read
        self.recording = GpuRecording(interval_s=interval_s)
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        if self._thread is not None:
            raise RuntimeError("a GpuSampler runs once")
        self.recording.started_ns = time.monotonic_ns()
        self._take()
        self._thread = threading.Thread(target=self._run, name="llmperf-gpu", daemon=True)
        self._thread.start()

    def stop(self) -> GpuRecording:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(5.0)
        self._take()
        self.recording.stopped_ns = time.monotonic_ns()
        with self._lock:
            return self.recording

    async def astart(self) -> None:
        await asyncio.to_thread(self.start)

    async def astop(self) -> GpuRecording:
        return await asyncio.to_thread(self.stop)

    def _run(self) -> None:
        cpu0 = time.thread_time()
        interval = self.recording.interval_s
        due = time.monotonic() + interval
        try:
            while not self._stop.wait(max(0.0, due - time.monotonic())):
                self._take()
                due += interval
                if due <= time.monotonic():
                    due = time.monotonic() + interval  # a slow read: no burst to catch up
        finally:
            with self._lock:
                self.recording.cpu_s = time.thread_time() - cpu0

    def _take(self) -> None:
        try:
            tick = self.read()
        except Exception as exc:  # the sampler must never be why a run fails
            with self._lock:
                self.recording.failures += 1
                self.recording.failure = self.recording.failure or repr(exc)[:200]
            return
        with self._lock:
            self.recording.ticks.append(tick)
