"""The package's front door: ``__all__`` resolves, ``__version__`` is right, importing is cheap."""

from __future__ import annotations

import ast
import importlib
import importlib.metadata
import inspect
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

import pytest_llmperf


@pytest.mark.parametrize("name", pytest_llmperf.__all__)
def test_every_public_name_resolves_to_its_defining_module(name: str) -> None:
    value = getattr(pytest_llmperf, name)
    module = importlib.import_module(pytest_llmperf._EXPORTS[name])
    assert value is getattr(module, name)
    if inspect.isclass(value) or inspect.isfunction(value):
        assert value.__module__ == module.__name__, "export it from where it is defined"


def test_all_matches_the_lazy_table_and_the_type_checking_imports() -> None:
    assert len(pytest_llmperf.__all__) == len(set(pytest_llmperf.__all__))
    assert set(pytest_llmperf.__all__) == set(pytest_llmperf._EXPORTS)
    # what type checkers see must be what __getattr__ loads
    tree = ast.parse(Path(pytest_llmperf.__file__).read_text(encoding="utf-8"))
    (guard,) = [
        node
        for node in tree.body
        if isinstance(node, ast.If) and getattr(node.test, "id", None) == "TYPE_CHECKING"
    ]
    typed = {
        alias.name: node.module
        for node in guard.body
        if isinstance(node, ast.ImportFrom)
        for alias in node.names
    }
    assert typed == pytest_llmperf._EXPORTS


def test_unknown_names_raise_attribute_error_and_dir_lists_the_api() -> None:
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        pytest_llmperf.nope  # noqa: B018
    assert set(pytest_llmperf.__all__) | {"__version__"} <= set(dir(pytest_llmperf))


def test_version_is_the_installed_distribution_s() -> None:
    assert pytest_llmperf.__version__ == importlib.metadata.version("pytest-llmperf")


def test_version_falls_back_to_the_checkout_then_to_unknown(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def not_installed(name: str) -> str:
        raise importlib.metadata.PackageNotFoundError(name)

    monkeypatch.setattr(importlib.metadata, "version", not_installed)
    checkout = pytest_llmperf._checkout_version()
    assert pytest_llmperf._version() == (checkout or pytest_llmperf.UNKNOWN_VERSION)
    monkeypatch.setattr(pytest_llmperf, "_checkout_version", lambda: None)
    assert pytest_llmperf._version() == "0+unknown"


def test_checkout_version_is_pyproject_s() -> None:
    pyproject = Path(pytest_llmperf.__file__).resolve().parents[1] / "pyproject.toml"
    if not pyproject.exists():
        pytest.skip("installed without its source tree")
    expected = tomllib.loads(pyproject.read_text(encoding="utf-8"))["project"]["version"]
    assert pytest_llmperf._checkout_version() == expected


def test_importing_the_package_loads_nothing_heavy() -> None:
    code = (
        "import sys; before = set(sys.modules); import pytest_llmperf; "
        "print(' '.join(sorted(set(sys.modules) - before)))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    loaded = out.stdout.split()
    # no sub-package and nothing third-party (numpy, aiohttp, pytest, ...); which small
    # stdlib modules are new depends on how the package was installed (an editable
    # install's finder has loaded importlib already), so only the heavy ones are named
    ours_or_third_party = [m for m in loaded if m.split(".")[0] not in sys.stdlib_module_names]
    assert ours_or_third_party == ["pytest_llmperf"], loaded
    assert not {"typing", "importlib.metadata", "asyncio", "json"} & set(loaded), loaded


SUB_PACKAGES = (
    "analysis",
    "client",
    "loadgen",
    "methodology",
    "metrics",
    "reports",
    "results",
    "sim",
    "slo",
    "specs",
    "workloads",
)
# names a sub-package re-exports from a lower layer, on purpose
RE_EXPORTS = {
    ("slo", "min_samples"),  # the rule verdicts apply; it lives with the histograms
    ("loadgen", "RunResult"),  # what a run returns; it lives in results/ (issue 38)
    ("client", "RequestFields"),  # the fields a body carries; they live in apis/ (issue 38)
}


@pytest.mark.parametrize("package", SUB_PACKAGES)
def test_each_sub_package_exports_its_own_names(package: str) -> None:
    module = importlib.import_module(f"pytest_llmperf.{package}")
    names = module.__all__
    assert len(names) == len(set(names))
    for name in names:
        value = getattr(module, name)  # every listed name resolves
        defined = inspect.isclass(value) or inspect.isfunction(value)
        if defined and (package, name) not in RE_EXPORTS:
            assert value.__module__.startswith(module.__name__ + "."), (name, value.__module__)
