"""Scraping the server's ``/metrics`` around and during one run, off the request path.

:class:`ServerMetricsSampler` runs in a daemon thread of its own: it takes a
scrape when the run starts (:meth:`~ServerMetricsSampler.start` waits for it,
at most :data:`START_WAIT_S`, and carries on without it), one every
``interval_s`` while the run lasts, and one when it ends
(:meth:`~ServerMetricsSampler.stop`). Each scrape is one bounded call of the
metadata client (its own event loop in its own thread, so the run's event
loop is never touched, never waits and never runs a parse), and a scrape
that fails, times out, answers 404 or garbage is recorded with its reason and
the sampling goes on: server metrics explain a run, they never fail or slow it.

The :class:`ServerMetricsRecording` that ``stop()`` returns summarises any
window of the run (:meth:`~ServerMetricsRecording.summary`): the whole run, or
one stage of it, whose boundaries are the last scrape at or before the stage's
start and the first at or after its end (so a stage's counters may include up
to one interval of its neighbours).
"""

from __future__ import annotations

import asyncio
import threading
import time
from dataclasses import dataclass, field

from pytest_llmperf.client.blocking_metadata import BlockingMetadataClient
from pytest_llmperf.client.endpoint import Endpoint, redact_url
from pytest_llmperf.server_metrics.exposition import Scrape, ScrapeFailure
from pytest_llmperf.server_metrics.families import MAPPINGS, family_of, metric_names
from pytest_llmperf.server_metrics.source import (
    SCRAPE_LIMIT_S,
    ServerMetricsSource,
    metrics_client,
    scrape_once,
)
from pytest_llmperf.server_metrics.summarise import summarise_window
from pytest_llmperf.server_metrics.summary import ServerFamily, ServerMetrics

__all__ = [
    "START_WAIT_S",
    "STOP_WAIT_S",
    "Attempt",
    "ServerMetricsRecording",
    "ServerMetricsSampler",
]

START_WAIT_S = 2.0  # start() waits this long for the run's first scrape, then goes on without
STOP_WAIT_S = 2 * SCRAPE_LIMIT_S + 5.0  # stop(): a scrape in flight, the last one, a margin
_HUNG_SHARE = 0.9  # a failure this close to the scrape's limit was a page that did not answer


@dataclass(frozen=True, slots=True)
class Attempt:
    """One scrape: ``role`` ``"start"``, ``"sample"`` or ``"end"``; when it ended
    (``at_ns``, monotonic); its :class:`Scrape` or why there is none."""

    role: str
    at_ns: int
    scrape: Scrape | None = None
    failure: str | None = None


@dataclass
class ServerMetricsRecording:
    """Every scrape of one run, in time order, and what made the run's summary.

    ``started_ns``/``stopped_ns``: when ``start()`` and ``stop()`` were called.
    """

    source: ServerMetricsSource
    attempts: list[Attempt] = field(default_factory=list)
    started_ns: int = 0
    stopped_ns: int = 0

    @property
    def scrapes(self) -> list[Scrape]:
        return [a.scrape for a in self.attempts if a.scrape is not None]

    @property
    def failures(self) -> list[Attempt]:
        return [a for a in self.attempts if a.failure is not None]

    @property
    def family(self) -> ServerFamily:
        """The probe's family, else the one the scrapes show."""
        if self.source.family is not ServerFamily.UNKNOWN:
            return self.source.family
        for scrape in self.scrapes:
            found = family_of(scrape)
            if found is not ServerFamily.UNKNOWN:
                return found
        return ServerFamily.UNKNOWN

    def summary(self, t0_ns: int, window_ns: tuple[int, int] | None = None) -> ServerMetrics:
        """The server's metrics over the run (``window_ns`` None) or a window of it.

        The whole run: counters and latencies are the end scrape minus the start
        scrape, gauges the samples taken between them. A window ``(start_ns,
        end_ns)`` (monotonic ns, e.g. a stage): the last scrape at or before its
        start and the first at or after its end, gauges from the samples inside
        it. Gauge series are in seconds since ``t0_ns`` (the run's start).
        ``missing`` is the first failure's reason when the window lacks a
        boundary scrape (a failed sample between good boundaries is a note).
        """
        url = redact_url(self.source.url)
        first_failure = self.failures[0].failure if self.failures else None
        if window_ns is None:
            start = self._role("start")
            end = self._role("end")
            lo, hi = self.started_ns, self.stopped_ns or time.monotonic_ns()
            # a sample in flight when stop() was called ends after the run: not one of its
            inside = [
                a.scrape for a in self.attempts if a.role == "sample" and a.scrape and a.at_ns <= hi
            ]
        else:
            lo, hi = window_ns
            good = self.scrapes
            start = next((s for s in reversed(good) if s.at_ns <= lo), None)
            end = next((s for s in good if s.at_ns >= hi), None)
            inside = [s for s in good if lo <= s.at_ns <= hi]
        missing = None
        if start is None or end is None:
            which = "at or before its start" if start is None else "at or after its end"
            missing = first_failure or f"no scrape of {url} {which}"
        notes = []
        failed = [a for a in self.failures if lo <= a.at_ns <= hi or a.role != "sample"]
        if failed and missing is None:
            notes.append(
                f"{len(failed)} of {len(self.attempts)} scrapes failed (first: {failed[0].failure})"
            )
        return summarise_window(
            url, self.family, start, end, inside, t0_ns, missing=missing, notes=notes
        )

    def _role(self, role: str) -> Scrape | None:
        return next((a.scrape for a in self.attempts if a.role == role and a.scrape), None)


