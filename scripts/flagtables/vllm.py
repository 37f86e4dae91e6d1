"""vLLM: the parser ``python -m vllm.entrypoints.openai.api_server`` and ``vllm serve`` build, read from one wheel.

Entry: the ``__main__`` block of ``vllm/entrypoints/openai/api_server.py`` (0.32+: it calls
``entrypoints/launchers/api_server/entry.py::main``), run up to ``parse_args``: ``FlexibleArgumentParser`` +
``make_arg_parser`` (``entrypoints/openai/cli_args.py``, later ``entrypoints/launchers/cli_args.py``) =
``FrontendArgs.add_cli_args`` + ``AsyncEngineArgs.add_cli_args`` -> ``EngineArgs.add_cli_args``
(``engine/arg_utils.py``). From ~0.8 the engine flags are derived from config dataclass fields
(``get_kwargs``/``_compute_kwargs``): the interpreter runs that code too, over the class bodies.
``vllm serve`` (``entrypoints/cli/serve.py``) adds ``model_tag`` and, in some versions, ``--config`` before
``make_arg_parser``; its flags are merged in.

What the front end accepts besides the option strings is read from ``FlexibleArgumentParser.parse_args``
(``utils/argparse_utils.py``, ``utils/__init__.py`` before): underscores -> dashes in ``--x_y``, dotted JSON keys
(``--compilation-config.level 3``), ``-O3``.
"""

from __future__ import annotations

import ast
import re
from typing import Any

from flagtables.interp import Interp
from flagtables.normalize import normalize
from flagtables.source import WheelSource
from flagtables.values import ClassRef, ParserRec

ENTRY = "vllm.entrypoints.openai.api_server"
SERVE = "vllm.entrypoints.cli.serve"


def _flexible_parser_source(src: WheelSource) -> str:
    for mod in ("vllm.utils.argparse_utils", "vllm.utils", "vllm.utils.__init__"):
        tree = src.tree(mod)
        if tree is None:
            continue
        for node in tree.body:
            if isinstance(node, ast.ClassDef) and node.name == "FlexibleArgumentParser":
                return ast.unparse(node)
    return ""


def front_end(src: WheelSource, ctor: dict[str, Any]) -> dict[str, Any]:
    """What FlexibleArgumentParser.parse_args does to argv before argparse sees it (read from its source)."""
    text = _flexible_parser_source(src)
    parse = text[text.find("def parse_args"):]
    parse = parse[: parse.find("\n    def ", 10)] if "\n    def " in parse[10:] else parse
    allow_abbrev = ctor.get("allow_abbrev", True)
    m = re.search(r"allow_abbrev['\"]?\s*[:=]\s*(True|False)", text)
    if m:  # FlexibleArgumentParser.__init__ forcing it
        allow_abbrev = m.group(1) == "True"
    return {
        "entry": f"python -m {ENTRY} | vllm serve",
        "allow_abbrev": allow_abbrev if isinstance(allow_abbrev, bool) else True,
        "underscores": "replace('_', '-')" in parse or 'replace("_", "-")' in parse or "repl" in parse,
        "dotted_json": ".split('.')" in parse or '.split(".")' in parse,
        "minus_O": "startswith('-O')" in parse or 'startswith("-O")' in parse,
        "config_file": "--config" in parse,
    }


def extract(src: WheelSource) -> dict[str, Any]:
    it = Interp(src)
    it.run_main(ENTRY)
    parsers = [p for p in it.parsers if p.args]
    main = max(parsers, key=lambda p: len(p.args)) if parsers else None
    # vllm serve: ServeSubcommand.subparser_init(subparsers) builds its own parser the same way
    serve = _serve_parser(it, src)
    if main is None and serve is None:
        raise RuntimeError(f"{src.file_name}: no parser found")
    args = list(main.args if main else [])
    if serve is not None:
        have = {o for a in args for o in a.option_strings}
        args += [a for a in serve.args if not set(a.option_strings) & have]
    specs = []
    for a in args:
        if not any(o.startswith("-") for o in a.option_strings):
            continue
        spec = normalize(a.option_strings, a.kwargs)
        specs.append(spec)
    specs.append({"opts": ["-h", "--help"], "action": "help"})  # argparse add_help (never turned off)
    positionals = [a.option_strings[0] for a in args if not a.option_strings[0].startswith("-")]
    ctor = (main or serve).ctor  # type: ignore[union-attr]
    return {"parser": front_end(src, ctor), "specs": specs, "positionals": positionals, "warnings": it.warnings}


def _serve_parser(it: Interp, src: WheelSource) -> ParserRec | None:
    if not src.has_module(SERVE):  # 0.6.x-0.7.x: vllm/scripts.py::main builds the `serve` subparser itself
        if not src.has_module("vllm.scripts"):
            return None
        before = len(it.parsers)
        it.run_call(it.global_("vllm.scripts", "main"))
        made = [p for p in it.parsers[before:] if p.args and p.ctor.get("subcommand") == "serve"]
        return max(made, key=lambda p: len(p.args)) if made else None
    cls = it.global_(SERVE, "ServeSubcommand")
    if not isinstance(cls, ClassRef):
        return None
    top = it.new_parser({}, "FlexibleArgumentParser")
    inst = it.instantiate(cls, [], {})
    init = it.getattr_(inst, "subparser_init")
    before = len(it.parsers)
    it.run_call(init, ("subparsers", top))
    made = [p for p in it.parsers[before:] if p.args]
    return max(made, key=lambda p: len(p.args)) if made else None
