"""The HTML report: self-contained, escaped, and its SVG plots really drawn by a browser."""

from __future__ import annotations

import subprocess
from pathlib import Path

from chromium import browser, flags, needs_chromium, probe

from pytest_llmperf.reports.html import build_html_report, write_html_report
from pytest_llmperf.reports.json_report import build_report
from pytest_llmperf.reports.session_data import SessionData

# per run: 4 CDFs + 4 histograms + 2 throughput- and 2 latency-over-time + 1 schedule-lag CDF
PLOTS_PER_RUN = 13


def render(data: SessionData) -> tuple[dict, str]:
    endpoint = data.tests[next(iter(data.tests))].endpoint
    report = build_report(
        data, endpoint=endpoint, session={"exitstatus": 1, "options": {"scale": 1.0}}
    )
    return report, build_html_report(report, data)


def test_html_is_one_self_contained_file(session_data: SessionData) -> None:
    _, html = render(session_data)
    lowered = html.lower()
    for external in ("<script", "<link", " src=", "url(", "@import", "<iframe", "<img"):
        assert external not in lowered, external
    assert lowered.count('<svg class="plot"') == PLOTS_PER_RUN * 4 + 2  # + load curve + analysis


def test_html_escapes_test_ids_and_shows_every_section(session_data: SessionData) -> None:
    _, html = render(session_data)
    assert "<b>x</b>" not in html and "&lt;b&gt;x&lt;/b&gt;" in html
    for text in (
        "Session summary",
        "Merged per endpoint and model",
        "ttft.p50 &lt; 10ms",  # the failing SLO of the first test
        "✗ fail",
        "Latency CDFs",
        "Latency histograms",
        "Throughput over time",
        "Load-generator self-check",
        "Latency vs load",
        "latency vs rate",  # the attached curve analysis
        "Run configuration",
        "=== LLM Benchmark Report (Minimum) ===",
        "http_error × 1",
    ):
        assert text in html, text


def test_no_api_key_in_the_html(session_data: SessionData, tmp_path: Path) -> None:
    report, _ = render(session_data)
    path = write_html_report(tmp_path / "r" / "report.html", report, session_data)
    assert "Bearer" not in path.read_text() and "sk-" not in path.read_text()


PROBE = """
<pre id="probe"></pre>
<script>
const out = [];
for (const svg of document.querySelectorAll("svg.plot")) {
  const shapes = [...svg.querySelectorAll("path.series, rect.bar")];
  const drawn = shapes.filter(s => { const b = s.getBBox(); return b.width > 0 || b.height > 0; });
  const box = svg.getBoundingClientRect();
  out.push({kind: svg.dataset.kind, shapes: shapes.length, drawn: drawn.length,
            width: box.width, height: box.height});
}
document.getElementById("probe").textContent = JSON.stringify(out);
</script>
"""


@needs_chromium
def test_chromium_draws_every_plot(session_data: SessionData, tmp_path: Path) -> None:
    """Render in headless Chromium; a probe script measures each plot's drawn shapes."""
    _, html = render(session_data)
    plots, page = probe(html, PROBE, tmp_path)
    assert len(plots) == PLOTS_PER_RUN * 4 + 2
    for plot in plots:
        assert plot["width"] > 100 and plot["height"] > 100, plot
        assert plot["shapes"] >= 1 and plot["drawn"] == plot["shapes"], plot
    kinds = {p["kind"] for p in plots}
    assert kinds >= {"cdf", "histogram", "timeline", "latency-vs-load", "analysis"}
    shot = tmp_path / "report.png"
    subprocess.run(
        [
            str(browser()),
            *flags(tmp_path),
            "--hide-scrollbars",
            "--window-size=1400,2000",
            f"--screenshot={shot}",
            page.as_uri(),
        ],
        capture_output=True,
        timeout=120,
        check=True,
    )
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and shot.stat().st_size > 50_000
