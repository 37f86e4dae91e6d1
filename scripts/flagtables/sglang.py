"""SGLang: the parser ``python -m sglang.launch_server`` builds, read from one wheel.

Entry: the ``__main__`` block of ``sglang/launch_server.py`` (0.3.x builds ``argparse.ArgumentParser()`` there;
0.4.x+ calls ``srt/server_args.py::prepare_server_args``), run up to ``parse_args``. ``ServerArgs.add_cli_args``
lists each flag (<= 0.5.1x) or derives them from dataclass fields (``arg_groups/arg_utils.py::
add_cli_args_from_dataclass``; 0.5.23 assembles ServerArgs from the namespace classes in ``_INPUT_NAMESPACES``).
``sglang serve`` (``sglang/cli/serve.py``) hands the same argv to ``prepare_server_args``.
"""

from __future__ import annotations

from typing import Any

from flagtables.interp import Interp
from flagtables.normalize import normalize
from flagtables.source import WheelSource
from flagtables.values import ClassRef

ENTRY = "sglang.launch_server"


def extract(src: WheelSource) -> dict[str, Any]:
    it = Interp(src, overrides={
        # record_fields() asks msgspec/dataclasses at run time; the class bodies say the same statically
        "sglang.srt.arg_groups.arg_utils.record_fields":
            lambda it_, cls: it_.fields_of(cls) if isinstance(cls, ClassRef) else (),
    })

    def sources(cls: ClassRef) -> list[ClassRef]:
        if cls.name != "ServerArgs":
            return []
        ns = it.global_(cls.module, "_INPUT_NAMESPACES")  # 0.5.2x: ServerArgs = the namespaces' fields
        return [c for n in ns if isinstance(n, ClassRef) for c in reversed(it.mro(n))] if isinstance(ns, list) else []

    it.field_sources = sources
    it.run_main(ENTRY)
    if not it.parsers:
        raise RuntimeError(f"{src.file_name}: no ArgumentParser built by {ENTRY}")
    parser = max(it.parsers, key=lambda p: len(p.args))
    specs = [normalize(a.option_strings, a.kwargs) for a in parser.args if any(o.startswith("-")
                                                                             for o in a.option_strings)]
    specs.append({"opts": ["-h", "--help"], "action": "help"})  # argparse add_help (never turned off)
    positionals = [a.option_strings[0] for a in parser.args if not a.option_strings[0].startswith("-")]
    allow_abbrev = parser.ctor.get("allow_abbrev", True)
    return {
        "parser": {"entry": f"python -m {ENTRY}", "allow_abbrev": allow_abbrev if isinstance(allow_abbrev, bool)
                   else True, "underscores": False, "dotted_json": False},
        "specs": specs,
        "positionals": positionals,
        "warnings": it.warnings,
    }
