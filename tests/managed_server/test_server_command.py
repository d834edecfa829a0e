"""ServerCommand: parsing, placeholders, validation and its description."""

from __future__ import annotations

import pytest

from pytest_llmperf.errors import LlmPerfUsageError
from pytest_llmperf.managed_server import Restart, ServerCommand
from pytest_llmperf.managed_server.readiness import next_delay


def test_a_string_is_split_like_a_shell_and_a_list_taken_as_is() -> None:
    command = ServerCommand.parse("vllm serve 'my model' --port {port} --host {host}")
    assert command.argv == ("vllm", "serve", "my model", "--port", "{port}", "--host", "{host}")
    assert command.name == "vllm" and command.restart is Restart.SESSION
    assert command.filled(8000)[3:] == ("--port", "8000", "--host", "127.0.0.1")
    assert command.ready_url_for(8000) == "http://127.0.0.1:8000/v1/models"
    listed = ServerCommand.parse(["/opt/bin/llama-server", "--json", '{"a": 1}', "{port}"])
    assert listed.name == "llama-server"
    assert listed.filled(5)[2:] == ('{"a": 1}', "5")  # other braces are left alone


def test_a_command_without_a_port_needs_a_port_or_a_ready_url() -> None:
    with pytest.raises(LlmPerfUsageError, match=r"no \{port\} placeholder") as caught:
        ServerCommand.parse("docker run img", where="--llm-server-cmd")
    assert caught.value.where == "--llm-server-cmd"
    assert ServerCommand.parse("docker run img", port=8000).port == 8000
    ready = ServerCommand.parse("srv", ready_url="http://{host}:9000/health")
    assert ready.ready_url_for(None) == "http://127.0.0.1:9000/health"
    with pytest.raises(LlmPerfUsageError, match="readiness URL"):
        ServerCommand.parse("srv {port}", ready_url="localhost:9000")


def test_bad_values_are_usage_errors() -> None:
    with pytest.raises(LlmPerfUsageError, match="empty"):
        ServerCommand.parse("  ")
    with pytest.raises(LlmPerfUsageError, match="stop_grace_s"):
        ServerCommand.parse("srv {port}", stop_grace_s=-1)
    with pytest.raises(ValueError):
        ServerCommand.parse("srv {port}", restart="forever")


def test_the_description_is_redacted() -> None:
    command = ServerCommand.parse(
        "vllm serve m --port {port} --api-key sk-12345678", restart="module", name="v"
    )
    assert command.describe() == {
        "name": "v",
        "cmd": "vllm serve m --port {port} --api-key ***",
        "cwd": None,
        "ready_url": "http://{host}:{port}/v1/models",
        "restart": "module",
    }


def test_readiness_polls_fast_first_then_slower() -> None:
    assert next_delay(0.1, 0.0) == 0.01 and next_delay(0.99, 0.01) == 0.01
    assert next_delay(1.0, 0.01) == 0.05 and next_delay(2.9, 0.05) == 0.05
    delays = [0.05]
    for _ in range(20):
        delays.append(next_delay(10.0, delays[-1]))
    assert delays == sorted(delays) and delays[-1] == 1.0


def test_an_ipv6_host_is_bracketed_in_urls_only() -> None:
    command = ServerCommand.parse("srv --host {host} --port {port}", host="::1")
    assert command.filled(80)[1:] == ("--host", "::1", "--port", "80")
    assert command.ready_url_for(80) == "http://[::1]:80/v1/models"


@pytest.mark.parametrize(
    ("cmd", "name"),
    [
        ("vllm serve m --port {port}", "vllm"),
        ("/venv/bin/python -m vllm.entrypoints.openai.api_server --port {port}", "vllm"),
        ('sh -c "sleep 4 && exec /opt/llama-server -m x --port {port}"', "llama-server"),
        (
            "docker run --rm -p {port}:8000 --gpus all vllm/vllm-openai:v0.9 --model m",
            "vllm-openai",
        ),
        ("env A=1 nohup transformers serve --port {port}", "transformers"),
        ("uv run vllm serve x --port {port}", "vllm"),
        ("python3 my_server.py --port {port}", "my_server.py"),
        ('sh -c "echo {port}"', "sh"),
    ],
)
def test_a_server_is_named_by_the_program_that_serves(cmd: str, name: str) -> None:
    """Not the interpreter, shell, launcher or container runtime that starts it."""
    assert ServerCommand.parse(cmd).name == name
    assert ServerCommand.parse(cmd, name="mine").name == "mine"
