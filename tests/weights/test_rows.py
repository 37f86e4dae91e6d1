"""Per-rank sums over rows (``tensors.fold_rows``: groups identical but for their layer, placed once) equal, to the
byte and in the order of their parts, the walk of every group that ``sharding.per_rank_sum`` and SGLang's
allocator-segment sum did before issue 23; here those walks are kept as the reference and both engines' whole
weight estimates are compared with them."""

from __future__ import annotations

import pytest

from kvplan.engines.cmdline import split_command
from kvplan.engines.sglang import weights as sgw
from kvplan.engines.sglang.args import parse_sglang
from kvplan.engines.vllm import weights as vlw
from kvplan.engines.vllm.args import parse_vllm
from kvplan.models.catalog import catalog_entries, spec_from_catalog
from kvplan.models.sharding import StageSums, per_rank_sum, pp_stage_of_layer, shard_bytes
from kvplan.models.tensors import TensorGroup, fold_rows


def walk_every_group(groups, place, layer_ranges) -> StageSums:
    """sharding.per_rank_sum as it was: one placement per group."""
    sums = StageSums([{} for _ in layer_ranges])
    last = len(layer_ranges) - 1
    for g in groups:
        p = place(g)
        if p is None:
            continue
        n = shard_bytes(g, p)
        if p.stage == "first":
            sums.add(0, p.part, n)
        elif p.stage == "last":
            sums.add(last, p.part, n)
        elif p.stage == "layer" and g.layer is not None:
            s = pp_stage_of_layer(g.layer, layer_ranges)
            if s is not None:
                sums.add(s, p.part, n)
        else:
            sums.add(None, p.part, n)
    return sums


def segments_every_group(groups, place, layers: range) -> int:
    """engines/sglang/weights.py::_segment_rounding as it was: one placement per group."""
    from kvplan.models.placement import role_of
    from kvplan.models.torch_allocator import reserved_overhead_bytes

    sizes: dict[tuple, int] = {}
    for g in groups:
        if g.layer is not None and g.layer not in layers:
            continue
        p = place(g)
        if p is None:
            continue
        parts = g.template.rsplit(".", 2)
        leaf = parts[-1]
        mod = parts[-2] if len(parts) >= 2 else g.template
        prefix = parts[0] if len(parts) == 3 else ""
        merged = {"gate_proj": "w13", "up_proj": "w13", "w1": "w13", "w3": "w13", "q_proj": "qkv", "k_proj": "qkv",
                  "v_proj": "qkv", "q_a_proj": "qkv_a", "kv_a_proj_with_mqa": "qkv_a"}.get(mod, mod)
        expert = role_of(g).group == "experts"
        if expert:
            prefix = prefix.split("experts")[0]
        key = (g.layer, expert, prefix, merged, leaf)
        sizes[key] = sizes.get(key, 0) + shard_bytes(g, p)

    def order(k: tuple) -> tuple[int, int]:
        if k[0] is None:
            return (0 if "embed" in (k[2] + k[3]) else 2, 0)
        return (1, k[0])

    return reserved_overhead_bytes(sizes[k] for k in sorted(sizes, key=order))


SPECS = {s.name: s for s in (spec_from_catalog(e) for e in catalog_entries())}
FAMILIES = ("meta-llama/Llama-3.1-8B", "meta-llama/Llama-3.1-70B", "Qwen/Qwen3-30B-A3B", "Qwen/Qwen3-235B-A22B-FP8",
            "Qwen/Qwen3-Next-80B-A3B-Instruct", "deepseek-ai/DeepSeek-V2-Lite", "deepseek-ai/DeepSeek-V3",
            "moonshotai/Kimi-K2.5", "nvidia/Kimi-K2.5-NVFP4", "openai/gpt-oss-120b", "mistralai/Mixtral-8x7B-v0.1",
            "google/gemma-3-27b-it", "Qwen/Qwen2.5-VL-3B-Instruct", "facebook/opt-125m", "Qwen/Qwen2.5-7B-Instruct")
SG = [("--tp 8", "cuda", "0.5.9"), ("--tp 4 --pp 3", "rocm", "0.5.9"), ("--tp 8 --dp 4 --enable-dp-attention", "cuda",
                                                                         "0.5.23"),
      ("--tp 8 --ep-size 8 --pp 2", "cuda", "0.4.6"), ("--tp 2 --quantization fp8", "cuda", "0.4.9")]
