"""The per-version flag tables (engines/<engine>/flags.json) and the argparse replay over them.

Ground truth here is the engines' source, quoted line by line from the released wheels (the real vLLM parser is
compared in test_real_vllm_parser.py); "every flag of a version is accepted" checks the replay against its own
table, so it catches a replay that rejects what the engine takes.
"""

from __future__ import annotations

import re

import pytest

from kvplan.engines.flagtable import FlagSpec, check_flags, load

SAMPLES = {
    "sglang": ["0.3.0", "0.3.6", "0.4.1.post7", "0.4.5.post1", "0.4.9.post6", "0.5.2", "0.5.6", "0.5.9", "0.5.14",
               "0.5.20", "0.5.23"],
    "vllm": ["0.6.0", "0.6.6.post1", "0.7.3", "0.8.5", "0.9.1", "0.10.2", "0.11.0", "0.14.0", "0.17.1", "0.20.0",
             "0.24.0", "0.27.0", "0.32.0", "0.33.0"],
}


def _value_for(spec: FlagSpec) -> list[str]:
    ar = spec.arity
    if ar in (0, "?", "*"):
        return []
    if spec.choices:
        v = next(str(c) for c in spec.choices if c is not None)
    else:
        v = {"int": "1", "float": "0.5", "human_int": "1k", "human_int_or_auto": "auto", "json": "{}",
             "bool": "true"}.get(spec.type or "", "x")
    return [v] * (ar if isinstance(ar, int) else 1)


def test_provenance_header():
    for engine, oldest, newest in (("sglang", "0.3.0", "0.5.23"), ("vllm", "0.6.0", "0.33.0")):
        t = load(engine)
        assert t.versions[0] == oldest and t.versions[-1] == newest
        assert len(t.wheels) == len(t.versions)
        for w in t.wheels:
            assert re.fullmatch(r"[0-9a-f]{64}", w["sha256"]) and w["file"].startswith(f"{engine}-{w['version']}")


def test_every_release_in_range_is_read():
    # PyPI's releases in the supported ranges (pip index versions, 2026-12): post releases included
    sg = load("sglang").versions
    assert len(sg) == 110 and "0.4.9.post6" in sg and "0.5.15.post1" in sg and "0.3.1.post3" in sg
    vl = load("vllm").versions
    assert len(vl) == 66 and "0.10.1.1" in vl and "0.8.5.post1" in vl and "0.9.0.1" in vl


@pytest.mark.parametrize("engine", ["sglang", "vllm"])
def test_every_flag_of_a_version_is_accepted(engine):
    t = load(engine)
    for version in SAMPLES[engine]:
        opts = t.options(t.index_of(version))
        assert len(opts) > 40
        for opt, spec in opts.items():
            args = [opt, *_value_for(spec)]
            assert check_flags(engine, version, args) == [], (version, args)
            if opt.startswith("--") and spec.arity is None:  # --flag=value too
                assert check_flags(engine, version, [f"{opt}={args[1]}"]) == [], (version, opt)


# --- SGLang: facts read in the wheels' srt/server_args.py (line numbers of that file in that wheel)

def _spec(engine: str, version: str, opt: str) -> FlagSpec:
    t = load(engine)
    return t.options(t.index_of(version))[opt]


def test_sglang_030_kv_cache_dtype():
    # sglang-0.3.0 server_args.py:201-204
    #   "--kv-cache-dtype", type=str, default=ServerArgs.kv_cache_dtype, choices=["auto", "fp8_e5m2"],
    s = _spec("sglang", "0.3.0", "--kv-cache-dtype")
    assert s.choices == ("auto", "fp8_e5m2") and s.arity is None
    # :252-253  "--mem-fraction-static", type=float,
    assert _spec("sglang", "0.3.0", "--mem-fraction-static").type == "float"


