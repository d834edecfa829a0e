"""ManagedServer on real processes: start, ready, stop; exits before ready; deadlines;
programs that cannot run; a server that ignores SIGTERM; a chatty one; its tree."""

from __future__ import annotations

import json
import signal
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from managed_helpers import TOY, gone, toy

from pytest_llmperf.errors import LlmPerfUsageError, StopCause
from pytest_llmperf.managed_server import ManagedServer, ServerCommand, ServerStartError


def _get(url: str) -> dict[str, object]:
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    with opener.open(url, timeout=10) as response:
        data: dict[str, object] = json.load(response)
        return data


def test_the_simulator_starts_answers_and_stops(tmp_path: Path) -> None:
    command = ServerCommand.parse(
        f"{sys.executable} -m pytest_llmperf.sim --port {{port}} --host {{host}}", name="sim"
    )
    server = ManagedServer.start(command, log_dir=tmp_path)
    try:
        assert server.poll() is None and server.exit is None
        assert server.url.startswith("http://127.0.0.1:") and server.port is not None
        assert _get(server.url + "/v1/models")["data"]
        assert 0 < server.ready_s < 60  # structure: spawn before ready; 60 s only bounds a hang
        first = server.measure_first_token(None, "chat")
        assert first is not None and first >= server.ready_s, server.first_token_note
        embedded = server.measure_first_token(None, "embeddings")  # its first answer
        assert embedded is not None and embedded >= first and server.first_token_note is None
        first = server.measure_first_token(None, "chat")
        assert server.log_path == tmp_path.resolve() / "sim-0.log"
        first_line = server.log_path.read_text().splitlines()[0]
        assert first_line.startswith("$ ") and "pytest_llmperf.sim --port" in first_line
        assert "LISTENING" in server.log_tail()
        described = server.describe()
        assert described["startup"] == {"ready_s": server.ready_s, "first_token_s": first}
        assert described["exit"] is None and described["stopped_by"] is None
        assert described["log"] == str(server.log_path) and described["pid"] == server.pid
    finally:
        server.stop()
    end = server.poll()
    assert end is not None and gone(server.pid)
    assert server.describe()["stopped_by"] == "pytest-llmperf"
    server.stop()  # idempotent
    assert server.poll() is end


def test_a_second_server_of_the_same_name_gets_its_own_log(
    tmp_path: Path, started: list[ManagedServer]
) -> None:
    started += [ManagedServer.start(toy(), log_dir=tmp_path) for _ in range(2)]
    assert [s.log_path.name for s in started] == ["toy-0.log", "toy-1.log"]
    assert started[0].port != started[1].port


def test_an_exit_before_ready_names_the_code_and_the_last_lines(tmp_path: Path) -> None:
    with pytest.raises(ServerStartError) as caught:
        ManagedServer.start(toy("--exit-code", "3"), log_dir=tmp_path)
    error = caught.value
    assert isinstance(error, LlmPerfUsageError)
    assert error.cause is StopCause.SERVER_DID_NOT_START
    assert error.exit is not None and error.exit.code == 3 and error.exit.signal is None
    text = str(error)
    assert "toy exited with code 3 before it was ready" in text
    assert "toy server: giving up" in text and error.log_path and error.log_path in text


def test_an_exit_by_a_signal_before_ready_names_the_signal(tmp_path: Path) -> None:
    with pytest.raises(ServerStartError) as caught:
        ManagedServer.start(toy("--kill-self", str(int(signal.SIGKILL))), log_dir=tmp_path)
    assert caught.value.exit is not None and caught.value.exit.signal == signal.SIGKILL
    assert "signal 9 (SIGKILL)" in str(caught.value)
    assert "toy server starting" in caught.value.log_tail


def test_a_passed_deadline_stops_the_server_with_its_last_lines(tmp_path: Path) -> None:
    progress: list[str] = []
    command = toy("--never-listen", "--children", str(tmp_path / "pids"), ready_timeout_s=2.5)
    with pytest.raises(ServerStartError) as caught:
        ManagedServer.start(command, log_dir=tmp_path, progress=progress.append)
    text = str(caught.value)
    assert caught.value.cause is StopCause.SERVER_DID_NOT_START
    assert "was not ready within 2.5 s (deadline;" in text and "connection refused" in text
    assert "toy server starting" in text
    assert progress and progress[0].startswith("toy: waiting for http://127.0.0.1:")
    assert "(log: " in progress[0]
    child, loner = map(int, (tmp_path / "pids").read_text().split())
    assert gone(child) and gone(loner)


@pytest.mark.parametrize("program", ["no-such-llm-server-xyz", "/nonexistent/bin/vllm"])
def test_a_missing_program_is_a_usage_error_naming_it(tmp_path: Path, program: str) -> None:
    command = ServerCommand.parse([program, "--port", "{port}"])
    with pytest.raises(LlmPerfUsageError) as caught:
        ManagedServer.start(command, log_dir=tmp_path)
    assert caught.value.cause is StopCause.USAGE
    assert f"program {program!r} not found" in str(caught.value)


def test_a_file_that_is_not_executable_is_a_usage_error(tmp_path: Path) -> None:
    script = tmp_path / "server.sh"
    script.write_text("#!/bin/sh\nexit 0\n")
    script.chmod(0o644)
    with pytest.raises(ServerStartError) as caught:
        ManagedServer.start(ServerCommand.parse([str(script), "{port}"]), log_dir=tmp_path)
    assert caught.value.cause is StopCause.USAGE and "is not executable" in str(caught.value)


