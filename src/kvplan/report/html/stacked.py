"""Horizontal stacked bars with marks (a fraction, a capacity line), failure bands and an overflow region.

Used for the GPU of each rank and the host memory of each node. Values are bytes; the axis is in GiB.
"""

from __future__ import annotations

from dataclasses import dataclass

from kvplan.report.html import fmt
from kvplan.report.html.svg import WIDTH, Scale, Svg
from kvplan.units import GiB

RED = "#d62728"


@dataclass(frozen=True)
class Segment:
    key: str  # stable id (data-key in the page): weights, kv_pool, rank0, os_reserve, ...
    label: str  # legend text
    bytes: int
    color: str
    value: str = ""  # the figure as the legend prints it (unit included)
    note: str = ""  # where the figure comes from
    short: str = ""  # written inside the first row's bar where it fits


@dataclass(frozen=True)
class Band:
    key: str
    label: str
    start: int  # bytes along the axis
    end: int


@dataclass(frozen=True)
class Mark:
    key: str
    label: str
    at: int  # bytes along the axis
    color: str = "#111"


@dataclass(frozen=True)
class Row:
    label: str
    segments: tuple[Segment, ...]

    @property
    def total(self) -> int:
        return sum(max(0, s.bytes) for s in self.segments)


@dataclass(frozen=True)
class StackedChart:
    id: str
    title: str  # names the scope: "GPU memory of each rank", "host memory of each node"
    rows: tuple[Row, ...]
    legend: tuple[Segment, ...]  # one entry per distinct segment key
    marks: tuple[Mark, ...] = ()
    bands: tuple[Band, ...] = ()  # where the engine would fail (hatched red)
    over: Band | None = None  # what does not fit (solid red)
    capacity: Mark | None = None  # the end of the device / the node's RAM
    summary: tuple[tuple[str, bool], ...] = ()  # (sentence under the title, whether it says something fails)

    @property
    def axis_max(self) -> int:
        ends = [r.total for r in self.rows] + [m.at for m in self.marks] + [b.end for b in self.bands]
        if self.over:
            ends.append(self.over.end)
        if self.capacity:
            ends.append(self.capacity.at)
        return max([1, *ends])


ROW_H, ROW_GAP, LEFT, RIGHT, AXIS_H, TRACK_H = 24, 6, 96, 24, 34, 10


def layout(c: StackedChart) -> Svg:
    n = len(c.rows)
    body_h = n * ROW_H + (n - 1) * ROW_GAP
    top = 36 + (TRACK_H + 6 if c.bands else 0) + (14 if c.marks and c.capacity else 0)
    svg = Svg(id=c.id, height=top + body_h + AXIS_H)
    x = Scale(0, c.axis_max * 1.02, LEFT, WIDTH - RIGHT)
    y_top, y_bot = top - 4, top + body_h + 4
    if c.bands:  # a track above the bars: where the mark (fraction / utilization) makes the engine fail
        ty = top - TRACK_H - 6
        svg.rect(LEFT, ty, WIDTH - RIGHT - LEFT, TRACK_H, "#e8f5e9", class_="track")
        svg.text(LEFT - 8, ty + TRACK_H - 1, "engine fails", anchor="end", size=10, fill=RED, class_="track-label")
        for b in c.bands:
            svg.rect(x(b.start), ty, x(b.end) - x(b.start), TRACK_H, "url(#hatch-red)", title=b.label,
                     class_="band", stroke=RED, stroke_width=0.8, data_key=b.key, data_start_bytes=b.start,
                     data_end_bytes=b.end)
        y_top = ty - 2
    for i, row in enumerate(c.rows):
        y = top + i * (ROW_H + ROW_GAP)
        svg.text(LEFT - 8, y + ROW_H * 0.68, row.label, anchor="end", class_="row-label")
        at = 0
        for s in row.segments:
            if s.bytes <= 0:
                continue
            w = x(at + s.bytes) - x(at)
            svg.rect(x(at), y, w, ROW_H, s.color, title=f"{row.label} · {s.label}: {s.value}", class_="seg",
                     stroke="#fff", stroke_width=0.6, data_key=s.key, data_bytes=s.bytes, data_row=i)
            if i == 0 and s.short and w >= 6.5 * len(s.short) + 8:
                svg.text(x(at) + w / 2, y + ROW_H * 0.68, s.short, anchor="middle", size=11,
                         fill="#fff" if _dark(s.color) else "#111", class_="seg-label", pointer_events="none")
            at += s.bytes
    if c.over is not None:
        o = c.over
        svg.rect(x(o.start), top - 4, x(o.end) - x(o.start), y_bot - top + 4, RED, title=o.label, class_="over",
                 fill_opacity=0.3, stroke=RED, stroke_width=1.5, data_key=o.key, data_start_bytes=o.start,
                 data_end_bytes=o.end)
        svg.text(min(x(o.end) - 4, (x(o.start) + x(o.end)) / 2), y_bot + 13, o.label, anchor="middle",
                 fill=RED, class_="over-label", font_weight="bold")
    label_y = y_top - 8
    for m in [*c.marks, *([c.capacity] if c.capacity else [])]:
        xm = x(m.at)
        is_cap = m is c.capacity
        svg.line(xm, y_top - 2, xm, y_bot, stroke=m.color, width=2.5 if is_cap else 2, class_="mark",
                 data_key=m.key, data_bytes=m.at)
        anchor = "end" if xm > WIDTH * 0.7 else "start"
        svg.text(xm + (-4 if anchor == "end" else 4), label_y - (14 if is_cap and c.marks else 0), m.label,
                 anchor=anchor, fill=m.color, class_="mark-label", data_key=m.key)
    _axis(svg, x, c.axis_max * 1.02, y_bot + (18 if c.over else 4))
    return svg


def _dark(color: str) -> bool:
    """True for a fill on which white text reads better (relative luminance below one half)."""
    try:
        r, g, b = (int(color[k:k + 2], 16) / 255 for k in (1, 3, 5))
    except ValueError:
        return False
    return 0.2126 * r + 0.7152 * g + 0.0722 * b < 0.5


def _axis(svg: Svg, x: Scale, hi_bytes: float, y: float) -> None:
    hi = hi_bytes / GiB
    svg.line(LEFT, y, WIDTH - RIGHT, y, stroke="#999")
    for t in fmt.ticks(hi):
        xt = x(t * GiB)
        svg.line(xt, y, xt, y + 4, stroke="#999")
        svg.text(xt, y + 16, f"{t:,.0f}" if hi >= 10 else f"{t:g}", anchor="middle", size=10, fill="#555")
    svg.text(WIDTH - RIGHT, y + 30, "GiB", anchor="end", size=10, fill="#555")
    svg.height = int(y + 34)
