"""SVG primitives laid out in Python (testable without a browser); the templates only print them.

An element is ``{"tag": "rect"|"line"|"text"|"polyline"|"path", "attrs": {...}, "title": str, "text": str}``;
jinja2 escapes every attribute and text.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

WIDTH = 960
FONT = 12


@dataclass
class Svg:
    id: str
    width: int = WIDTH
    height: int = 0
    elements: list[dict[str, Any]] = field(default_factory=list)

    def add(self, tag: str, title: str | None = None, text: str | None = None, **attrs: Any) -> None:
        clean = {k.rstrip("_").replace("_", "-"): (round(v, 2) if isinstance(v, float) else v)
                 for k, v in attrs.items() if v is not None}
        self.elements.append({"tag": tag, "attrs": clean, "title": title, "text": text})

    def rect(self, x: float, y: float, w: float, h: float, fill: str, title: str | None = None, **attrs: Any) -> None:
        self.add("rect", title, x=x, y=y, width=max(0.0, w), height=h, fill=fill, **attrs)

    def line(self, x1: float, y1: float, x2: float, y2: float, stroke: str = "#333", width: float = 1,
             **attrs: Any) -> None:
        self.add("line", None, x1=x1, y1=y1, x2=x2, y2=y2, stroke=stroke, stroke_width=width, **attrs)

    def text(self, x: float, y: float, s: str, anchor: str = "start", size: int = FONT, **attrs: Any) -> None:
        self.add("text", None, s, x=x, y=y, text_anchor=anchor, font_size=size, **attrs)


@dataclass(frozen=True)
class Scale:
    """Linear map from a value (bytes, tokens, seconds) to pixels."""

    lo: float
    hi: float
    px0: float
    px1: float

    def __call__(self, v: float) -> float:
        span = (self.hi - self.lo) or 1.0
        return self.px0 + (v - self.lo) / span * (self.px1 - self.px0)
