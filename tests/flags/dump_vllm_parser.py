"""Run inside the real vLLM venv: dump the option strings, action, nargs and choices of vLLM's own serve parser.

    .venv-vllm/bin/python tests/flags/dump_vllm_parser.py > parser.json

Builds ``make_arg_parser(FlexibleArgumentParser())`` exactly as ``python -m vllm.entrypoints.openai.api_server``
does; it starts no engine.
"""

import argparse
import json
import sys

try:
    from vllm.entrypoints.launchers.cli_args import make_arg_parser
except ImportError:  # before the launchers/ move
    from vllm.entrypoints.openai.cli_args import make_arg_parser
from vllm.utils.argparse_utils import FlexibleArgumentParser

KINDS = {argparse._StoreTrueAction: "store_true", argparse._StoreFalseAction: "store_false",
         argparse._StoreConstAction: "store_const", argparse._AppendAction: "append",
         argparse.BooleanOptionalAction: "bool_opt", argparse._StoreAction: "store", argparse._HelpAction: "help"}

parser = make_arg_parser(FlexibleArgumentParser())
out = []
for a in parser._actions:
    if not a.option_strings:
        continue
    kind = next((v for k, v in KINDS.items() if type(a) is k), "custom:" + type(a).__name__)
    t = getattr(a.type, "__name__", None) if a.type is not None else None
    choices = None
    if a.choices is not None:
        try:
            choices = sorted({str(c) for c in a.choices})
        except TypeError:
            choices = "?"
    out.append({"opts": list(a.option_strings), "action": kind, "nargs": a.nargs, "type": t, "choices": choices})
json.dump({"allow_abbrev": parser.allow_abbrev, "actions": out}, sys.stdout)
