"""The inside of one ``--llm-workers`` process: run this worker's share, send back the state.

Started by :class:`~pytest_llmperf.loadgen.scale_out.workers.WorkerPool` as ``python -m
pytest_llmperf.loadgen.scale_out.worker_process <in-fd> <out-fd>`` (so the caller's
script is never re-imported). The conversation over the two pipes: the
parent sends the run's payload, the worker builds its
:class:`~pytest_llmperf.loadgen.scale_out.worker_share.ShareRunner` (the same one a Ray
actor runs), says ``ready``, waits for ``go`` with the common ``t0``, runs its
share, and answers with its accumulator and issue statistics (or the error
that stopped it). A thread listens for ``stop`` / ``abort`` meanwhile.

A module of its own: the process entry point (``python -m``), kept apart from
the parent's side in ``workers.py``.
"""

from __future__ import annotations

import contextlib
import signal
import sys
import threading
from multiprocessing.connection import Connection

from pytest_llmperf.loadgen.scale_out.messages import WorkerMessage
from pytest_llmperf.loadgen.scale_out.worker_share import ShareRunner

__all__ = ["worker_main"]


def worker_main(inp: Connection, out: Connection) -> None:
    """Entry point of a worker process: build the run, wait for t0, run, send the state."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent decides when to stop
    try:
        runner = ShareRunner(inp.recv()[1])
        out.send((WorkerMessage.READY,))
        msg = inp.recv()
        if msg[0] != WorkerMessage.GO:
            return
        done = threading.Event()
        listener = threading.Thread(
            target=_listen, args=(inp, runner, done), name="llmperf-worker-control", daemon=True
        )
        listener.start()
        try:
            state = runner.run(msg[1])
        finally:
            done.set()
            listener.join()
        out.send((WorkerMessage.RESULT, state))
    except BaseException as exc:  # report, do not hang the parent
        with contextlib.suppress(OSError):
            out.send((WorkerMessage.ERROR, f"{type(exc).__name__}: {exc}"))
        raise
    finally:
        out.close()


def _listen(conn: Connection, runner: ShareRunner, done: threading.Event) -> None:
    """Pass the parent's ``stop`` / ``abort`` on to the run (and abort if the parent dies)."""
    while not done.is_set():
        try:
            if not conn.poll(0.1):
                continue
            msg = conn.recv()
        except (EOFError, OSError):
            # The parent is gone (even SIGKILL closes its end): stop now, no orphan.
            runner.abort()
            return
        if msg[0] == WorkerMessage.STOP:
            runner.stop()
        elif msg[0] == WorkerMessage.ABORT:
            runner.abort()


if __name__ == "__main__":
    worker_main(
        Connection(int(sys.argv[1]), writable=False), Connection(int(sys.argv[2]), readable=False)
    )