VL = [("-tp 8", "cuda", "0.33.0"), ("-tp 2 -pp 5", "rocm", "0.11.0"), ("-tp 4 --enable-expert-parallel -dp 2", "cuda",
                                                                        "0.20.0"),
      ("-tp 1 --quantization fp8", "cuda", "0.14.0"), ("-tp 8 -pp 2", "cuda", "0.7.3")]
CASES = [("sglang", m, *c) for m in FAMILIES for c in SG] + [("vllm", m, *c) for m in FAMILIES for c in VL]


@pytest.mark.parametrize("engine, model, flags, platform, version", CASES,
                         ids=[f"{c[0]}-{c[1]}-{c[2]}-{c[3]}-{c[4]}" for c in CASES])
def test_estimate_over_rows_equals_the_walk(engine, model, flags, platform, version, monkeypatch):
    spec = SPECS[model]
    if engine == "sglang":
        args = parse_sglang(split_command(f"python -m sglang.launch_server --model-path {model} {flags}"))
        new = sgw._estimate_stage(spec, sgw.WeightArgs.of(args), platform, version, None, None)
        monkeypatch.setattr(sgw, "per_rank_sum", walk_every_group)
        monkeypatch.setattr(sgw, "_segment_rounding", segments_every_group)
        old = sgw._estimate_stage(spec, sgw.WeightArgs.of(args), platform, version, None, None)
    else:
        args = parse_vllm(split_command(f"vllm serve {model} {flags}"))
        gpu = "AMD Instinct MI300X" if platform == "rocm" else "NVIDIA H100 80GB HBM3"
        new = vlw._estimate_stage(spec, vlw.WeightArgs.of(args), platform, version, None, None, gpu)
        monkeypatch.setattr(vlw, "per_rank_sum", walk_every_group)
        old = vlw._estimate_stage(spec, vlw.WeightArgs.of(args), platform, version, None, None, gpu)
    assert new == old and list(new.parts) == list(old.parts)


def test_rows_fold_layers_and_keep_outsiders_apart():
    g = [TensorGroup("e", (4, 2), "BF16"), TensorGroup("l.{L}.w", (2, 2), "BF16", 3),
         TensorGroup("l.{L}.w", (2, 2), "BF16", 1), TensorGroup("l.{L}.w", (2, 2), "F32", 2),
         TensorGroup("e", (4, 2), "BF16"), TensorGroup("l.{L}.x.#", (2,), "BF16", 1, 8)]
    rows = fold_rows(g)
    assert [(r.group.template, r.group.dtype, r.group.layer, r.layers, r.positions) for r in rows] == [
        ("e", "BF16", None, (), (0,)), ("l.{L}.w", "BF16", 1, (1, 3), (2, 1)), ("l.{L}.w", "F32", 2, (2,), (3,)),
        ("e", "BF16", None, (), (4,)), ("l.{L}.x.#", "BF16", 1, (1,), (5,))]


def test_stage_parts_keep_the_walks_order():
    from kvplan.models.placement import Layout, placer

    spec = SPECS["deepseek-ai/DeepSeek-V3"]
    groups = sgw.load_tensors(spec, None).groups
    ranges = sgw.pp_ranges(spec.num_layers, 4, sgw.Version("0.5.9"))
    place = placer(Layout(tp=8, attn_tp=8, mlp_tp=8, shared_tp=8, moe_tp=8, embed_tp=8, head_tp=8, n_layers=61,
                          num_heads=128, num_kv_heads=1))
    new, old = per_rank_sum(groups, place, ranges), walk_every_group(groups, place, ranges)
    assert [list(s.items()) for s in new.stages] == [list(s.items()) for s in old.stages]


@pytest.mark.parametrize("model", FAMILIES)
def test_a_placer_places_alike_groups_alike(model):
    """placement.placer places each (template, shape, dtype, count, below n_layers) once: every group gets what
    placement.place gives it alone."""
    from kvplan.models.placement import Layout, place, placer

    spec = SPECS[model]
    for lay in (Layout(tp=8, attn_tp=8, mlp_tp=8, shared_tp=8, moe_tp=8, embed_tp=8, head_tp=8,
                       n_layers=spec.num_layers, num_heads=spec.num_attention_heads, num_kv_heads=spec.num_kv_heads),
                Layout(tp=4, attn_tp=1, mlp_tp=1, shared_tp=1, moe_tp=1, ep=4, embed_tp=1, head_tp=4,
                       n_layers=spec.num_layers - 1, num_heads=spec.num_attention_heads,
                       num_kv_heads=spec.num_kv_heads)):
        f = placer(lay)
        for g in sgw.load_tensors(spec, None).groups:
            assert f(g) == place(g, lay), g
