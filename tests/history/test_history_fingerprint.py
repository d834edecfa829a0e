"""Server fingerprints in the history: stored with each session (schema version 3, a
version-2 store migrated with its sessions kept, fingerprint null), read back with every
run, and the history gate's comparisons flagged ``comparable: false`` with what differs;
``--llm-baseline-strict`` never merges runs of another fingerprint. SQLite and
PostgreSQL alike (the ``target`` fixture)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from typing import Any

from history_workers import KEY, LOAD, WORKLOAD, accumulator, run_record, session_record

from pytest_llmperf.history import SCHEMA_VERSION, HistoryStore
from pytest_llmperf.history.backends import Query, open_database
from pytest_llmperf.history.export import export_json
from pytest_llmperf.history.gate import HistoryGate, open_history_gate
from pytest_llmperf.history.schema import migrations
from pytest_llmperf.history.session import history_at_session_end
from pytest_llmperf.results.run_result import RunResult

TEST = "t::a"
ENDPOINT = {"model": "sim-model", "api": "chat"}


def fingerprint(max_model_len: int = 2048, version: str = "0.32.0") -> dict[str, Any]:
    return {
        "fingerprint_version": 1,
        "collected_at": "2026-01-01T00:00:00+00:00",
        "server": {"family": "vllm", "version": version, "software": "uvicorn"},
        "model": {"id": "sim-model", "max_model_len": max_model_len},
        "client": {"os": "Linux", "cpu_count": 2, "hostname_sha256": "0" * 16},
        "notes": [],
    }


def append(target: str, tag: str, fp: dict[str, Any] | None, ttft_ms: float = 50.0) -> int:
    record = replace(session_record(tag, [run_record(TEST, ttft_ms)]), fingerprint=fp)
    with HistoryStore.open(target) as store:
        return store.append_session(record)


def result(ttft_ms: float = 50.0) -> RunResult:
    return RunResult(dict(WORKLOAD), dict(LOAD), {}, accumulator(ttft_ms), label="run0")


def test_a_session_keeps_its_fingerprint_and_its_runs_carry_it(target: str) -> None:
    assert SCHEMA_VERSION >= 3  # the fingerprint came with version 3
    append(target, "with", fingerprint())
    append(target, "without", None)
    with HistoryStore.open(target) as store:
        first, second = store.sessions()
        assert first.fingerprint == fingerprint() and second.fingerprint is None
        runs = store.runs(TEST)
        assert [r.fingerprint for r in runs] == [fingerprint(), None]
        assert [r.fingerprint for r in store.comparable(TEST, KEY, 5)] == [fingerprint(), None]
        exported = json.loads(export_json(store))
    assert [s["fingerprint"] for s in exported["sessions"]] == [fingerprint(), None]


def test_a_version_2_store_is_migrated_and_its_sessions_have_no_fingerprint(
    target: str,
) -> None:
    db = open_database(target)

    def make_v2(q: Query) -> None:
        for version in (1, 2):
            for statement in migrations(db.dialect)[version]:
                q(statement, ())
        q("UPDATE schema_version SET version = 2", ())
        q(
            "INSERT INTO sessions (started_at, finished_at, tag, endpoint, machine, options) "
            "VALUES ('2025-01-01T00:00:00', '2025-01-01T00:01:00', 'v2', '{}', '{}', '{}')",
            (),
        )

    db.transact(make_v2)
    db.close()
    with HistoryStore.open(target) as store:
        assert store.migrated_from == 2
        (old,) = store.sessions()
        assert old.tag == "v2" and old.fingerprint is None
    append(target, "v3", fingerprint())
    with HistoryStore.open(target) as again:
        assert again.migrated_from == SCHEMA_VERSION
        assert [s.fingerprint for s in again.sessions()] == [None, fingerprint()]


@dataclass
class Entry:
    """What the plugin hands the history for one test (SessionData's TestEntry)."""

    nodeid: str
    outcome: str
    runs: list[dict[str, Any]]
    states: list[dict[str, Any]]
    endpoint: dict[str, Any] = field(default_factory=dict)


def test_the_plugins_call_stores_the_sessions_fingerprint(target: str) -> None:
    acc = accumulator(40)
    entry = Entry(
        TEST,
        "passed",
        [{"label": "run0", "load": LOAD, "workload": WORKLOAD}],
        [acc.to_state()],
        dict(ENDPOINT),
    )
    done = history_at_session_end(
        target,
        [entry],
        endpoint=ENDPOINT,
        options={},
        started_at="2026-01-01T00:00:00",
        tag="t",
        rootdir=None,
        fingerprint=fingerprint(1024),
    )
    assert not done.error, done.error
    with HistoryStore.open(target) as store:
        assert store.session(done.session_id or 0).fingerprint == fingerprint(1024)


def test_the_gate_flags_runs_of_another_configuration(target: str) -> None:
    append(target, "old", None)  # stored before fingerprints
    append(target, "a", fingerprint(2048))
    gate = open_history_gate("history", history=target)
    assert isinstance(gate, HistoryGate) and gate.fingerprint == fingerprint(2048)
    session = gate.check_comparability(fingerprint(1024))
    assert session["comparable"] is False  # against the newest stored session
    assert session["differs"] == ["model.max_model_len: 2048 -> 1024"]
    checks = gate.compare(TEST, [result()], endpoint=ENDPOINT)
    assert checks and all(c.comparable is False for c in checks)
    assert all(c.differs == ("model.max_model_len: 2048 -> 1024",) for c in checks)
    assert "NOT COMPARABLE" in gate.describe(TEST)
    assert "model.max_model_len: 2048 -> 1024" in gate.describe(TEST)
    # the same configuration: the run without a fingerprint makes it unknown, not false
    same = open_history_gate("history", history=target)
    assert same.check_comparability(fingerprint(2048))["comparable"] is True
    checks = same.compare(TEST, [result()], endpoint=ENDPOINT)
    assert all(c.comparable is None and c.differs == () for c in checks)
    assert "NOT COMPARABLE" not in same.describe(TEST)
    only_new = open_history_gate("history:1", history=target)
    only_new.check_comparability(fingerprint(2048))
    assert all(c.comparable is True for c in only_new.compare(TEST, [result()], endpoint=ENDPOINT))


def test_strict_never_merges_runs_of_another_fingerprint(target: str) -> None:
    append(target, "a", fingerprint(2048), ttft_ms=10.0)
    gate = open_history_gate("history", history=target)
    session = gate.check_comparability(fingerprint(1024), strict=True)  # never raises
    assert session["comparable"] is False and "--llm-baseline-strict" in session["note"]
    (check,) = gate.compare(TEST, [result()], endpoint=ENDPOINT)
    assert check.verdict == "inconclusive" and check.metric == "*"
    assert "--llm-baseline-strict" in check.reason
    assert "model.max_model_len: 2048 -> 1024" in check.reason
    append(target, "b", fingerprint(1024), ttft_ms=50.0)
    append(target, "c", fingerprint(2048), ttft_ms=10.0)
    strict = open_history_gate("history", history=target)
    strict.check_comparability(fingerprint(1024), strict=True)
    checks = strict.compare(TEST, [result()], endpoint=ENDPOINT)
    assert checks[0].compared_with == "history (last 1 run of 5 wanted, tag b)"
    assert all(c.comparable is True for c in checks)
    loose = open_history_gate("history", history=target)
    loose.check_comparability(fingerprint(1024))
    merged = loose.compare(TEST, [result()], endpoint=ENDPOINT)
    assert merged[0].compared_with == "history (last 3 runs of 5 wanted, tags a, b, c)"
    assert all(c.comparable is False for c in merged)
