"""Optional dependencies: a one-line error with the pip command when an extra is missing."""

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
                              f"pip install 'kvplan[{extra}]'") from None