class ServerMetricsSampler:
    """Samples ``source`` around and during one run: ``start()``, the run, ``stop()``.

    ``endpoint`` gives the calls' limits and (for its own origin only) its
    credentials. Each scrape ends within ``scrape_limit_s``. ``start()`` and
    ``stop()`` block the calling thread (briefly: at most :data:`START_WAIT_S`,
    :data:`STOP_WAIT_S`); from a coroutine use :meth:`astart` / :meth:`astop`,
    which wait in a worker thread. A sampler runs once.
    """

    def __init__(
        self,
        endpoint: Endpoint,
        source: ServerMetricsSource,
        *,
        scrape_limit_s: float = SCRAPE_LIMIT_S,
    ) -> None:
        self.endpoint = endpoint
        self.source = source
        self.scrape_limit_s = scrape_limit_s
        self.recording = ServerMetricsRecording(source)
        self._keep = metric_names(source.family) if source.family in _KNOWN else None
        self._lock = threading.Lock()
        self._first = threading.Event()
        self._stop = threading.Event()
        self._done = threading.Event()
        self._thread: threading.Thread | None = None

    # -- the caller's side ---------------------------------------------------------

    def start(self) -> None:
        """Start sampling: waits for the first scrape (at most :data:`START_WAIT_S`)."""
        if self._thread is not None:
            raise RuntimeError("a ServerMetricsSampler runs once")
        self.recording.started_ns = time.monotonic_ns()
        self._thread = threading.Thread(
            target=self._run, name="llmperf-server-metrics", daemon=True
        )
        self._thread.start()
        self._first.wait(START_WAIT_S)

    def stop(self) -> ServerMetricsRecording:
        """Take the last scrape, stop the thread, and return the recording.

        Waits for a scrape in flight, then takes the end scrape (each within
        the scrape limit): at most :data:`STOP_WAIT_S`. A page that just failed
        to answer in time is not asked again (its reason is already recorded).
        """
        self.recording.stopped_ns = time.monotonic_ns()
        self._stop.set()
        if self._thread is not None:
            self._done.wait(STOP_WAIT_S)
        with self._lock:
            return ServerMetricsRecording(
                self.source,
                list(self.recording.attempts),
                self.recording.started_ns,
                self.recording.stopped_ns,
            )

    async def astart(self) -> None:
        """:meth:`start` from a coroutine (waits in a worker thread, not in the loop)."""
        await asyncio.to_thread(self.start)

    async def astop(self) -> ServerMetricsRecording:
        """:meth:`stop` from a coroutine (waits in a worker thread, not in the loop)."""
        return await asyncio.to_thread(self.stop)

    # -- the sampling thread --------------------------------------------------------

    def _run(self) -> None:
        try:
            with metrics_client(self.endpoint, self.source.url, self.scrape_limit_s) as client:
                hung = self._take(client, "start")
                self._first.set()
                interval = self.source.interval_s
                due = time.monotonic() + interval
                while not self._stop.wait(max(0.0, due - time.monotonic())):
                    hung = self._take(client, "sample")
                    due += interval
                    if due <= time.monotonic():
                        due = time.monotonic() + interval  # a slow page: no burst to catch up
                if not hung:  # a page that just did not answer in time is not asked again
                    self._take(client, "end")
        except Exception as exc:  # the sampler must never be why a run fails
            self._add(Attempt("end", time.monotonic_ns(), failure=f"sampler failed: {exc!r}"))
        finally:
            self._first.set()
            self._done.set()

    def _take(self, client: BlockingMetadataClient, role: str) -> bool:
        """One scrape, parsed here (this thread), recorded; True when it failed for lack of
        an answer in time."""
        began = time.monotonic()
        got = scrape_once(client, self.source.url, keep=self._keep)
        if isinstance(got, ScrapeFailure):
            self._add(Attempt(role, time.monotonic_ns(), failure=got.reason))
            return time.monotonic() - began >= _HUNG_SHARE * self.scrape_limit_s
        if self._keep is None:
            found = family_of(got)
            if found in _KNOWN:  # keep only what the mapping reads, from now on
                self._keep = metric_names(found)
                got = got.only(self._keep)
        self._add(Attempt(role, got.at_ns, got))
        return False

    def _add(self, attempt: Attempt) -> None:
        with self._lock:
            self.recording.attempts.append(attempt)


_KNOWN = frozenset(MAPPINGS)  # the families whose mapping says which metrics to keep