def test_a_server_that_ignores_sigterm_is_killed_after_the_grace(tmp_path: Path) -> None:
    server = ManagedServer.start(toy("--ignore-term", stop_grace_s=0.5), log_dir=tmp_path)
    began = time.monotonic()
    server.stop()
    took = time.monotonic() - began
    end = server.poll()
    assert end is not None and end.signal == signal.SIGKILL and gone(server.pid)
    # structure: the grace was waited out; 15 s only bounds a stop that waits unbounded
    assert 0.5 <= took < 15


def test_a_chatty_server_never_blocks_and_its_log_keeps_it_all(
    tmp_path: Path, started: list[ManagedServer]
) -> None:
    server = ManagedServer.start(toy("--chatty-mb", "8", "--keep-chatting"), log_dir=tmp_path)
    started.append(server)
    size = server.log_path.stat().st_size
    assert size > 8 * 2**20
    assert _get(server.url + "/v1/models")  # still answering while it writes
    deadline = time.monotonic() + 20
    while server.log_path.stat().st_size < size + 2**20 and time.monotonic() < deadline:
        time.sleep(0.05)  # evidence: it keeps writing with nobody reading
    assert server.log_path.stat().st_size >= size + 2**20
    assert server.log_tail(3).splitlines()[-1].startswith("xxxx")


def test_stop_ends_a_forked_child_and_one_in_a_new_session(tmp_path: Path) -> None:
    pids = tmp_path / "pids"
    server = ManagedServer.start(toy("--children", str(pids)), log_dir=tmp_path)
    child, loner = map(int, pids.read_text().split())
    assert not gone(child) and not gone(loner)
    server.stop()
    assert gone(server.pid) and gone(child) and gone(loner)


def test_readiness_waits_for_the_named_model(
    tmp_path: Path, started: list[ManagedServer], monkeypatch: pytest.MonkeyPatch
) -> None:
    started.append(ManagedServer.start(toy("--model", "m1"), log_dir=tmp_path, model="m1"))
    monkeypatch.setattr("pytest_llmperf.managed_server.server._UNLISTED_FOR_S", 0.5)
    with pytest.raises(ServerStartError) as caught:
        ManagedServer.start(toy("--model", "m1"), log_dir=tmp_path, model="m2")
    assert caught.value.cause is StopCause.USAGE
    assert "does not serve model 'm2'" in str(caught.value) and "lists: m1" in str(caught.value)


def test_a_first_request_that_fails_gives_no_first_token_and_says_why(
    tmp_path: Path, started: list[ManagedServer]
) -> None:
    server = ManagedServer.start(toy(), log_dir=tmp_path)  # it answers no POST
    started.append(server)
    assert server.measure_first_token("toy", "chat", timeout_s=10) is None
    note = server.first_token_note
    assert note is not None and note.startswith("first request failed: http_error: HTTP 501")
    assert "\n" not in note and server.describe()["first_token_note"] == note


def test_a_server_killed_while_running_is_seen_at_once(tmp_path: Path) -> None:
    import os

    pids = tmp_path / "pids"
    server = ManagedServer.start(toy("--children", str(pids)), log_dir=tmp_path)
    child, loner = map(int, pids.read_text().split())
    run_start = time.monotonic_ns()
    os.kill(server.pid, signal.SIGKILL)
    end = server.wait(timeout=10)  # 10 s only bounds a hang: the exit is seen as it happens
    assert end is not None and end.signal == signal.SIGKILL and server.poll() is end
    assert end.at_ns >= run_start
    record = server.exit_record("run0", run_start)
    assert record["signal_name"] == "SIGKILL" and record["oom"] is False
    assert record["message"].startswith("server exited with signal 9 (SIGKILL) at ")
    assert record["message"].endswith(" s into run0")
    assert "toy server listening" in record["log_tail"]
    server.stop()  # its orphans are ended too
    assert gone(child) and gone(loner)
    assert server.describe()["stopped_by"] is None
    assert server.describe()["exit"]["signal"] == signal.SIGKILL


def test_a_fixed_port_already_in_use_is_a_usage_error(
    tmp_path: Path, started: list[ManagedServer]
) -> None:
    first = ManagedServer.start(toy(), log_dir=tmp_path)
    started.append(first)
    assert first.port is not None
    command = ServerCommand.parse(
        [sys.executable, "-c", "pass"], port=first.port, ready_url="http://{host}:{port}/"
    )
    with pytest.raises(ServerStartError) as caught:
        ManagedServer.start(command, log_dir=tmp_path)
    assert caught.value.cause is StopCause.USAGE
    assert f"already listens on 127.0.0.1:{first.port}" in str(caught.value)


def test_the_port_is_filled_in_the_environment_too(
    tmp_path: Path, started: list[ManagedServer]
) -> None:
    command = ServerCommand.parse(
        [sys.executable, "-u", str(TOY), "--port", "{port}"], env={"TOY_PORT": "{port}"}
    )
    server = ManagedServer.start(command, log_dir=tmp_path)
    started.append(server)
    assert f"TOY_PORT={server.port}" in server.log_tail()
    assert server.describe()["env"] == {"TOY_PORT": str(server.port)}
