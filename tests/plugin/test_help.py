"""``pytest --help`` lists every ``--llm-*`` option (argparse %-formats help texts)."""

from __future__ import annotations

import pytest

from pytest_llmperf.options import OPTIONS


def test_help_lists_every_option(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest("--help")
    assert result.ret == 0, result.stderr.str()
    out = result.stdout.str()
    for option in OPTIONS:
        assert option.flag in out
    assert "'10%' (default)" in out  # a literal percent sign survives the formatting
