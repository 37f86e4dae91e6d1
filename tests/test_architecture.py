"""The house rules that keep one package per engine (issue 11), checked on the source itself:

- outside ``src/kvplan/engines/`` no code names an engine: no string literal equal to an engine's registry name
  (what ``== "sglang"`` branches and ``{"vllm": ...}`` tables were made of);
- no private name (``_x``) is imported across packages;
- the public API is typed: ``check`` and ``plan`` return a CheckResult, never Any, and ``kvplan`` re-exports it;
- the import contracts (no cycles, engines never import upward) hold: ``lint-imports``.
"""

from __future__ import annotations

import ast
import shutil
import subprocess
import sys
import typing
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src" / "kvplan"
ENGINES = SRC / "engines"


def _modules(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*.py") if "__pycache__" not in p.parts)


def _module_name(path: Path) -> str:
    rel = path.relative_to(SRC.parent).with_suffix("")
    parts = list(rel.parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def test_no_engine_is_named_outside_the_engine_packages():
    from kvplan.engines import ENGINES as registry

    names = set(registry)
    hits = []
    for path in _modules(SRC):
        if ENGINES in path.parents:
            continue
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value.lower() in names:
                hits.append(f"{path.relative_to(SRC)}:{node.lineno}: {node.value!r}")
    assert hits == [], "engine names outside kvplan/engines/ (ask the registry instead):\n" + "\n".join(hits)


def test_no_private_import_across_packages():
    hits = []
    for path in _modules(SRC):
        me = _module_name(path)
        package = me if path.name == "__init__.py" else me.rsplit(".", 1)[0]
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if not isinstance(node, ast.ImportFrom) or not (node.module or "").startswith("kvplan"):
                continue
            source_package = node.module.rsplit(".", 1)[0] if node.module != package else package
            for alias in node.names:
                if alias.name.startswith("_") and not alias.name.startswith("__") and source_package != package \
                        and node.module != package:
                    hits.append(f"{path.relative_to(SRC)}:{node.lineno}: from {node.module} import {alias.name}")
    assert hits == [], "\n".join(hits)


def test_public_api_is_typed():
    import kvplan
    from kvplan import api
    from kvplan.result import CheckResult

    assert (SRC / "py.typed").is_file()
    for fn in (api.check, api.plan):
        assert typing.get_type_hints(fn)["return"] is CheckResult
    assert kvplan.check is api.check and kvplan.CheckResult is CheckResult
    assert issubclass(kvplan.KvplanError, Exception) and set(kvplan.__all__) >= {"check", "plan", "CheckResult",
                                                                                   "Plan", "KvplanError"}


def test_import_contracts_hold():
    exe = shutil.which("lint-imports") or str(Path(sys.executable).with_name("lint-imports"))  # a test extra
    p = subprocess.run([exe], capture_output=True, text=True, cwd=SRC.parents[1], timeout=300)
    assert p.returncode == 0, p.stdout[-3000:]
    assert "0 broken" in p.stdout
