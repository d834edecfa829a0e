"""``--llm-server-metrics`` as a list of pages: the grammar, the file and every bad item.

Today's four forms (``auto|off|URL|SECONDS``) parse as before (test_option_and_mapping.py);
an item with ``=`` or an ``@FILE`` makes a list (server_metrics/page_list.py).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_llmperf.errors import LlmPerfUsageError
from pytest_llmperf.options import _server_metrics
from pytest_llmperf.server_metrics.fleet import PageSpec
from pytest_llmperf.server_metrics.page_list import PageList, is_page_list, page_name
from pytest_llmperf.server_metrics.source import MetricsOption, parse_option
from pytest_llmperf.specs.fleet_names import PageRole

R, REP, P, D = PageRole.ROUTER, PageRole.REPLICA, PageRole.PREFILL, PageRole.DECODE


def test_a_list_names_each_page_with_its_role_and_name() -> None:
    got = parse_option(
        "router=http://r:9000/metrics, replica:w1=http://w1:8001/metrics,"
        "replica=http://w2:8001/metrics,PREFILL:p0=https://p:1/metrics,decode=http://d/metrics,2s"
    )
    assert got == MetricsOption(
        "fleet",
        2.0,
        pages=PageList(
            (
                PageSpec(R, "r:9000", "http://r:9000/metrics"),
                PageSpec(REP, "w1", "http://w1:8001/metrics"),
                PageSpec(REP, "w2:8001", "http://w2:8001/metrics"),
                PageSpec(P, "p0", "https://p:1/metrics"),
                PageSpec(D, "d", "http://d/metrics"),  # no port: the host alone
            ),
            interval_s=2.0,
        ),
    )


def test_discover_alone_or_beside_pages() -> None:
    got = parse_option("discover=http://router:8000")
    assert got.mode == "fleet" and got.pages == PageList((), "http://router:8000")
    both = parse_option("discover=http://r:8000/v1,router=http://r:29000/metrics")
    assert both.pages is not None and both.pages.discover == "http://r:8000/v1"
    assert both.pages.pages == (PageSpec(R, "r:29000", "http://r:29000/metrics"),)


def test_todays_forms_are_not_lists() -> None:
    for value in ("auto", "off", "2", "0.5s", "http://h:1/metrics?a=b", "https://h/m"):
        assert not is_page_list(value), value
    assert parse_option("http://h:1/metrics?a=b") == MetricsOption(
        "url", url="http://h:1/metrics?a=b"
    )
    assert page_name("http://[::1]:8001/metrics") == "[::1]:8001"
    assert page_name("http://user:pw@h:9/metrics") == "h:9"  # never a credential in a name


@pytest.mark.parametrize(
    ("value", "says"),
    [
        ("tpu=http://g:1/metrics", "unknown role 'tpu' in 'tpu=http://g:1/metrics'"),
        ("replica=", "no URL in 'replica='"),
        ("replica=w1:8001/metrics", "expected an http(s):// URL with a host"),
        ("replica:=http://a:1/metrics", "an empty page name"),
        (
            "replica=http://a:1/metrics,replica=http://a:1/metrics",
            "two pages named 'a:1' ('replica=http://a:1/metrics' and 'replica=http://a:1/metrics')",
        ),
        (
            "replica:x=http://a:1/metrics,decode:x=http://b:1/metrics",
            "two pages named 'x'",
        ),
        ("replica=http://a:1/metrics,fast", "expected ROLE[:NAME]=URL"),
        ("replica=http://a:1/metrics,1,2", "the interval is given twice"),
        ("discover=http://a:1,discover=http://b:1", "discover= is given twice"),
        ("2,=", "unknown role '' in '='"),
        ("@", "@ needs a file name"),
        ("@no-such-pages.txt", "no such file of pages: 'no-such-pages.txt'"),
    ],
)
def test_bad_items_name_the_option_and_the_item(value: str, says: str) -> None:
    with pytest.raises(LlmPerfUsageError) as info:
        parse_option(value)
    assert info.value.where is not None and info.value.where.startswith("--llm-server-metrics")
    assert says in info.value.message, info.value.message


def test_a_file_lists_one_item_a_line_and_errors_name_its_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "pages.txt").write_text(
        "# the fleet under test\n"
        "router=http://r:9000/metrics  # the router's own port\n"
        "\n"
        "replica:0=http://w0:8001/metrics\n"
        "replica:1=http://w1:8001/metrics\n"
        "0.5\n"
    )
    got = parse_option("@pages.txt")
    assert got.interval_s == 0.5 and got.pages is not None
    assert got.pages.origin == "pages.txt"
    assert [(p.role, p.name) for p in got.pages.pages] == [(R, "r:9000"), (REP, "0"), (REP, "1")]
    (tmp_path / "bad.txt").write_text("replica:0=http://w0:8001/metrics\n\nworker=http://w:1/m\n")
    with pytest.raises(LlmPerfUsageError) as info:
        parse_option("@bad.txt")
    assert info.value.where == "--llm-server-metrics (bad.txt, line 3)"
    assert "unknown role 'worker'" in info.value.message
    (tmp_path / "empty.txt").write_text("# nothing\n")
    with pytest.raises(LlmPerfUsageError, match="names no page"):
        parse_option("@empty.txt")


def test_the_option_keeps_a_list_as_written() -> None:
    value = "replica:A=http://a:1/metrics,replica:B=http://b:1/metrics"
    assert _server_metrics(value) == value  # checked at configure time, kept as written
    with pytest.raises(LlmPerfUsageError, match="unknown role"):
        _server_metrics("worker=http://a:1/metrics")
