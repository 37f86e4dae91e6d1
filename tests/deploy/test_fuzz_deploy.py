"""A fuzzer over deployment files (issue #22): the repository's manifests with one value replaced by hostile junk (a
list or a map where a string goes, a 5,000-digit number, a huge string, nested lists, aliases), parsed and planned.
The property: a container list or a one-line KvplanError, never another exception, in bounded time.

``KVPLAN_FUZZ_EXAMPLES=3000 python -m pytest -q tests/deploy/test_fuzz_deploy.py`` runs it longer."""

from __future__ import annotations

import os
import time
from pathlib import Path

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kvplan.deploy.check import check_containers
from kvplan.deploy.loader import parse_text
from kvplan.errors import KvplanError

EXAMPLES = int(os.environ.get("KVPLAN_FUZZ_EXAMPLES", "25"))
FUZZ = settings(max_examples=EXAMPLES, deadline=None, derandomize=EXAMPLES <= 25,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
DATA = Path(__file__).resolve().parents[1] / "data" / "deploy"
MANIFESTS = {p.name: list(yaml.safe_load_all(p.read_text())) for p in sorted(DATA.glob("*.yaml"))}
JUNK = st.one_of(
    st.sampled_from([None, True, 0, -1, 2**70, 1e308, float("inf"), float("nan"), "", " ", "x" * 5000, "9" * 5000,
                     "1e400Gi", "-5Gi", "$(X)", "${X:-${Y}}", "\x1b[31m", "a\nb", ["a", "b"], {"a": 1}, [[[[]]]],
                     {"k": {"k": {"k": []}}}, [1, 2, 3], "all", "device=0,1,x", "count=abc", "host", "Memory"]),
    st.text(max_size=20), st.integers(-(2**40), 2**40), st.lists(st.text(max_size=5), max_size=3),
    st.dictionaries(st.text(max_size=5), st.text(max_size=5), max_size=3))


def _paths(node, prefix=()):
    """Every (path to a value) of a YAML tree."""
    yield prefix
    if isinstance(node, dict):
        for k, v in node.items():
            yield from _paths(v, (*prefix, k))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            yield from _paths(v, (*prefix, i))


def _replace(node, path, value):
    if not path:
        return value
    import copy

    node = copy.deepcopy(node)
    cur = node
    for k in path[:-1]:
        cur = cur[k]
    cur[path[-1]] = value
    return node


@st.composite
def mutated(draw) -> tuple[str, str]:
    name = draw(st.sampled_from(sorted(MANIFESTS)))
    docs = MANIFESTS[name]
    i = draw(st.integers(0, len(docs) - 1))
    doc = docs[i]
    for _ in range(draw(st.integers(1, 3))):
        paths = list(_paths(doc))
        doc = _replace(doc, draw(st.sampled_from(paths[1:] or paths)), draw(JUNK))
    out = [*docs[:i], doc, *docs[i + 1:]]
    return name, yaml.safe_dump_all(out, width=10**9) if draw(st.booleans()) else yaml.safe_dump_all(out)


@FUZZ
@given(mutated())
def test_mutated_manifests(case):
    name, text = case
    t0 = time.monotonic()
    try:
        containers = parse_text(text, name, name)
        check_containers(containers, {"gpu": "h100", "host_mem_gib": 512.0})
    except KvplanError as e:
        assert "\n" not in str(e).strip(), str(e)
    assert time.monotonic() - t0 < 15


@FUZZ
@given(st.sampled_from(["vllm-docker-run.sh", "sglang-sbatch.sh"]), st.integers(0, 400),
       st.sampled_from(["'", '"', "\\", "$(", "${", "`", "#", ";", "&&", "|", "\n", "a" * 3000, "=", "--gpus",
                        "--memory", "-m", "--shm-size", "--mem=", "--gres=gpu:", "x" * 200_000, "9" * 5000]))
def test_mutated_scripts(name, at, junk):
    text = (DATA / name).read_text()
    at = min(at, len(text))
    text = text[:at] + junk + text[at:]
    t0 = time.monotonic()
    try:
        containers = parse_text(text, name, name)
        check_containers(containers, {"gpu": "h100", "host_mem_gib": 512.0})
    except KvplanError as e:
        assert "\n" not in str(e).strip(), str(e)
    assert time.monotonic() - t0 < 15