def test_sglang_059_tp_and_hicache():
    # sglang-0.5.9 server_args.py:3302-3303  "--tensor-parallel-size", "--tp-size",
    s = _spec("sglang", "0.5.9", "--tp-size")
    assert set(s.opts) == {"--tensor-parallel-size", "--tp-size"} and s.type == "int"
    # :4255-4256  "--enable-hierarchical-cache", action="store_true",   (no "--enable-hicache" in 0.5.9)
    s = _spec("sglang", "0.5.9", "--enable-hierarchical-cache")
    assert s.opts == ("--enable-hierarchical-cache",) and s.arity == 0
    # :4266-4267  "--hicache-size", type=int,
    assert _spec("sglang", "0.5.9", "--hicache-size").type == "int"
    assert [p.kind for p in check_flags("sglang", "0.5.9", ["--hicache-size", "47.5"])] == ["bad-value"]
    # "--tp" is no option string: argparse takes it as the unique prefix of "--tp-size"
    assert "--tp" not in load("sglang").options(load("sglang").index_of("0.5.9"))
    assert check_flags("sglang", "0.5.9", ["--tp", "2"]) == []


def test_sglang_0523_fields_from_dataclasses():
    # sglang-0.5.23 srt/arg_groups/fields/memory.py:98-100
    #   enable_hierarchical_cache: A[bool, Arg(help="Enable hierarchical cache", aliases=["--enable-hicache"])]
    s = _spec("sglang", "0.5.23", "--enable-hicache")
    assert set(s.opts) == {"--enable-hierarchical-cache", "--enable-hicache"} and s.action == "store_true"
    # srt/arg_groups/fields/parallel.py: tp_size: A[int, Arg(help=..., aliases=["--tensor-parallel-size"])] = 1
    s = _spec("sglang", "0.5.23", "--tp-size")
    assert set(s.opts) == {"--tp-size", "--tensor-parallel-size"} and s.type == "int"
    # srt/arg_groups/fields/memory.py:113-116  hicache_size: A[int, "..."] = 0
    assert _spec("sglang", "0.5.23", "--hicache-size").type == "int"


def test_sglang_removed_and_added():
    t = load("sglang")
    first, last, _ = t.history["--enable-hicache"]
    assert t.versions[first] == "0.5.23"  # the alias is new in 0.5.23 (see above)
    p = check_flags("sglang", "0.5.9", ["--enable-hicache"])
    assert p[0].kind == "unknown" and "added in 0.5.23" in p[0].message


# --- vLLM: boundaries read in adjacent wheels (engine/arg_utils.py::EngineArgs.add_cli_args)

@pytest.mark.parametrize("flag, last, gone", [("--swap-space", "0.17.1", "0.18.0"),
                                              ("--max-num-partial-prefills", "0.26.0", "0.27.0")])
def test_vllm_removed_boundaries(flag, last, gone):
    assert check_flags("vllm", last, [flag, "4"]) == []
    p = check_flags("vllm", gone, [flag, "4"])
    assert p and p[0].kind == "removed" and f"removed in {gone}" in p[0].message


def test_vllm_front_end():
    # FlexibleArgumentParser: --max_model_len=8192 is --max-model-len; -tp=2 is -tp 2
    assert check_flags("vllm", "0.32.0", ["--max_model_len=8192", "-tp=2", "--gpu_memory_utilization", "0.9"]) == []
    # dotted JSON keys (0.32.0: utils/argparse_utils.py FlexibleArgumentParser.parse_args)
    assert check_flags("vllm", "0.32.0", ["--compilation-config.mode", "3"]) == []
    p = check_flags("vllm", "0.32.0", ["--gpu-memory-utilisation", "0.9"])
    assert p[0].kind == "unknown" and p[0].did_you_mean == "--gpu-memory-utilization"
    assert p[0].fixed_tokens == ["--gpu-memory-utilization", "0.9"]


def test_prefixes_and_ambiguity():
    assert check_flags("sglang", "0.5.9", ["--mem-frac", "0.8"]) == []
    p = check_flags("vllm", "0.32.0", ["--max-num", "8"])  # --max-num-seqs, --max-num-batched-tokens, ...
    assert p[0].kind == "ambiguous"
