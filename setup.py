"""The compiled per-read path of the client (pytest_llmperf/client/_speedups.pyx).

Everything else is in pyproject.toml. The extension is optional: where Cython or a
C compiler is missing, or ``LLMPERF_PURE_PYTHON=1`` is set at build time, the
package installs without it and the client runs the same code in pure Python
(pytest_llmperf/client/_speedups_py.py; pytest_llmperf/client/speedups.py chooses).
"""

from __future__ import annotations

import os

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

SOURCE = "pytest_llmperf/client/_speedups.pyx"


class _OptionalBuildExt(build_ext):
    """A failed build of the extension is a note, not a failed install (setuptools'
    ``optional=True`` lets some compiler failures through: a missing or failing compiler
    ends as a ``CalledProcessError``)."""

    def run(self) -> None:
        try:
            super().run()
        except Exception as exc:
            _not_built(exc)

    def build_extension(self, ext: Extension) -> None:
        try:
            super().build_extension(ext)
        except Exception as exc:
            _not_built(exc)


def _not_built(exc: Exception) -> None:
    print(
        f"pytest-llmperf: the compiled per-read path was not built ({type(exc).__name__}: "
        f"{exc}); the client runs its pure-Python twin"
    )


def _extensions() -> list[Extension]:
    if os.environ.get("LLMPERF_PURE_PYTHON", "").strip().lower() in ("1", "true", "yes", "on"):
        return []
    try:
        from Cython.Build import cythonize
    except ImportError:  # a build without Cython (pyproject asks for it): pure Python
        print("pytest-llmperf: Cython is not installed; the client's per-read path stays Python")
        return []
    # optional: a compiler error is a warning, and the install goes on without it
    ext = Extension("pytest_llmperf.client._speedups", [SOURCE], optional=True)
    return list(cythonize([ext], compiler_directives={"language_level": "3"}, quiet=True))


setup(ext_modules=_extensions(), cmdclass={"build_ext": _OptionalBuildExt})
