"""Headless Chromium for the HTML report's tests: find it, and read what a probe script saw.

The report's plots are SVG drawn by the page itself; only a browser can say
they really render. A test appends a probe script that writes what it measured
as JSON into ``<pre id="probe">``, and :func:`probe` returns that JSON from the
page's DOM after Chromium has run it.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

__all__ = ["browser", "flags", "needs_chromium", "probe"]


def browser() -> str | None:
    for name in ("chromium", "chromium-browser", "google-chrome", "chrome"):
        path = shutil.which(name)
        if path:
            return path
    return None


needs_chromium = pytest.mark.skipif(
    browser() is None, reason="no chromium binary (Debian package 'chromium')"
)


def flags(tmp_path: Path) -> list[str]:
    """Headless, sandbox-free, offline, with a profile of its own under ``tmp_path``."""
    return [
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-background-networking",
        "--no-first-run",
        f"--user-data-dir={tmp_path / 'profile'}",
    ]


def probe(html: str, script: str, tmp_path: Path) -> tuple[Any, Path]:
    """Render ``html`` with ``script`` before ``</body>``; the probe's JSON and the page."""
    page = tmp_path / "probe.html"
    page.write_text(html.replace("</body>", script + "</body>"), "utf-8")
    found = browser()
    assert found is not None
    dom = subprocess.run(
        [found, *flags(tmp_path), "--dump-dom", page.as_uri()],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    ).stdout
    match = re.search(r'<pre id="probe">(.*?)</pre>', dom, re.S)
    assert match, "probe did not run"
    return json.loads(match.group(1).replace("&quot;", '"')), page
