"""A released wheel read as source: modules by dotted name, parsed with ``ast`` on demand, never imported."""

from __future__ import annotations

import ast
import hashlib
import zipfile
from functools import cached_property
from pathlib import Path


class WheelSource:
    """The Python modules of one wheel (``zipfile``: nothing is unpacked, nothing is executed)."""

    def __init__(self, path: Path):
        self.path = Path(path)
        self._zip = zipfile.ZipFile(self.path)
        self._names = set(self._zip.namelist())
        self._trees: dict[str, ast.Module | None] = {}

    @property
    def file_name(self) -> str:
        return self.path.name

    @property
    def version(self) -> str:
        return self.path.name.split("-")[1]

    @cached_property
    def sha256(self) -> str:
        h = hashlib.sha256()
        with open(self.path, "rb") as f:
            for chunk in iter(lambda: f.read(1 << 20), b""):
                h.update(chunk)
        return h.hexdigest()

    def module_file(self, module: str) -> str | None:
        base = module.replace(".", "/")
        for cand in (base + ".py", base + "/__init__.py"):
            if cand in self._names:
                return cand
        return None

    def is_package(self, module: str) -> bool:
        return (module.replace(".", "/") + "/__init__.py") in self._names

    def has_module(self, module: str) -> bool:
        return self.module_file(module) is not None

    def text(self, module: str) -> str | None:
        f = self.module_file(module)
        return self._zip.read(f).decode("utf-8", "replace") if f else None

    def tree(self, module: str) -> ast.Module | None:
        if module not in self._trees:
            src = self.text(module)
            try:
                self._trees[module] = ast.parse(src) if src is not None else None
            except SyntaxError:
                self._trees[module] = None
        return self._trees[module]

    def modules_under(self, package: str) -> list[str]:
        """Dotted names of the modules inside ``package`` (one level and below)."""
        prefix = package.replace(".", "/") + "/"
        out = []
        for n in sorted(self._names):
            if n.startswith(prefix) and n.endswith(".py"):
                mod = n[:-3].replace("/", ".")
                out.append(mod[: -len(".__init__")] if mod.endswith(".__init__") else mod)
        return out
