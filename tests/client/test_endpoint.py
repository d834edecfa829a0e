import pytest

from pytest_llmperf.client import Endpoint, Timeouts, normalize_base_url, redact_url, resolve_model
from pytest_llmperf.errors import LlmPerfUsageError


@pytest.mark.parametrize(
    "given",
    ["http://h:8000", "http://h:8000/", "http://h:8000/v1", "http://h:8000/v1/", " http://h:8000 "],
)
def test_base_url_normalization(given: str) -> None:
    assert normalize_base_url(given) == "http://h:8000/v1"


def test_gateway_prefix_is_kept() -> None:
    assert normalize_base_url("https://gw.example/openai") == "https://gw.example/openai/v1"


@pytest.mark.parametrize("bad", ["h:8000", "ftp://h/v1", "http://", "localhost"])
def test_bad_urls_are_usage_errors(bad: str) -> None:
    with pytest.raises(LlmPerfUsageError, match="endpoint URL"):
        normalize_base_url(bad)


def test_credentials_in_url_are_redacted() -> None:
    url = "http://alice:s3cret@h:8000/v1"
    assert "s3cret" not in redact_url(url) and "alice" not in redact_url(url)
    with pytest.raises(LlmPerfUsageError) as info:
        normalize_base_url("ftp://alice:s3cret@h/v1")
    assert "s3cret" not in str(info.value)
    assert "s3cret" not in Endpoint(url).label


def test_timeouts_shorthand_and_validation() -> None:
    t = Timeouts.from_seconds(30)
    assert (t.connect, t.first_token, t.stall, t.total) == (10, 30, 30, 30)
    with pytest.raises(LlmPerfUsageError):
        Timeouts.from_seconds(0)


@pytest.mark.asyncio
async def test_resolve_model_names_the_endpoint_when_unreachable() -> None:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    endpoint = Endpoint.from_env(f"http://127.0.0.1:{port}", api_key_env=None)
    with pytest.raises(LlmPerfUsageError, match=f"cannot reach http://127.0.0.1:{port}/v1"):
        await resolve_model(endpoint)
