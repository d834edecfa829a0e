"""The inside of one ``--llm-workers`` process: run this worker's share, send back the state.

Started by :class:`~pytest_llmperf.loadgen.workers.WorkerPool` as ``python -m
pytest_llmperf.loadgen.worker_process <in-fd> <out-fd>`` (so the caller's
script is never re-imported). The conversation over the two pipes: the
parent sends the run's payload, the worker builds its
:class:`~pytest_llmperf.loadgen.session.LoadRun` and loads its workload, says
``ready``, waits for ``go`` with the common ``t0``, runs its
:class:`~pytest_llmperf.loadgen.plan.ScheduleShare`, and answers with its
accumulator and issue statistics (or the error that stopped it).

A module of its own because it is the one place that needs both sides: it
runs a ``LoadRun``, whose parent side imports the pool; keeping the process
entry point out of ``workers.py`` keeps ``session -> workers`` one-way.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import sys
import threading
from multiprocessing.connection import Connection

from pytest_llmperf.loadgen.plan import ScheduleShare
from pytest_llmperf.loadgen.result import RunResult, StopReason
from pytest_llmperf.loadgen.session import LoadRun
from pytest_llmperf.specs.run import RunSpec

__all__ = ["worker_main"]


def worker_main(inp: Connection, out: Connection) -> None:
    """Entry point of a worker process: build the run, wait for t0, run, send the state."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent decides when to stop
    try:
        payload = inp.recv()[1]
        spec = RunSpec(**payload["spec"])
        run = LoadRun(
            payload["endpoint"],
            spec,
            request_limits_ms=payload["request_limits_ms"],
            label=payload["label"],
            events_path=payload["events_path"],
            handle_sigint=False,
        )
        spec.workload.sample(0)
        out.send(("ready",))
        msg = inp.recv()
        if msg[0] != "go":
            return
        run.share = ScheduleShare(
            payload["index"],
            payload["count"],
            msg[1],
            payload["concurrency"],
            payload.get("stage_concurrency"),
        )
        result = asyncio.run(_run_in_worker(run, inp))
        out.send(
            (
                "result",
                {
                    "accumulator": result.accumulator.to_state(),
                    "stats": run.stats.to_state(),
                    "stop_reason": result.stop_reason,
                },
            )
        )
    except BaseException as exc:  # report, do not hang the parent
        with contextlib.suppress(OSError):
            out.send(("error", f"{type(exc).__name__}: {exc}"))
        raise
    finally:
        out.close()


async def _run_in_worker(run: LoadRun, conn: Connection) -> RunResult:
    """Run while a thread listens for the parent's ``stop`` / ``abort`` (or its death)."""
    loop = asyncio.get_running_loop()
    done = threading.Event()

    def listen() -> None:
        while not done.is_set():
            try:
                if not conn.poll(0.1):
                    continue
                msg = conn.recv()
            except (EOFError, OSError):
                # The parent is gone (even SIGKILL closes its end): stop now, no orphan.
                with contextlib.suppress(RuntimeError):  # the loop may have just closed
                    loop.call_soon_threadsafe(run.abort)
                return
            if msg[0] == "stop":
                loop.call_soon_threadsafe(run.stop, StopReason.STOPPED)
            elif msg[0] == "abort":
                loop.call_soon_threadsafe(run.abort)

    listener = threading.Thread(target=listen, name="llmperf-worker-control", daemon=True)
    listener.start()
    try:
        return await run.execute()
    finally:
        done.set()
        listener.join()


if __name__ == "__main__":
    worker_main(
        Connection(int(sys.argv[1]), writable=False), Connection(int(sys.argv[2]), readable=False)
    )
