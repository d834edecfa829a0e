"""Reset the server's prefix cache before a gated run (``--llm-reset-cache=auto``).

A prefix cache warmed by the previous run (or by warm-up) makes the next run's
TTFT a different measurement: its shared prefixes are served from the cache
instead of being prefilled. Servers that offer a reset (read from their sources):

- **vLLM** ``POST /reset_prefix_cache`` (``vllm/entrypoints/serve/dev/cache/api_router.py``),
  mounted only in development mode (``VLLM_SERVER_DEV_MODE=1``,
  ``entrypoints/launchers/api_server/routers.py``); elsewhere a 404. It answers
  ``200 {"success": bool}``: ``false`` while KV blocks are still held (running
  requests, in-flight KV transfers; the block pool refuses to drop hashes of
  used blocks). Query parameters ``reset_running_requests=true`` (preempt every
  running request first) and ``reset_external=true`` (also the connector's
  cache) exist; neither is sent: between two runs nothing of ours is running,
  and preempting other clients' requests on a shared server is not ours to do.
  Versions before the ``success`` body answered an empty 200: taken as done.
- **SGLang** ``/flush_cache`` (``GET`` or ``POST``, ``srt/entrypoints/http_server.py``):
  200 when flushed, **400** when requests are running or waiting ("the
  operation will not be performed"). Newer versions take ``?timeout=S`` to wait
  for idle; not sent, the retries below do that on every version.
- The embedded simulator answers vLLM's ``POST /reset_prefix_cache`` (engine
  profiles, which have a prefix cache; the ``fixed`` ones have none: 404).

:func:`reset_prefix_cache` tries them in that order and remembers, per server
(its root URL), what worked: the next run asks that one only. A server that
has neither (404, 405 or 501 on both) is remembered as having no reset and not
asked again in this process; so is one that refuses for good (401/403) or did
not answer within the limit (it would cost every run that wait again). A
refusal because the cache is busy (vLLM ``success: false``, SGLang 400) is
retried twice, 0.25 s and 0.5 s later, then reported, and asked again next run.
Every call is a metadata call (:mod:`pytest_llmperf.client.metadata`) bounded
by ``timeout`` in total (default 5 s), never retried by the client itself; the
result names the endpoint without credentials and the server's words scrubbed
of the key. Nothing here raises: whatever happens is a :class:`CacheReset`.

**Said, or only recorded.** A server without a prefix cache (the simulator's
``fixed`` profiles, llama.cpp without one) has nothing to reset: its "no cache
reset" is kept in the report's JSON but is no warning. A reset that was not done
is *said* (terminal, Markdown) only where that matters (:func:`reset_said`): the
server has a prefix cache (``prefix_cache``: its reset route answered as one that
is there, its engine configuration says prefix caching is on
(:func:`~pytest_llmperf.server_metrics.fingerprint.prefix_caching`), or its
prefix-cache counters moved during the run, :func:`with_run_evidence`), or the
user set ``--llm-reset-cache`` (``asked``) rather than leaving its default.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import httpx

from pytest_llmperf.client.endpoint import Endpoint
from pytest_llmperf.client.metadata import (
    Answer,
    CallFailure,
    CallLimits,
    MetadataCallError,
    MetadataClient,
    server_root,
)
from pytest_llmperf.redaction import scrub
from pytest_llmperf.server_metrics.summary import ServerMetrics

__all__ = [
    "RESETS",
    "CacheReset",
    "ResetRoute",
    "forget_cache_resets",
    "reset_prefix_cache",
    "reset_prefix_cache_async",
    "reset_said",
    "with_run_evidence",
]

RESET_TIMEOUT_S = 5.0  # the whole reset, every call and wait included
BUSY_WAITS_S = (0.25, 0.5)  # before the 2nd and 3rd try of a reset refused as busy
_ABSENT = frozenset({404, 405, 501})  # no such route (for this method) on this server
_REFUSED = frozenset({401, 403})  # there, but not for us: asking again cannot help
_BODY_LIMIT = 64 << 10
_GRACE_S = 5.0  # the synchronous caller's backstop beyond the reset's own limit


@dataclass(frozen=True, slots=True)
class ResetRoute:
    """One way a server resets its prefix cache: ``POST /reset_prefix_cache`` (vLLM)."""

    method: str
    path: str
    server: str  # whose route it is, for messages

    @property
    def how(self) -> str:
        return f"{self.method} {self.path}"


RESETS = (
    ResetRoute("POST", "/reset_prefix_cache", "vLLM (development mode) or the simulator"),
    ResetRoute("POST", "/flush_cache", "SGLang"),
)


@dataclass(frozen=True, slots=True)
class CacheReset:
    """What a reset did: ``done``; ``how`` it was asked (``"POST /reset_prefix_cache"``,
    empty when nothing was asked); ``why`` it was not done (empty when done).
    ``remembered``: the answer came from an earlier run's (this server is not asked
    again); ``tries``: the calls this reset made. ``prefix_cache``: True where the
    answer shows the server has a prefix cache (reset, or refused while it is in use);
    None where it does not tell."""

    done: bool
    how: str = ""
    why: str = ""
    remembered: bool = False
    tries: int = 0
    prefix_cache: bool | None = None

    def to_dict(self) -> dict[str, Any]:
        """``{"done", "how", "why", "prefix_cache"}`` for the JSON report (``why`` None
        when done; ``prefix_cache`` None where unknown)."""
        return {
            "done": self.done,
            "how": self.how or None,
            "why": self.why or None,
            "prefix_cache": True if self.done else self.prefix_cache,
        }

    @property
    def text(self) -> str:
        """One line for the report: ``prefix cache reset (POST /reset_prefix_cache)``."""
        if self.done:
            return f"prefix cache reset ({self.how})"
        return f"prefix cache not reset: {self.why}"


@dataclass(frozen=True, slots=True)
class _Known:
    """What a server taught us: the route that works, or why it has none (``why``)."""

    route: ResetRoute | None
    why: str = ""


_MEMORY: dict[str, _Known] = {}
_LOCK = threading.Lock()


def forget_cache_resets() -> None:
    """Forget what every server taught (tests; a server restarted with other options)."""
    with _LOCK:
        _MEMORY.clear()


def _limits(endpoint: Endpoint, timeout: float) -> CallLimits:
    return CallLimits.of(endpoint.timeouts).within(timeout)


def reset_prefix_cache(endpoint: Endpoint, *, timeout: float = RESET_TIMEOUT_S) -> CacheReset:
    """Reset ``endpoint``'s server's prefix cache if it offers that (see the module's doc),
    from synchronous code: :func:`reset_prefix_cache_async` on a private event loop in a
    thread of its own, so it is safe inside another loop's thread (which it blocks for
    at most ``timeout`` s plus a grace)."""
    box: list[CacheReset] = []

    def run() -> None:
        try:
            box.append(asyncio.run(reset_prefix_cache_async(endpoint, timeout=timeout)))
        except BaseException as exc:  # never a reason to fail a run
            box.append(_Plan(endpoint, timeout).broke(exc))

    thread = threading.Thread(target=run, name="llmperf-cache-reset", daemon=True)
    thread.start()
    thread.join(timeout + _GRACE_S)
    if box:
        return box[0]
    return CacheReset(False, why=f"the reset did not end within its {timeout:g} s limit")


async def reset_prefix_cache_async(
    endpoint: Endpoint, *, timeout: float = RESET_TIMEOUT_S, http: httpx.AsyncClient | None = None
) -> CacheReset:
    """:func:`reset_prefix_cache` from a coroutine (same rules, same memory); ``http``
    lends a client of the caller's (not closed here). Every call is bounded by what is
    left of ``timeout``."""
    plan = _Plan(endpoint, timeout)
    if plan.settled is not None:
        return plan.settled
    try:
        async with MetadataClient(endpoint, limits=_limits(endpoint, timeout), http=http) as meta:
            limits = meta.limits
            while (route := plan.next_route()) is not None:
                meta.limits = limits.within(plan.left())
                try:
                    got: Answer | MetadataCallError = await meta.call(
                        route.method,
                        meta.root_url(route.path),
                        retry=False,
                        max_bytes=_BODY_LIMIT,
                    )
                except MetadataCallError as exc:
                    got = exc
                wait = plan.take(route, got)
                if wait:
                    await asyncio.sleep(wait)
    except Exception as exc:  # a bug or an odd answer: reported, never raised
        return plan.broke(exc)
    return plan.result()


class _Plan:
    """The decisions of one reset, apart from how its calls are made (sync or async)."""

    def __init__(self, endpoint: Endpoint, timeout: float) -> None:
        self.endpoint = endpoint
        self.root = server_root(endpoint.base_url)
        self.deadline = time.monotonic() + timeout
        self.timeout = timeout
        self.secrets = endpoint.secrets
        with _LOCK:
            known = _MEMORY.get(self.root)
        self.settled: CacheReset | None = None
        if known is not None and known.route is None:
            self.settled = CacheReset(False, why=known.why, remembered=True)
        self.routes: list[ResetRoute] = [known.route] if known and known.route else list(RESETS)
        self.remembered = known is not None
        self.absent: list[str] = []  # "POST /reset_prefix_cache: 404"
        self.busy_answers = 0  # refusals because the cache is in use
        self.tries = 0
        self.outcome: CacheReset | None = None

    def left(self) -> float:
        return max(0.0, self.deadline - time.monotonic())

    def next_route(self) -> ResetRoute | None:
        if self.outcome is not None or not self.routes:
            return None
        if self.left() <= 0.05:
            self.outcome = self._not_done(
                self.routes[0], f"no answer within the reset's {self.timeout:g} s limit"
            )
            return None
        return self.routes[0]

    def take(self, route: ResetRoute, got: Answer | MetadataCallError) -> float | None:
        """Decide on what one call of ``route`` got; the wait before the next call (a busy
        retry), or None."""
        self.tries += 1
        if isinstance(got, MetadataCallError):
            self._failed(route, got)
            return None
        return self._answered(route, got)

    # -- decisions -------------------------------------------------------------------

    def _answered(self, route: ResetRoute, answer: Answer) -> float | None:
        status = answer.status
        if status in _ABSENT:
            self.absent.append(f"{route.how}: {status}")
            self.routes.pop(0)
            if not self.routes:
                why = f"the server has no cache reset ({', '.join(self.absent)})"
                if self.absent[0].startswith(f"{RESETS[0].how}: 404"):
                    why += f"; vLLM serves {RESETS[0].how} in development mode only"
                    why += " (VLLM_SERVER_DEV_MODE=1)"
                self._remember(None, why)
                self.outcome = CacheReset(False, why=why, tries=self.tries)
            return None
        if status in _REFUSED:
            why = f"{route.how} was refused (HTTP {status}{self._words(answer)})"
            self._remember(None, why + "; not asked again")
            self.outcome = CacheReset(False, route.how, why, tries=self.tries)
            return None
        busy = _busy(route, answer)
        if answer.ok and not busy:
            self._remember(route)
            self.outcome = CacheReset(True, route.how, tries=self.tries)
            return None
        if busy:
            self.busy_answers += 1
            if self.busy_answers <= len(BUSY_WAITS_S):
                wait = BUSY_WAITS_S[self.busy_answers - 1]
                if wait < self.left():
                    return wait
            self._remember(route)  # the route is there: ask it again next run
            said = "success=false" if answer.ok else f"HTTP {status}{self._words(answer)}"
            times = f" {self.busy_answers} times" if self.busy_answers > 1 else ""
            why = (
                f"the server refused while its cache is in use (running or waiting "
                f"requests): {route.how} answered {said}{times}"
            )
            self.outcome = CacheReset(False, route.how, why, tries=self.tries, prefix_cache=True)
            return None
        why = f"{route.how} answered HTTP {status}{self._words(answer)}"
        self.outcome = CacheReset(False, route.how, why, tries=self.tries)
        return None

    def _failed(self, route: ResetRoute, exc: MetadataCallError) -> None:
        why = scrub(exc.message, *self.secrets)
        if exc.failure is CallFailure.OUT_OF_TIME:  # each run would wait as long again
            did = exc.attempts[-1].what if exc.attempts else "did not answer"
            why = scrub(f"{route.how} {did} (the reset's limit: {self.timeout:g} s)", *self.secrets)
            why += "; not asked again in this session"
            self._remember(None, why)
        self.outcome = CacheReset(False, route.how, why, tries=self.tries)

    def _not_done(self, route: ResetRoute, why: str) -> CacheReset:
        return CacheReset(False, route.how, why, tries=self.tries)

    def _words(self, answer: Answer) -> str:
        text = answer.message.strip()
        return f": {scrub(text, *self.secrets)[:200]}" if text else ""

    def _remember(self, route: ResetRoute | None, why: str = "") -> None:
        with _LOCK:
            _MEMORY[self.root] = _Known(route, why)

    def broke(self, exc: BaseException) -> CacheReset:
        """An unexpected error (a bug, an odd answer): reported, never raised."""
        text = scrub(f"{type(exc).__name__}: {exc}", *self.secrets)[:300]
        return CacheReset(False, why=f"the reset could not be asked ({text})", tries=self.tries)

    def result(self) -> CacheReset:
        outcome = self.outcome or CacheReset(False, why="no reset was asked", tries=self.tries)
        if self.remembered and outcome.done:
            return CacheReset(True, outcome.how, remembered=True, tries=outcome.tries)
        return outcome


def _busy(route: ResetRoute, answer: Answer) -> bool:
    """Refused because blocks are in use: vLLM's ``200 {"success": false}``, SGLang's 400."""
    if answer.ok:
        if not answer.body.strip():
            return False  # an older vLLM: an empty 200 when done
        try:
            body = answer.json()
        except ValueError:
            return False  # SGLang: a text body when flushed
        return isinstance(body, dict) and body.get("success") is False
    return route.path == "/flush_cache" and answer.status == 400


def with_run_evidence(
    reset: dict[str, Any] | None, server: ServerMetrics | None
) -> dict[str, Any] | None:
    """``reset`` (a :meth:`CacheReset.to_dict`, maybe with ``asked``) with what the run
    showed of the server's prefix cache: ``prefix_cache`` True where its prefix-cache
    lookups moved during the run (``server.prefix_cache_hit_rate`` has a value: vLLM
    counts a lookup per prompt only while prefix caching is on). None stays None."""
    if reset is None or server is None or reset.get("prefix_cache") is True:
        return reset
    if server.stat("server.prefix_cache_hit_rate", None) is not None:
        return {**reset, "prefix_cache": True}
    return reset


def reset_said(reset: Mapping[str, Any] | None) -> bool:
    """Whether a run's ``cache_reset`` is worth a line in the terminal and Markdown: a
    reset done, or one not done where the server has a prefix cache (``prefix_cache``)
    or the user set ``--llm-reset-cache`` (``asked``). A server with no cache to reset,
    under the option's default, is recorded in the JSON and said nowhere else."""
    if not reset:
        return False
    return bool(reset.get("done")) or bool(reset.get("asked")) or reset.get("prefix_cache") is True
