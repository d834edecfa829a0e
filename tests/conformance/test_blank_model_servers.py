"""Blank replies on real servers: generated, counted, never failed (issue 36).

The blank model (``conformance/build_blank_model.py``) answers some prompts
with ``max_tokens`` of ``<|start_header_id|>``, a special token that servers
generate, count in their usage and decode to nothing, as a random-weight
model does now and then. Decoding is greedy, so which prompts get one is
fixed by their tokens: of a synthetic workload of 32 tokens in and out, the
chat prompts 5, 12, 13, 17, 19, 33 and 37 of 40 (six of the completions
prompts). Each server streams such a reply its own way (docs/servers.md):

- vLLM: one ``""`` delta per token, then the usage: token events, timed
  (TTFT and ITL) like any other reply's;
- ``transformers serve``: the role chunk, then the finish chunk with the
  usage, no content at all: no token event, so no TTFT, its ``e2e`` to the
  stream's end.

Either way the request is completed and counted in ``counts.blank`` and
``blank_rate`` (docs/measurement.md, "Blank replies"), the terminal shows
the rate beside the errors, and, since some replies had text, nothing warns.
One session per API on vLLM (40 requests each, about 5 s); one chat session
on ``transformers serve``, which serves about 0.5 requests a second here, of
its first :data:`TRANSFORMERS_REQUESTS` prompts (three of them blank). That
session starts and stops ``transformers serve`` itself (``--llm-server-cmd``,
issue 37: the tier's start of it, reported as the session's server); vLLM's
two sessions share a server the tier started, and report no server process.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest
from conformance_checks import (
    CONCURRENCY,
    Session,
    check_completed,
    check_quiet,
    check_started_and_stopped,
    load_test,
    run_records,
    run_session,
)

TOKENS = 32  # in and out: the blank model's threshold is a share of a 32-token prompt
TRANSFORMERS_REQUESTS = 16
ALL_BLANK = "completed replies were blank"  # the one line of a run with no text at all
# The chat prompts whose replies were blank on the first server of this session, for the
# second to agree with (the same model, greedy, the same prompts: the same replies).
BLANK_CHAT = pytest.StashKey[set[int]]()


@dataclass(frozen=True)
class Plan:
    """What a server's sessions are and what its blank replies stream."""

    apis: tuple[str, ...]
    requests: int
    named_model: bool  # --llm-model and --llm-tokenizer given (its /v1/models lists nothing)
    events: bool  # a blank reply streams token events (its empty deltas)
    started_by_session: bool = False  # blank_server is a Launch: --llm-server-cmd


PLANS = {
    "vLLM (blank model)": Plan(("chat", "completions"), 40, named_model=False, events=True),
    "transformers serve (blank model)": Plan(
        ("chat",), TRANSFORMERS_REQUESTS, named_model=True, events=False, started_by_session=True
    ),
}


@pytest.fixture(scope="module")
def plan(blank_server: Any) -> Plan:
    return PLANS[blank_server.name]


@pytest.fixture(scope="module")
def sessions(
    blank_server: Any, plan: Plan, tmp_path_factory: pytest.TempPathFactory
) -> dict[str, Session]:
    """One session per API of ``plan``, its requests in ``--llm-events``, by API."""
    source = load_test(plan.requests, CONCURRENCY, TOKENS, TOKENS)
    model = blank_server.model
    named = [f"--llm-model={model}", f"--llm-tokenizer={model}"] if plan.named_model else []
    found = {}
    for api in plan.apis:
        workdir = tmp_path_factory.mktemp(f"blank-{api}")
        found[api] = run_session(
            workdir,
            blank_server if plan.started_by_session else blank_server.url,
            f"--llm-events={workdir / 'events'}",
            *named,
            test_source=source,
            api=api,
        )
    return found


def test_every_request_completes_and_the_blank_ones_are_counted(
    sessions: dict[str, Session], plan: Plan, request: pytest.FixtureRequest
) -> None:
    """All requests completed, none failed; some blank, not all; ``counts.blank`` and
    ``blank_rate`` as the event log's records say; on the same prompts on both servers."""
    for api, s in sessions.items():
        run = check_completed(s, plan.requests, one_read_replies_ok=plan.events)
        blank = run["counts"]["blank"]
        assert 0 < blank < plan.requests, (api, run["counts"])
        records = run_records(run)
        assert len(records) == plan.requests, (api, len(records))
        assert {r.index for r in records} == set(range(plan.requests)), api
        assert sum(r.blank for r in records) == blank, (api, run["counts"])
        for r in records:
            assert r.error is None and r.usage_completion_tokens == TOKENS, (api, r)
        if api == "chat":
            _same_blank_prompts(request, {r.index for r in records if r.blank}, plan.requests)


def _same_blank_prompts(request: pytest.FixtureRequest, found: set[int], requests: int) -> None:
    """The first server's blank chat prompts are the second's (over the prompts both sent)."""
    earlier = request.config.stash.get(BLANK_CHAT, None)
    if earlier is None:
        request.config.stash[BLANK_CHAT] = found
        return
    assert found == {i for i in earlier if i < requests}, (sorted(found), sorted(earlier))


def test_blank_replies_are_timed_as_the_server_streams_them(
    sessions: dict[str, Session], plan: Plan
) -> None:
    """vLLM: a blank reply's empty deltas are token events, so it has a TTFT like any
    reply. transformers serve: no event at all, so no TTFT; its e2e is still counted."""
    for api, s in sessions.items():
        run = s.run
        m, blank = run["metrics"], run["counts"]["blank"]
        assert m["e2e"]["count"] == plan.requests, (api, m["e2e"])
        for r in run_records(run):
            if not r.blank:
                assert r.token_events >= 1 and r.t_first > 0, (api, r)
            elif plan.events:
                assert 1 <= r.token_events <= TOKENS and r.t_first > 0, (api, r)
            else:
                assert r.token_events == 0 and r.t_first == 0 and r.t_end > r.t_send, (api, r)
        ttft = plan.requests if plan.events else plan.requests - blank
        assert m["ttft"]["count"] == ttft, (api, m["ttft"], run["counts"])


def test_the_terminal_shows_the_blank_rate_and_warns_of_nothing(
    sessions: dict[str, Session],
) -> None:
    """``blank N (x%)`` on the run's line and the session's; no all-blank line (some
    replies had text), no other warning."""
    for api, s in sessions.items():
        run = s.run
        shown = f"blank {run['counts']['blank']} ({run['metrics']['blank_rate'] * 100:.2f}%)"
        words = " ".join(s.output.split())  # the summary wraps at 80 columns
        assert words.count(shown) == 2, f"{api}: {shown!r} not on the run and session lines\n"
        assert ALL_BLANK not in s.output, s.explain()
        check_quiet(s)


def test_the_server_process_is_reported_where_the_session_started_the_server(
    sessions: dict[str, Session], plan: Plan
) -> None:
    """Issue 37: ``transformers serve`` started by its session (``--llm-server-cmd``) has
    its ``startup.ready_s`` and log in the report and is gone after the session; a
    server the session only reached by URL has no ``server_process``."""
    for api, s in sessions.items():
        if plan.started_by_session:
            server = check_started_and_stopped(s)
            print(api, {k: server.get(k) for k in ("name", "ready_s", "first_token_s", "log")})
        else:
            assert all(r.get("server_process") is None for r in s.runs), api
            assert not (s.report or {}).get("session", {}).get("servers"), api
