"""What a system call costs on this machine, so a reader can place it among the others.

Issue 42: the same client measured 1.65-1.75x bare aiohttp per CPU-second on
one 2-core machine and 1.05x on another whose system calls cost about 2.5x
more. A client that reads once per token event pays one ``recv_into`` (and a
share of an ``epoll_wait``) per event, so where a system call is dear that is
what decides the ratio, not the Python. This prints, in ns per call (best of
``repeat`` batches, the Python loop's own cost included: every client pays it
the same way):

- ``recv_into``: a 300-byte message read from a loopback TCP connection with
  ``recv_into`` (the bytes already waiting; a 1,024-token stream's event is about
  300 bytes with its HTTP chunk framing): the call that matters, paid once per read;
- ``send``: a 300-byte ``send`` on that connection (the server's side of an event,
  and the client's per request);
- ``unix recv_into``: the same read on an ``AF_UNIX`` socketpair (no TCP stack);
- ``epoll.poll(0)``: on one ready socket (an event loop's turn when there is
  something to read);
- ``getppid``: the cheapest real system call (glibc caches nothing for it);
- ``stat``: ``os.stat`` of a fixed path (a system call with a path walk);
- ``pure-Python loop step``: an ``x += i`` loop iteration, no system call (the
  CPU's speed at Python, to tell a slow CPU from dear system calls).

    python benchmarks/syscall_cost.py [--repeat 7]

``loadgen_events.py`` and ``loadgen_throughput.py`` print :func:`line` first.
"""

from __future__ import annotations

import argparse
import os
import platform
import select
import socket
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass

__all__ = ["SyscallCost", "line", "measure"]

MESSAGE = 300  # bytes: about one token event of a 1,024-token stream, HTTP framing included
BATCH = 100  # messages a batch (30 KB: inside either socket's buffers, each message an skb)


@dataclass(frozen=True)
class SyscallCost:
    """ns per call (best batch), see the module's docstring for each."""

    py_ns: float
    getppid_ns: float
    stat_ns: float
    epoll_ns: float
    recv_into_ns: float
    send_ns: float
    unix_recv_into_ns: float

    def line(self) -> str:
        return (
            f"syscall cost (ns per call, best batch): recv_into 300 B (TCP loopback) "
            f"{self.recv_into_ns:.0f}, send 300 B {self.send_ns:.0f}, unix recv_into "
            f"{self.unix_recv_into_ns:.0f}, epoll.poll(0) {self.epoll_ns:.0f}, getppid "
            f"{self.getppid_ns:.0f}, stat {self.stat_ns:.0f}; pure-Python loop step "
            f"{self.py_ns:.0f}"
        )


def _best(fn: Callable[[], None], calls: int, repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter_ns()
        fn()
        best = min(best, (time.perf_counter_ns() - t0) / calls)
    return best


def _tcp_pair() -> tuple[socket.socket, socket.socket]:
    with socket.create_server(("127.0.0.1", 0)) as listener:
        a = socket.create_connection(listener.getsockname())
        b, _ = listener.accept()
    for s in (a, b):
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return a, b


def _reads(pair: tuple[socket.socket, socket.socket], repeat: int) -> tuple[float, float]:
    """(recv_into, send) ns per 300-byte message on a connected pair."""
    tx, rx = pair
    tx.setblocking(False)  # never wait for room: a full buffer fails loudly instead
    msg = b"x" * MESSAGE
    view = memoryview(bytearray(256 * 1024))
    send, recv_into = tx.send, rx.recv_into
    rng = range(BATCH)

    def sends() -> None:
        for _ in rng:
            send(msg)

    def reads() -> None:
        for _ in rng:
            recv_into(view, MESSAGE)

    best_send = best_recv = float("inf")
    for _ in range(repeat):
        best_send = min(best_send, _best(sends, BATCH, 1))
        # every byte sent in the receiver's queue first (loopback: at once, or nearly)
        deadline = time.monotonic() + 1.0
        while len(rx.recv(MESSAGE * BATCH, socket.MSG_PEEK)) < MESSAGE * BATCH:
            if time.monotonic() > deadline:
                break
        best_recv = min(best_recv, _best(reads, BATCH, 1))
    return best_recv, best_send


def measure(repeat: int = 5, calls: int = 20_000) -> SyscallCost:
    """Every figure of :class:`SyscallCost`, best of ``repeat`` batches (well under a second)."""
    rng = range(calls)
    few = range(calls // 4)
    getppid, stat, path = os.getppid, os.stat, sys.executable

    def py() -> None:
        x = 0
        for i in rng:
            x += i

    def getppids() -> None:
        for _ in rng:
            getppid()

    def stats() -> None:
        for _ in few:
            stat(path)

    tcp = _tcp_pair()
    unix = socket.socketpair()
    ep = select.epoll()
    try:
        recv_ns, send_ns = _reads(tcp, repeat)
        unix_recv_ns, _ = _reads(unix, repeat)
        tcp[0].send(b"!")  # one byte left waiting: the socket is ready for every poll
        ep.register(tcp[1].fileno(), select.EPOLLIN)
        poll = ep.poll

        def polls() -> None:
            for _ in few:
                poll(0)

        return SyscallCost(
            py_ns=_best(py, calls, repeat),
            getppid_ns=_best(getppids, calls, repeat),
            stat_ns=_best(stats, len(few), repeat),
            epoll_ns=_best(polls, len(few), repeat),
            recv_into_ns=recv_ns,
            send_ns=send_ns,
            unix_recv_into_ns=unix_recv_ns,
        )
    finally:
        ep.close()
        for s in (*tcp, *unix):
            s.close()


def line(repeat: int = 5) -> str:
    """One line for a benchmark's header."""
    return measure(repeat).line()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=7, help="batches of each; the best is kept")
    args = ap.parse_args()
    print(
        f"machine: {platform.machine()}, {os.cpu_count()} CPUs, Python "
        f"{platform.python_version()}, kernel {platform.release()}; load average "
        f"{' '.join(f'{x:.2f}' for x in os.getloadavg())}"
    )
    print(line(args.repeat))


if __name__ == "__main__":
    main()
