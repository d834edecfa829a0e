"""docs/server-lifecycle.md says only what the plugin has, and all of it.

Every ``--llm-*`` option the page names is one of ``pytest --help``'s; every option of
the plugin for the server it starts (``--llm-server-*``, ``--llm-reference-cmd``) is on
the page; every SLO the page's examples declare parses; the ``llm_server`` marker it
documents is registered.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from pytest_llmperf.specs.slo import parse_slo

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "server-lifecycle.md"
OPTION = re.compile(r"--llm-[a-z0-9]+(?:-[a-z0-9]+)*")
# pytest --help lists each option at a two-space indent; wrapped help text is indented deeper
HELP_OPTION = re.compile(r"^  (--llm-[a-z0-9-]+)", re.MULTILINE)
LIFECYCLE = re.compile(r"--llm-server(?:-[a-z0-9-]+)?|--llm-reference-cmd")
CODE_BLOCK = re.compile(r"```python\n(.*?)```", re.DOTALL)
SLO_CALL = re.compile(r"llm_slo\(([^)]*)\)")
STRING = re.compile(r"\"([^\"]+)\"")
LINK = re.compile(r"\]\((?!https?:)([^)\s]+)\)")  # a relative link: [text](path#anchor)
# a server-process metric in backticks: `startup.ready_s`, `server.rss_max_mb`
PROCESS_METRIC = re.compile(r"`((?:startup|server)\.(?:ready|first|rss|cpu|gpu)[a-z_]*)`")


def page() -> str:
    return PAGE.read_text(encoding="utf-8")


def help_options(pytester: pytest.Pytester) -> set[str]:
    result = pytester.runpytest("--help")
    assert result.ret == 0, result.stderr.str()
    found = set(HELP_OPTION.findall(result.stdout.str()))
    assert "--llm-endpoint" in found, "the reader of pytest --help finds the plugin's options"
    return found


def test_every_option_on_the_page_exists(pytester: pytest.Pytester) -> None:
    known = help_options(pytester)
    missing = sorted(set(OPTION.findall(page())) - known)
    assert not missing, f"docs/server-lifecycle.md names options pytest --help lacks: {missing}"


def test_every_server_option_of_the_plugin_is_on_the_page(pytester: pytest.Pytester) -> None:
    lifecycle = {flag for flag in help_options(pytester) if LIFECYCLE.fullmatch(flag)}
    assert "--llm-server-cmd" in lifecycle and "--llm-reference-cmd" in lifecycle
    absent = sorted(lifecycle - set(OPTION.findall(page())))
    assert not absent, f"docs/server-lifecycle.md does not document: {absent}"


def test_every_slo_of_the_page_parses() -> None:
    expressions = [
        expr
        for block in CODE_BLOCK.findall(page())
        for call in SLO_CALL.findall(block)
        for expr in STRING.findall(call)
    ]
    assert any(e.startswith("startup.") for e in expressions), expressions
    assert any(e.startswith("server.") for e in expressions), expressions
    for expr in expressions:
        parse_slo(expr)  # a usage error names the bad word


def test_every_process_metric_is_defined_on_the_page_and_no_other() -> None:
    from pytest_llmperf.specs.process_names import PROCESS_METRICS

    named = set(PROCESS_METRIC.findall(page()))
    assert named - set(PROCESS_METRICS) == set(), "names no process metric has"
    assert set(PROCESS_METRICS) - named == set(), "process metrics the page leaves out"


def anchors(markdown: str) -> set[str]:
    """GitHub's anchors of a page's headings: lower case, punctuation dropped, spaces to -."""
    return {
        re.sub(r"[^\w\- ]", "", line.lstrip("#").strip().lower()).replace(" ", "-")
        for line in markdown.splitlines()
        if line.startswith("#")
    }


def test_every_link_of_the_page_leads_somewhere() -> None:
    for target in LINK.findall(page()):
        path, _, anchor = target.partition("#")
        linked = (PAGE.parent / path) if path else PAGE
        assert linked.is_file(), f"docs/server-lifecycle.md links to a missing {target}"
        if anchor:
            assert anchor in anchors(linked.read_text(encoding="utf-8")), target


def test_the_marker_is_registered(pytester: pytest.Pytester) -> None:
    assert "llm_server(" in page()
    result = pytester.runpytest("--markers")
    assert result.ret == 0, result.stderr.str()
    registered = "@pytest.mark.llm_server" in result.stdout.str()
    assert registered, "llm_server is not among pytest --markers"
