"""The planning page: rendered once from a template beside this module, with the report's CSS and macros."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Any

HERE = Path(__file__).with_name("templates")
DEFAULT = {"command": "python -m sglang.launch_server --model-path moonshotai/Kimi-K2.5 --tp 8 "
                      "--mem-fraction-static 0.93 --enable-hierarchical-cache --hicache-size 300 "
                      "--hicache-write-policy write_through --hicache-io-backend kernel --trust-remote-code",
           "gpu": "NVIDIA RTX PRO 6000 Blackwell Server Edition", "host_mem_gib": 449, "engine_version": "0.5.9"}


@lru_cache(maxsize=1)
def _env() -> Any:
    import jinja2

    from kvplan.report.html.render import TEMPLATES, asset

    e = jinja2.Environment(loader=jinja2.ChoiceLoader([jinja2.FileSystemLoader(str(HERE)),
                                                       jinja2.FileSystemLoader(str(TEMPLATES))]),
                           autoescape=True, undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True)
    e.globals["asset"] = asset
    return e


def asset_text(name: str) -> str:
    from kvplan.report.html.render import TEMPLATES

    p = HERE / name if (HERE / name).is_file() else TEMPLATES / name
    return p.read_text(encoding="utf-8")


@lru_cache(maxsize=1)
def render_index() -> str:
    from kvplan.hardware.gpus import known_gpus

    html: str = _env().get_template("page.html.j2").render(gpus=known_gpus(), default=DEFAULT)
    return html
