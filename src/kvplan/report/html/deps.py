"""The report's and the page's dependencies (jinja2, starlette, uvicorn) are in the default install; an
install that lost one (a venv trimmed by hand, a vendored copy) gets a one-line error with the pip command, never a
traceback."""

from __future__ import annotations

import importlib

from kvplan.errors import KvplanError

EXTRAS = {"html": ("jinja2",), "serve": ("jinja2", "starlette", "uvicorn")}


def require(extra: str, what: str) -> None:
    """Raise KvplanError naming the extra when one of its modules cannot be imported."""
    for mod in EXTRAS[extra]:
        try:
            importlib.import_module(mod)
        except ImportError:
            raise KvplanError(f"{what} needs {mod}, which is not installed",
                              f"pip install '{mod}' (kvplan installs it by default)") from None
