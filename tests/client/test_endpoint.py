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


@pytest.mark.parametrize(
    ("base", "root"),
    [
        ("http://h:8000/v1", "http://h:8000"),
        ("https://gw.example/openai/v1", "https://gw.example/openai"),
        ("http://h:8080/v1/", "http://h:8080"),
    ],
)
def test_routes_beside_v1_hang_from_the_server_root(base: str, root: str) -> None:
    """/tokenize, /metrics and /version live at the root (vLLM's, llama-server's)."""
    from pytest_llmperf.client.metadata import server_root

    assert server_root(base) == root


def test_metadata_limits_come_from_the_timeout_option() -> None:
    from pytest_llmperf.client.metadata import CallLimits

    short = CallLimits.of(Timeouts.parse("5"))
    assert (short.connect_s, short.first_byte_s, short.silence_s, short.total_s) == (5, 5, 5, 5)
    default = CallLimits.of(Timeouts.parse("120"))  # the option's default: connect 10, rest 120
    assert (default.connect_s, default.total_s) == (10, 40)  # connect + 30 s
    assert default.first_byte_s == default.silence_s == 40  # none beyond the call's own limit
    assert CallLimits.of(Timeouts.parse("120")).within(3).total_s == 3


@pytest.mark.parametrize(
    ("status", "transient"),
    [
        *((code, True) for code in (408, 429, 500, 502, 503, 504)),
        *((code, False) for code in (400, 401, 403, 404, 422, 501, 505, 200)),
    ],
)
def test_which_answers_are_asked_again(status: int, transient: bool) -> None:
    from pytest_llmperf.client.metadata import is_transient

    assert is_transient(status) is transient


def test_the_blocking_metadata_client_leaves_no_thread_and_pickles() -> None:
    import pickle
    import socket
    import threading

    from pytest_llmperf.client.blocking_metadata import BlockingMetadataClient
    from pytest_llmperf.client.metadata import CallFailure

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    endpoint = Endpoint(f"http://127.0.0.1:{port}/v1", timeouts=Timeouts.from_seconds(2))

    def threads() -> int:
        return sum(t.name == "llmperf-metadata" for t in threading.enumerate())

    before = threads()
    with BlockingMetadataClient(endpoint) as meta:
        with pytest.raises(LlmPerfUsageError) as err:
            meta.call("GET", meta.url("/models"))
        assert err.value.failure is CallFailure.UNREACHABLE  # type: ignore[attr-defined]
        assert "cannot reach" in str(err.value) and "GET /v1/models" in str(err.value)
        assert threads() == before + 1
        copy = pickle.loads(pickle.dumps(meta))  # as a worker process receives it
    assert threads() == before
    assert copy.endpoint == endpoint and copy.limits == meta.limits
