"""Inline SVG plots for the HTML report: no JavaScript, no external assets.

Why hand-written SVG: the report must be one self-contained file that opens
offline and in CI artefact viewers, and a plotting library would be a large
dependency for a few line and bar charts. Every chart is an ``<svg
class="plot">`` whose data series are ``<path class="series">`` (or
``<rect class="bar">``) elements, so tests can check in a browser that
something was drawn.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from html import escape

__all__ = ["PALETTE", "Band", "Series", "bar_chart", "line_chart", "nice_ticks", "tick_labels"]

PALETTE = ("#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#17becf")
_W, _H = 315, 220
_M_LEFT, _M_RIGHT, _M_TOP, _M_BOTTOM = 58, 14, 26, 40


@dataclass(frozen=True)
class Series:
    """One line: a name for the legend and its (x, y) points."""

    name: str
    points: Sequence[tuple[float, float]]


@dataclass(frozen=True)
class Band:
    """A span of the x axis, shaded and labelled (a load stage on a time axis).

    ``label`` is written inside the band when it fits (else ``short``, else
    nothing); ``title`` is the hover text; ``fill`` a colour of its own (a steady-state
    window over the stages' grey bands), "" for the alternating grey.
    """

    start: float
    end: float
    label: str
    short: str = ""
    title: str = ""
    fill: str = ""


_Scale = Callable[[float], float]  # a data value -> its pixel coordinate


def nice_ticks(low: float, high: float, count: int = 5) -> list[float]:
    """Round tick values covering ``[low, high]``: a step of 1, 2 or 5 × 10^k (the first
    of them at least ``(high - low) / count``), every tick a whole multiple of it, so no
    two are equal however narrow the range (20.5–23 ms: 20.5, 21, 21.5 … 23)."""
    if not (math.isfinite(low) and math.isfinite(high)) or high <= low:
        return [low]
    step = _tick_step(low, high, count)
    first = math.ceil(low / step - 1e-9)
    last = math.floor(high / step + 1e-9)
    decimals = _step_decimals(step) + 2  # multiples of the step, without float residue
    return [round(k * step, decimals) for k in range(first, last + 1)]


def _tick_step(low: float, high: float, count: int) -> float:
    raw = (high - low) / max(1, count)
    power = 10.0 ** math.floor(math.log10(raw))
    return next(m * power for m in (1, 2, 5, 10) if m * power >= raw * (1 - 1e-12))


def _step_decimals(step: float) -> int:
    """Decimals a 1-2-5 step needs: 0 for 1, 2, 5, 10 …; 1 for 0.5; 2 for 0.05, 0.02."""
    return max(0, -math.floor(math.log10(step) + 1e-9))


def tick_labels(ticks: Sequence[float]) -> list[str]:
    """Labels for ``ticks`` (as :func:`nice_ticks` makes them), with as many decimals as
    their step needs (0.5 apart: ``20.5 21.0 21.5``) and thousands separated
    (``1,000``): each label reads back its own value, so distinct ticks never read the
    same. A lone tick reads as :func:`_fmt`."""
    steps = [b - a for a, b in itertools.pairwise(ticks) if b > a]
    if not steps:
        return [_fmt(t) for t in ticks]
    step = min(steps)
    decimals = _step_decimals(step)
    while True:
        labels = [f"{t:,.{decimals}f}" for t in ticks]
        exact = all(
            abs(float(label.replace(",", "")) - t) <= step * 1e-6
            for t, label in zip(ticks, labels, strict=True)
        )
        if exact or decimals >= 12:  # a step nice_ticks would not make (0.25): more decimals
            return ["0" if float(label.replace(",", "")) == 0 else label for label in labels]
        decimals += 1


def _fmt(value: float) -> str:
    if value == 0:
        return "0"
    if abs(value) >= 1000:
        return f"{value:,.0f}"
    if abs(value) >= 10:
        return f"{value:.0f}"
    if abs(value) >= 1:
        return f"{value:.1f}".rstrip("0").rstrip(".")
    return f"{value:.3g}"


def _frame(title: str, kind: str, x_label: str, y_label: str) -> list[str]:
    return [
        f'<svg class="plot" data-kind="{escape(kind)}" xmlns="http://www.w3.org/2000/svg" '
        f'viewBox="0 0 {_W} {_H}" width="{_W}" height="{_H}" role="img" '
        f'aria-label="{escape(title)}">',
        f"<title>{escape(title)}</title>",
        f'<text x="{_W / 2}" y="16" text-anchor="middle" class="plot-title">{escape(title)}</text>',
        f'<text x="{(_M_LEFT + _W - _M_RIGHT) / 2}" y="{_H - 6}" text-anchor="middle" '
        f'class="axis-label">{escape(x_label)}</text>',
        f'<text transform="translate(13 {(_M_TOP + _H - _M_BOTTOM) / 2}) rotate(-90)" '
        f'text-anchor="middle" class="axis-label">{escape(y_label)}</text>',
    ]


def _axes(
    x_ticks: Sequence[float],
    y_ticks: Sequence[float],
    sx: _Scale,
    sy: _Scale,
) -> list[str]:
    out = []
    x0, x1, y0, y1 = _M_LEFT, _W - _M_RIGHT, _H - _M_BOTTOM, _M_TOP
    out.append(f'<rect x="{x0}" y="{y1}" width="{x1 - x0}" height="{y0 - y1}" class="plot-bg"/>')
    for t, label in zip(y_ticks, tick_labels(y_ticks), strict=True):
        y = sy(t)
        out.append(f'<line x1="{x0}" x2="{x1}" y1="{y:.1f}" y2="{y:.1f}" class="grid"/>')
        out.append(
            f'<text x="{x0 - 4}" y="{y + 3:.1f}" text-anchor="end" class="tick" '
            f'data-axis="y">{label}</text>'
        )
    for t, label in zip(x_ticks, tick_labels(x_ticks), strict=True):
        x = sx(t)
        out.append(f'<line x1="{x:.1f}" x2="{x:.1f}" y1="{y1}" y2="{y0}" class="grid"/>')
        out.append(
            f'<text x="{x:.1f}" y="{y0 + 14}" text-anchor="middle" class="tick" '
            f'data-axis="x">{label}</text>'
        )
    out.append(f'<line x1="{x0}" x2="{x1}" y1="{y0}" y2="{y0}" class="axis"/>')
    out.append(f'<line x1="{x0}" x2="{x0}" y1="{y0}" y2="{y1}" class="axis"/>')
    return out


def _scale(low: float, high: float, out_low: float, out_high: float, log: bool = False) -> _Scale:
    if log:
        low, high = math.log10(low), math.log10(high)
    span = (high - low) or 1.0

    def f(v: float) -> float:
        v = math.log10(max(v, 1e-12)) if log else v
        return out_low + (v - low) / span * (out_high - out_low)

    return f


def _empty(title: str, kind: str, x_label: str, y_label: str, why: str) -> str:
    parts = _frame(title, kind, x_label, y_label)
    parts.append(
        f'<text x="{_W / 2}" y="{_H / 2}" text-anchor="middle" class="empty">{escape(why)}</text>'
    )
    parts.append("</svg>")
    return "\n".join(parts)


def line_chart(
    series: Sequence[Series],
    *,
    title: str,
    x_label: str,
    y_label: str,
    kind: str = "line",
    y_range: tuple[float, float] | None = None,
    step: bool = False,
    markers: bool = False,
    bands: Sequence[Band] = (),
) -> str:
    """Lines (or steps, for CDFs) over shared axes, with a legend when there are several.

    ``bands`` shade spans of the x axis (``<rect class="band">``, alternate
    ones darker, a line at each start) under the lines; the x axis widens to
    hold them.
    """
    pts = [(x, y) for s in series for x, y in s.points if math.isfinite(x) and math.isfinite(y)]
    if not pts:
        return _empty(title, kind, x_label, y_label, "no data")
    bands = [b for b in bands if math.isfinite(b.start) and math.isfinite(b.end)]
    xs, ys = [p[0] for p in pts], [p[1] for p in pts]
    xs += [x for b in bands for x in (b.start, b.end)]
    x_low, x_high = min(xs), max(xs)
    if x_high == x_low:
        x_low, x_high = x_low - 1 if x_low >= 1 else 0, x_high + 1
    y_low, y_high = y_range if y_range else (min(0.0, min(ys)), max(ys) * 1.05 or 1.0)
    x_ticks = nice_ticks(x_low, x_high)
    y_ticks = nice_ticks(y_low, y_high, 4)
    if not y_range:
        y_high = max(y_high, y_ticks[-1])
    sx = _scale(x_low, x_high, _M_LEFT, _W - _M_RIGHT)
    sy = _scale(y_low, y_high, _H - _M_BOTTOM, _M_TOP)
    parts = _frame(title, kind, x_label, y_label)
    parts += _axes([t for t in x_ticks if x_low <= t <= x_high], y_ticks, sx, sy)
    parts += _bands(bands, sx)
    for i, s in enumerate(series):
        color = PALETTE[i % len(PALETTE)]
        points = [(x, y) for x, y in s.points if math.isfinite(x) and math.isfinite(y)]
        if not points:
            continue
        d = []
        prev_y = None
        for j, (x, y) in enumerate(points):
            px, py = sx(x), sy(y)
            if j == 0:
                d.append(f"M{px:.1f},{py:.1f}")
            elif step and prev_y is not None:
                d.append(f"H{px:.1f}V{py:.1f}")
            else:
                d.append(f"L{px:.1f},{py:.1f}")
            prev_y = py
        parts.append(
            f'<path class="series" data-series="{escape(s.name)}" d="{"".join(d)}" '
            f'fill="none" stroke="{color}" stroke-width="1.8"/>'
        )
        if markers or len(points) == 1:
            for x, y in points:
                parts.append(f'<circle cx="{sx(x):.1f}" cy="{sy(y):.1f}" r="2.6" fill="{color}"/>')
    if len(series) > 1:
        for i, s in enumerate(series):
            y = _M_TOP + 10 + 13 * i
            color = PALETTE[i % len(PALETTE)]
            x = _M_LEFT + 8
            parts.append(
                f'<line x1="{x}" x2="{x + 14}" y1="{y}" y2="{y}" '
                f'stroke="{color}" stroke-width="2"/>'
            )
            parts.append(f'<text x="{x + 18}" y="{y + 3}" class="legend">{escape(s.name)}</text>')
    parts.append("</svg>")
    return "\n".join(parts)


def _bands(bands: Sequence[Band], sx: _Scale) -> list[str]:
    """Shaded spans with a boundary line at each start and a label at the top when it fits."""
    out: list[str] = []
    top, bottom = _M_TOP, _H - _M_BOTTOM
    for i, b in enumerate(bands):
        x0, x1 = sx(b.start), sx(b.end)
        width = max(0.0, x1 - x0)
        hover = f"<title>{escape(b.title or b.label)}</title>"
        fill, opacity = (b.fill, 0.14) if b.fill else ("#8a939c", 0.16 if i % 2 else 0.07)
        out.append(
            f'<rect class="band" data-band="{escape(b.label)}" x="{x0:.1f}" y="{top}" '
            f'width="{width:.1f}" height="{bottom - top}" fill="{fill}" '
            f'fill-opacity="{opacity}">{hover}</rect>'
        )
        if i:
            out.append(
                f'<line x1="{x0:.1f}" x2="{x0:.1f}" y1="{top}" y2="{bottom}" class="band-edge" '
                'stroke="#6b7480" stroke-width="1" stroke-dasharray="3 2"/>'
            )
        # at the bottom of the plot (the legend is at the top); ~5 px a character at 9 px
        text = next((t for t in (b.label, b.short) if t and len(t) * 5 + 4 <= width), "")
        if text:
            out.append(
                f'<text x="{x0 + width / 2:.1f}" y="{bottom - 4}" text-anchor="middle" '
                f'class="band-label" font-size="9">{escape(text)}</text>'
            )
    return out


def bar_chart(
    bins: Sequence[tuple[float, float, float]],
    *,
    title: str,
    x_label: str,
    y_label: str,
    kind: str = "histogram",
) -> str:
    """Bars ``(left edge, right edge, height)``: a histogram over value ranges."""
    bins = [b for b in bins if all(math.isfinite(v) for v in b)]
    if not bins:
        return _empty(title, kind, x_label, y_label, "no data")
    x_low, x_high = bins[0][0], bins[-1][1]
    if x_high <= x_low:
        x_high = x_low + 1
    y_high = max(b[2] for b in bins) or 1.0
    y_ticks = nice_ticks(0.0, y_high, 4)
    y_high = max(y_high, y_ticks[-1])
    sx = _scale(x_low, x_high, _M_LEFT, _W - _M_RIGHT)
    sy = _scale(0.0, y_high, _H - _M_BOTTOM, _M_TOP)
    parts = _frame(title, kind, x_label, y_label)
    parts += _axes([t for t in nice_ticks(x_low, x_high) if x_low <= t <= x_high], y_ticks, sx, sy)
    for left, right, height in bins:
        x0, x1 = sx(left), sx(right)
        y = sy(height)
        base = sy(0.0)
        parts.append(
            f'<rect class="bar" x="{x0:.1f}" y="{y:.1f}" width="{max(0.6, x1 - x0 - 0.4):.1f}" '
            f'height="{max(0.0, base - y):.1f}" fill="{PALETTE[0]}"/>'
        )
    parts.append("</svg>")
    return "\n".join(parts)
