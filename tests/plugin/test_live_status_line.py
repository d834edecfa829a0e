"""On a terminal: one status line, rewritten in place and erased, with pytest's output intact.

The inner session runs in a pseudo-terminal of 80 columns, so pytest's
terminal reporter sees a tty and ``--llm-progress=auto`` picks the status
line; the bytes it writes are checked: each update rewrites the line after a
carriage return, the end erases it and puts the cursor back after pytest's
``-v`` node id, where ``PASSED`` follows.
"""

from __future__ import annotations

import fcntl
import os
import pty
import re
import struct
import subprocess
import sys
import termios
import time

import pytest

TEST = """
import pytest

@pytest.mark.llm_workload("synthetic", input_tokens=16, output_tokens=4)
@pytest.mark.llm_load("poisson", rate=20, duration=3, seed=1)
async def test_poisson(llm_loadgen):
    await llm_loadgen.run()
"""


def run_in_terminal(args: list[str], cwd: str, columns: int = 80) -> str:
    """Run pytest with a pseudo-terminal of ``columns`` as its stdout; what it wrote."""
    leader, follower = pty.openpty()
    fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 30, columns, 0, 0))
    env = {**os.environ, "COLUMNS": str(columns), "TERM": "xterm"}
    env.pop("PYTEST_ADDOPTS", None)
    proc = subprocess.Popen(
        [sys.executable, "-m", "pytest", *args],
        cwd=cwd,
        stdin=subprocess.DEVNULL,
        stdout=follower,
        stderr=follower,
        env=env,
    )
    os.close(follower)
    out = bytearray()
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        try:
            chunk = os.read(leader, 65536)
        except OSError:  # EIO: the child closed the terminal
            break
        if not chunk:
            break
        out += chunk
    os.close(leader)
    proc.wait(timeout=30)
    return out.decode("utf-8", "replace")


def test_a_terminal_gets_one_status_line_erased_before_pytest_s_result(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile(test_live=TEST)
    out = run_in_terminal(["-v", "-p", "no:cacheprovider", "-p", "no:xdist"], str(pytester.path))
    assert "1 passed" in out, out
    updates = re.findall(r"\r([^\r\n]*req/s[^\r\n]*)\x1b\[K", out)
    assert len(updates) >= 2, repr(out)  # once a second over a 3 s run
    assert all(len(u) <= 77 and ("measure" in u or "drain" in u) for u in updates), updates
    node = "test_live.py::test_poisson "
    # the end: erase the line, go up to pytest's line and right past its node id, PASSED
    end = f"\r\x1b[2K\x1b[1A\x1b[{len(node)}C"
    assert out.count(end) == 1, repr(out)
    tail = out[out.index(end) + len(end) :]
    assert re.match(r"(\x1b\[[0-9;]*m)*PASSED", tail), repr(tail[:80])
    head = out[: out.index(updates[0])]
    assert head.endswith(node + "\r\n\r"), repr(head[-80:])  # the status sits on the next line
