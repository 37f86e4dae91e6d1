"""Small line charts over a window (diagnose): one line per source (DP group, engine), x in seconds."""

from __future__ import annotations

from dataclasses import dataclass

from kvplan.report.html import fmt
from kvplan.report.html.svg import WIDTH, Scale, Svg

LINE_COLORS = ("#4c72b0", "#dd8452", "#55a868", "#c44e52", "#8172b3", "#937860", "#da8bc3", "#8c8c8c")
H, TOP, LEFT, RIGHT, BOTTOM = 130, 22, 70, 24, 26


@dataclass(frozen=True)
class Series:
    source: str
    points: tuple[tuple[float, float], ...]  # (seconds from the window start, value)


def line_chart(id_: str, title: str, series: list[Series], unit: str, x_unit: str = "s") -> Svg:
    svg = Svg(id=id_, height=H)
    pts = [p for s in series for p in s.points]
    svg.text(LEFT, 14, title, size=12, font_weight="bold", class_="chart-title")
    if not pts:
        svg.text(WIDTH / 2, H / 2, "no samples of this figure in the window", anchor="middle", fill="#777")
        return svg
    t_hi = max(p[0] for p in pts) or 1.0
    v_hi = max(p[1] for p in pts) or 1.0
    tk = fmt.ticks(v_hi, 3)
    v_top = max(v_hi, tk[-1])
    x, y = Scale(0, t_hi, LEFT, WIDTH - RIGHT), Scale(0, v_top * 1.05, H - BOTTOM, TOP)
    for t in tk:
        svg.line(LEFT, y(t), WIDTH - RIGHT, y(t), stroke="#e5e5e5")
        svg.text(LEFT - 6, y(t) + 4, f"{t:,.0f}" if v_top >= 10 else f"{t:g}", anchor="end", size=10, fill="#555")
    for t in fmt.ticks(t_hi, 6):
        svg.text(x(t), H - BOTTOM + 14, f"{t:,.0f}", anchor="middle", size=10, fill="#555")
    svg.text(WIDTH - RIGHT, H - 2, x_unit, anchor="end", size=10, fill="#555")
    svg.text(LEFT - 6, TOP - 8, unit, anchor="end", size=10, fill="#555")
    for i, s in enumerate(series):
        color = LINE_COLORS[i % len(LINE_COLORS)]
        coords = " ".join(f"{x(t):.1f},{y(v):.1f}" for t, v in s.points)
        svg.add("polyline", s.source or "all", points=coords, fill="none", stroke=color, stroke_width=1.6,
                class_="series", data_source=s.source, data_points=len(s.points))
        if len(s.points) == 1:
            t, v = s.points[0]
            svg.add("circle", s.source, cx=x(t), cy=y(v), r=3, fill=color)
    return svg
