"""Self-contained SVG charts (no plotting library, no network): what the benchmarks draw."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from html import escape

__all__ = ["line_chart_svg"]

_COLORS = ("#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f")


def _ticks(lo: float, hi: float, log: bool) -> list[float]:
    if log:
        return [10.0 ** k for k in range(math.floor(math.log10(lo)), math.ceil(math.log10(hi)) + 1)]
    step = 10 ** math.floor(math.log10(max(hi - lo, 1e-12)))
    while (hi - lo) / step > 8:
        step *= 2
    start = math.floor(lo / step) * step
    return [start + i * step for i in range(int((hi - start) / step) + 2)]


def _label(v: float) -> str:
    if v >= 1e6:
        return f"{v / 1e6:g}M"
    if v >= 1e3:
        return f"{v / 1e3:g}k"
    return f"{v:g}"


def line_chart_svg(series: Mapping[str, Sequence[tuple[float, float]]], *, title: str, x_label: str, y_label: str,
                   log_x: bool = True, log_y: bool = True, width: int = 720, height: int = 440) -> str:
    """One line (with markers) per series of ``(x, y)`` points; logarithmic axes by default.
    Points with a non-positive coordinate on a logarithmic axis are left out."""
    pts = {name: [(x, y) for x, y in values if (x > 0 or not log_x) and (y > 0 or not log_y)
                  and math.isfinite(x) and math.isfinite(y)] for name, values in series.items()}
    xs = [x for v in pts.values() for x, _ in v]
    ys = [y for v in pts.values() for _, y in v]
    if not xs:
        raise ValueError("line_chart_svg needs at least one finite point")
    left, right, top, bottom = 70, 190, 40, 55
    w, h = width - left - right, height - top - bottom
    xt, yt = _ticks(min(xs), max(xs), log_x), _ticks(min(ys), max(ys), log_y)
    x0, x1 = (min(xt), max(xt)) if log_x else (min(min(xs), xt[0]), max(max(xs), xt[-1]))
    y0, y1 = (min(yt), max(yt)) if log_y else (min(min(ys), yt[0]), max(max(ys), yt[-1]))

    def fx(x: float) -> float:
        a, b, v = (math.log10(x0), math.log10(x1), math.log10(x)) if log_x else (x0, x1, x)
        return left + (v - a) / ((b - a) or 1.0) * w

    def fy(y: float) -> float:
        a, b, v = (math.log10(y0), math.log10(y1), math.log10(y)) if log_y else (y0, y1, y)
        return top + h - (v - a) / ((b - a) or 1.0) * h

    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
           f'viewBox="0 0 {width} {height}" font-family="sans-serif" font-size="12">',
           f'<rect width="{width}" height="{height}" fill="white"/>',
           f'<text x="{left + w / 2}" y="22" text-anchor="middle" font-size="15">{escape(title)}</text>']
    for t in xt:
        if x0 <= t <= x1:
            out.append(f'<line x1="{fx(t):.1f}" y1="{top}" x2="{fx(t):.1f}" y2="{top + h}" stroke="#e5e5e5"/>')
            out.append(f'<text x="{fx(t):.1f}" y="{top + h + 18}" text-anchor="middle">{_label(t)}</text>')
    for t in yt:
        if y0 <= t <= y1:
            out.append(f'<line x1="{left}" y1="{fy(t):.1f}" x2="{left + w}" y2="{fy(t):.1f}" stroke="#e5e5e5"/>')
            out.append(f'<text x="{left - 8}" y="{fy(t) + 4:.1f}" text-anchor="end">{_label(t)}</text>')
    out.append(f'<rect x="{left}" y="{top}" width="{w}" height="{h}" fill="none" stroke="#444"/>')
    out.append(f'<text x="{left + w / 2}" y="{height - 12}" text-anchor="middle">{escape(x_label)}</text>')
    out.append(f'<text x="18" y="{top + h / 2}" text-anchor="middle" transform="rotate(-90 18 {top + h / 2})">'
               f'{escape(y_label)}</text>')
    for k, (name, values) in enumerate(pts.items()):
        color = _COLORS[k % len(_COLORS)]
        if values:
            path = " ".join(f"{'M' if i == 0 else 'L'}{fx(x):.1f},{fy(y):.1f}" for i, (x, y) in enumerate(values))
            out.append(f'<path d="{path}" fill="none" stroke="{color}" stroke-width="2"/>')
            out.extend(f'<circle cx="{fx(x):.1f}" cy="{fy(y):.1f}" r="3.5" fill="{color}"/>' for x, y in values)
        ly = top + 14 + 20 * k
        out.append(f'<line x1="{left + w + 14}" y1="{ly - 4}" x2="{left + w + 34}" y2="{ly - 4}" stroke="{color}" '
                   f'stroke-width="2"/>')
        out.append(f'<text x="{left + w + 40}" y="{ly}">{escape(name)}</text>')
    out.append("</svg>")
    return "\n".join(out) + "\n"
