"""Hostile deployment files (issue #22): each is one line on stderr and exit 2, within 10 s and 3 GiB of address
space (``run_bounded``: RLIMIT_AS in the child), never an internal error; and the budget leaves real files alone."""

from __future__ import annotations

import time

import pytest

from kvplan.deploy import yamlsafe
from kvplan.deploy.loader import parse_text
from kvplan.errors import KvplanError
from tests.conftest import assert_one_line, run_bounded


def _bomb(levels: int = 9, width: int = 9) -> list[str]:
    """Anchors a..i, each a list of *width* aliases of the one before: width**levels leaves in ~500 bytes."""
    names = "abcdefghijklmnop"
    out = [f"  a: &a [{', '.join(['lol'] * width)}]"]
    for i in range(1, levels):
        out.append(f"  {names[i]}: &{names[i]} [{', '.join([f'*{names[i - 1]}'] * width)}]")
    return ["x-bomb:", *out]


LAST = "*i"
COMPOSE_ENV = "\n".join([*_bomb(), "services:", "  vllm:", "    image: vllm/vllm-openai:v0.8.5",
                         '    command: ["--model", "Qwen/Qwen3-8B"]', "    environment:", f"      BOMB: {LAST}"])
COMPOSE_MEM = COMPOSE_ENV.replace(f"environment:\n      BOMB: {LAST}", f"mem_limit: {LAST}")
KUBE_ENV = "\n".join([*_bomb(), "apiVersion: v1", "kind: Pod", "metadata: {name: p}", "spec:", "  containers:",
                      "    - name: server", "      image: vllm/vllm-openai:v0.8.5",
                      '      args: ["--model", "Qwen/Qwen3-8B"]', "      env:", "        - name: BOMB",
                      f"          value: {LAST}"])


@pytest.mark.parametrize("name, text", [("compose-env.yaml", COMPOSE_ENV), ("compose-mem.yaml", COMPOSE_MEM),
                                        ("kube-env.yaml", KUBE_ENV)])
def test_alias_bomb_is_refused_bounded(tmp_path, name, text):
    assert len(text) < 1200  # a 1 KB file
    f = tmp_path / name
    f.write_text(text + "\n")
    code, out, err, s = run_bounded(["check", "-f", str(f), "--gpu", "h100"])
    assert_one_line(code, out, err, name, "YAML nodes once its aliases are expanded")


def test_alias_bomb_from_stdin():
    code, out, err, _ = run_bounded(["check", "-f", "-", "--gpu", "h100"], input=COMPOSE_ENV + "\n")
    assert_one_line(code, out, err, "stdin", "aliases")


@pytest.mark.parametrize("text, words", [
    ("a: &a [*a]\n", "refers to a node that contains it"),  # a recursive structure
    ("a: &a {k: *a}\n", "refers to a node that contains it"),
    ("a: &a " + "x" * 2**20 + "\nb: [" + ", ".join(["*a"] * 40) + "]\n", "MiB of YAML text"),
    ("a: " + "[" * 150 + "]" * 150 + "\n", "nested more than 100 levels"),
])
def test_budget_units(text, words):
    with pytest.raises(yamlsafe.YamlBudgetError, match=words):
        yamlsafe.load_all(text)


def test_many_plain_nodes_are_refused_quickly():
    text = "items:\n" + "  - a\n" * (yamlsafe.MAX_NODES + 10)
    t0 = time.monotonic()
    with pytest.raises(yamlsafe.YamlBudgetError, match="500,000 YAML nodes"):
        yamlsafe.load_all(text)
    # composing stops at the bound (~5 us a node); the old loader built all of it first
    assert time.monotonic() - t0 < 30


def test_ordinary_aliases_and_merge_keys_still_load():
    text = ("x-common: &common\n  image: vllm/vllm-openai:v0.8.5\n  ipc: host\n  environment: &env\n"
            "    VLLM_CPU_KVCACHE_SPACE: '4'\n"
            "services:\n  a:\n    <<: *common\n    command: [--model, Qwen/Qwen3-8B]\n"
            "  b:\n    <<: *common\n    environment: *env\n    command: [--model, Qwen/Qwen3-8B]\n"
            "---\n---\nk: [1, 2]\n")
    docs = yamlsafe.load_all(text)
    assert len(docs) == 2 and docs[1] == {"k": [1, 2]}  # empty documents dropped, as safe_load_all + filter
    assert docs[0]["services"]["a"]["image"] == "vllm/vllm-openai:v0.8.5"
    assert docs[0]["services"]["b"]["environment"] == {"VLLM_CPU_KVCACHE_SPACE": "4"}
    cs = parse_text(text.split("---")[0], "compose.yaml")
    assert [c.workload for c in cs] == ["service a", "service b"] and all(c.ipc_host for c in cs)


def test_malformed_yaml_is_still_a_parse_error():
    with pytest.raises(KvplanError, match=r"not valid YAML \(line 4\)"):
        parse_text("apiVersion: v1\nkind: Pod\nspec: {containers: [\n", "broken.yaml")


def test_pure_python_parser_has_the_same_budget(monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "yaml._yaml", None)  # PyYAML without libyaml
    monkeypatch.setattr(yamlsafe, "_LOADER", None)
    with pytest.raises(yamlsafe.YamlBudgetError, match="aliases are expanded"):
        yamlsafe.load_all(COMPOSE_ENV)
    assert yamlsafe.load_all("a: &x [1]\nb: *x\n") == [{"a": [1], "b": [1]}]
    assert "CParser" not in [c.__name__ for c in type(yamlsafe._LOADER("")).__mro__]
