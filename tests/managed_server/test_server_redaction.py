"""Secrets given to a server (argv, environment, the endpoint's key variable) never show:
not in its log's first line, its log tail, its description, nor a start error."""

from __future__ import annotations

from pathlib import Path

import pytest
from managed_helpers import toy

from pytest_llmperf.managed_server import ManagedServer, ServerCommand, ServerStartError
from pytest_llmperf.managed_server.secrets import command_secrets, is_secret_name

ARGV_KEY = "sk-argv-0123456789"
ENV_TOKEN = "tok-env-abcdefgh"
ENDPOINT_KEY = "key-endpoint-xyz987"


def _secretive(*extra: str) -> ServerCommand:
    return toy(
        "--api-key",
        ARGV_KEY,
        "--say",
        f"Authorization: Bearer {ARGV_KEY} and {ENDPOINT_KEY}",
        *extra,
        env={"TOY_TOKEN": ENV_TOKEN, "TOY_PLAIN": "visible-value"},
    )


def _assert_clean(text: str) -> None:
    for secret in (ARGV_KEY, ENV_TOKEN, ENDPOINT_KEY):
        assert secret not in text


def test_a_running_server_shows_no_secret(
    tmp_path: Path, started: list[ManagedServer], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MY_ENDPOINT_KEY_VAR", ENDPOINT_KEY)
    server = ManagedServer.start(_secretive(), log_dir=tmp_path, api_key_env="MY_ENDPOINT_KEY_VAR")
    started.append(server)
    raw = server.log_path.read_text()
    assert ARGV_KEY in raw and ENV_TOKEN in raw  # the server's own words, kept in its file
    first_line = raw.splitlines()[0]
    _assert_clean(first_line)
    assert "--api-key '***'" in first_line or "--api-key ***" in first_line
    assert "TOY_TOKEN=***" in first_line and "TOY_PLAIN=visible-value" in first_line
    tail = server.log_tail()
    _assert_clean(tail)
    assert "api_key=***" in tail and "TOY_TOKEN=***" in tail
    described = server.describe()
    _assert_clean(repr(described))
    assert described["env"] == {"TOY_TOKEN": "***", "TOY_PLAIN": "visible-value"}
    _assert_clean(repr(server.command.describe()))


def test_a_start_error_shows_no_secret(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", ENDPOINT_KEY)  # the default key variable
    with pytest.raises(ServerStartError) as caught:
        ManagedServer.start(_secretive("--exit-code", "1"), log_dir=tmp_path)
    _assert_clean(str(caught.value))
    assert "api_key=***" in str(caught.value)


def test_which_names_hold_secrets() -> None:
    for name in ("--api-key", "OPENAI_API_KEY", "HF_TOKEN", "--hf-token", "PGPASSWORD", "apikey"):
        assert is_secret_name(name), name
    for name in ("--max-num-batched-tokens", "TOKENIZERS_PARALLELISM", "--tokenizer", "--port"):
        assert not is_secret_name(name), name
    argv = ["srv", "--api-key=abcd1", "http://h/x?token=abcd2&a=1", "-e", "HF_TOKEN=abcd3"]
    argv += ["--max-num-batched-tokens", "8192", "--hf-token", "abcd4"]
    env = {"SOME_SECRET": "abcd5", "HF_HUB_DISABLE_TOKEN": "true"}
    found = command_secrets(argv, env)
    assert {"abcd1", "abcd2", "abcd3", "abcd4", "abcd5"} <= set(found)
    assert "8192" not in found and "true" not in found


def test_a_command_that_cannot_be_split_is_shown_redacted() -> None:
    from pytest_llmperf.errors import LlmPerfUsageError

    with pytest.raises(LlmPerfUsageError) as caught:
        ServerCommand.parse(
            "vllm serve m --api-key sk-raw-secret 'unclosed", where="--llm-server-cmd"
        )
    assert "sk-raw-secret" not in str(caught.value)
    assert str(caught.value).startswith("--llm-server-cmd: bad server command")
