"""``--llm-progress``: a running test's live progress, written through pytest's terminal reporter.

The library samples a running load on a timer
(:mod:`pytest_llmperf.loadgen.progress`) and formats what it saw
(:mod:`pytest_llmperf.reports.live`); this module only puts the text where
a pytest user looks, without disturbing pytest's own output:

- on a terminal (``auto``): one status line, rewritten every second with a
  carriage return and erased when the run ends. While pytest captures the
  test's output the cursor then goes back to where pytest left it (after
  ``test_x.py`` or the ``-v`` node id), so the dots and ``PASSED`` land
  exactly where they would have; with ``-s`` or live logging (output may
  come between two updates) the line is erased and pytest continues below it;
- elsewhere (a CI log, a file), or with ``--llm-progress=SECONDS``: a plain
  line every 10 s (or SECONDS), on a line of its own;
- nothing in an xdist worker (its output is not shown; the controller runs
  no load), nor with ``--llm-progress=off`` or without the terminal reporter.

During the test call pytest captures file descriptor 1, so every write is
made under ``capturemanager.global_and_fixture_disabled()``, as pytest's
own live logging does.
"""

from __future__ import annotations

import contextlib
import sys
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from pytest_llmperf.options import LlmPerfOptions
from pytest_llmperf.reports.live import plain_line, status_line
from pytest_llmperf.results.progress import ProgressSink, ProgressSnapshot

if TYPE_CHECKING:
    import pytest

__all__ = ["LogLines", "ServerLines", "StatusLine", "progress_sink", "server_progress"]

STATUS_EVERY_S = 1.0  # a terminal's status line is rewritten this often
_ERASE_TO_END = "\x1b[K"  # ANSI: erase from the cursor to the end of the line
_ERASE_LINE = "\x1b[2K"  # ANSI: erase the whole line (an echoed ^C included)


class _Output:
    """The terminal reporter's writer, reached past pytest's capture of the test's output."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.writer = config.get_terminal_writer()
        self.capman: Any = config.pluginmanager.get_plugin("capturemanager")

    @contextlib.contextmanager
    def uncaptured(self) -> Iterator[Any]:
        if self.capman is None:
            yield self.writer
            return
        with self.capman.global_and_fixture_disabled():
            yield self.writer

    def captures_output(self) -> bool:
        """True when nothing but pytest writes to the terminal while a test runs."""
        if self.capman is None or not self.capman.is_globally_capturing():
            return False  # -s / --capture=no: the test's prints go straight to the terminal
        return not self.config.getini("log_cli")  # live logs write between our updates


class StatusLine:
    """A terminal's one updating line (``auto`` on a terminal)."""

    every_s = STATUS_EVERY_S

    def __init__(self, config: pytest.Config, test: str) -> None:
        self.out = _Output(config)
        self.test = test
        self._shown = False  # a line is on screen
        self._column = 0  # where pytest's cursor was on its line before ours
        self._return = False  # put the cursor back there at the end

    def show(self, snapshot: ProgressSnapshot) -> None:
        with self.out.uncaptured() as tw:
            # two columns short of the width: an echoed ^C must not wrap the line
            line = status_line(snapshot, tw.fullwidth - 2, test=self.test)
            if not self._shown:
                self._column = tw.width_of_current_line
                # a line pytest filled or wrapped cannot be returned to exactly
                self._return = self.out.captures_output() and self._column < tw.fullwidth
                if self._return:
                    tw.write_raw("\n")  # untracked: pytest's idea of its line stays right
                elif self._column:
                    tw.line()
            tw.write_raw(f"\r{line}{_ERASE_TO_END}", flush=True)
            self._shown = True

    def end(self) -> None:
        if not self._shown:
            return
        with self.out.uncaptured() as tw:
            back = ""
            if self._return:  # up to pytest's line, then right to its column
                back = "\x1b[1A" + (f"\x1b[{self._column}C" if self._column else "")
            tw.write_raw(f"\r{_ERASE_LINE}{back}", flush=True)
        self._shown = False


class LogLines:
    """A plain line every ``every_s`` seconds (CI logs, files, ``--llm-progress=SECONDS``)."""

    def __init__(self, config: pytest.Config, test: str, every_s: float) -> None:
        self.out = _Output(config)
        self.test = test
        self.every_s = every_s

    def show(self, snapshot: ProgressSnapshot) -> None:
        with self.out.uncaptured() as tw:
            if tw.width_of_current_line:
                tw.line()  # after pytest's "test_x.py " or its -v node id
            tw.line(plain_line(snapshot, test=self.test))
            tw.flush()

    def end(self) -> None:
        """Nothing to take back: each line stands on its own."""


def progress_sink(config: pytest.Config, options: LlmPerfOptions, test: str) -> ProgressSink | None:
    """Where the live progress of ``test``'s runs goes, or None for none."""
    if options.progress_every_s is None or hasattr(config, "workerinput"):
        return None
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    if reporter is None:
        return None
    if options.progress_auto and bool(reporter.isatty):  # a bool before pytest 8.x
        return StatusLine(config, test)
    return LogLines(config, test, options.progress_every_s)


class ServerLines:
    """A starting server's readiness, as it waits (``--llm-server-cmd``, an ``llm_server``
    marker's server): on a terminal one status line rewritten in place and erased once
    the server is ready; elsewhere a plain line at most every ``every_s`` seconds. An
    xdist controller, whose terminal reporter is not yet there when it starts the
    session's server, writes plain lines to stderr."""

    def __init__(self, config: pytest.Config | None, every_s: float, in_place: bool) -> None:
        self.out = _Output(config) if config is not None else None
        self.every_s = every_s
        self.in_place = in_place and self.out is not None
        self._shown = False
        self._last = -float("inf")

    def show(self, line: str) -> None:
        if self.out is None:
            now = time.monotonic()
            if now - self._last >= self.every_s:
                self._last = now
                sys.stderr.write(f"llmperf: {line}\n")
                sys.stderr.flush()
            return
        with self.out.uncaptured() as tw:
            if self.in_place:
                if not self._shown and tw.width_of_current_line:
                    tw.line()
                text = f"llmperf: {line}"[: max(10, tw.fullwidth - 2)]
                tw.write_raw(f"\r{text}{_ERASE_TO_END}", flush=True)
                self._shown = True
                return
            now = time.monotonic()
            if now - self._last < self.every_s:
                return
            self._last = now
            if tw.width_of_current_line:
                tw.line()
            tw.line(f"llmperf: {line}")
            tw.flush()

    def end(self) -> None:
        if self._shown and self.out is not None:
            with self.out.uncaptured() as tw:
                tw.write_raw(f"\r{_ERASE_LINE}", flush=True)
        self._shown = False


def server_progress(config: pytest.Config, options: LlmPerfOptions) -> ServerLines | None:
    """Where a starting server's readiness goes (None: ``--llm-progress=off``, or an xdist
    worker, whose output is not shown)."""
    if options.progress_every_s is None or hasattr(config, "workerinput"):
        return None
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    if reporter is None:
        return ServerLines(None, options.progress_every_s, in_place=False)
    in_place = options.progress_auto and bool(reporter.isatty)
    return ServerLines(config, options.progress_every_s, in_place)
