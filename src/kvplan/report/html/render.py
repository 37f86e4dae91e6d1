"""jinja2 environment and the page renderers. Templates live beside this module; autoescape everywhere."""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path
from typing import Any

TEMPLATES = Path(__file__).with_name("templates")


@lru_cache(maxsize=1)
def env() -> Any:
    import jinja2

    e = jinja2.Environment(loader=jinja2.FileSystemLoader(str(TEMPLATES)), autoescape=True,
                           undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True)
    e.filters["json_script"] = json_script
    e.globals["asset"] = asset
    return e


def json_script(data: Any) -> Any:
    """JSON safe inside <script type="application/json">: no '</script>' or '<!--' can close it."""
    from markupsafe import Markup

    s = json.dumps(data, separators=(",", ":"), ensure_ascii=False)
    return Markup(s.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026"))


@lru_cache(maxsize=8)
def _asset_text(name: str) -> str:
    return (TEMPLATES / name).read_text(encoding="utf-8")


def asset(name: str) -> Any:
    """A CSS or JS file of ours, inlined (the report is one file and loads nothing)."""
    from markupsafe import Markup

    return Markup(_asset_text(name))


def render_page(kind: str, data: dict[str, Any]) -> str:
    from kvplan.report.html.views import view

    html: str = env().get_template(f"{'check' if kind == 'plan' else kind}.html.j2").render(
        data=data, **view(kind, data))
    return html


def render_check_fragment(data: dict[str, Any]) -> str:
    """The charts, figures, findings and command of one check JSON, for the serve page."""
    from kvplan.report.html.views import check_body

    html: str = env().get_template("_check_body.html.j2").render(**check_body(data))
    return html
