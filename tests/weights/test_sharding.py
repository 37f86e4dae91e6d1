"""Per-rank sums under each engine's layer classes, against hand arithmetic on a tiny config."""

from __future__ import annotations

from kvplan.engines.versions import Version
from kvplan.models.placement import Layout, place
from kvplan.models.sharding import Placement, shard_bytes
from kvplan.models.tensors import TensorGroup

LAY4 = Layout(tp=4, attn_tp=4, mlp_tp=4, shared_tp=4, moe_tp=4, embed_tp=4, head_tp=4, vision_tp=4, vocab_pad=64,
              num_heads=4, num_kv_heads=2, n_layers=2)


def _bytes(g: TensorGroup, lay: Layout = LAY4) -> int:
    p = place(g, lay)
    assert p is not None
    return shard_bytes(g, p)


def test_vocab_parallel_pads_the_global_vocab_to_64():
    # VocabParallelEmbedding: 300 -> 320 rows (pad_vocab_size), then 320 / 4 = 80 rows per rank
    assert _bytes(TensorGroup("model.embed_tokens.weight", (300, 64), "BF16")) == 80 * 64 * 2
    assert _bytes(TensorGroup("lm_head.weight", (300, 64), "BF16")) == 80 * 64 * 2
    one = Layout(num_heads=4, num_kv_heads=2, n_layers=2)  # TP 1 still allocates the padded 320 rows
    assert _bytes(TensorGroup("model.embed_tokens.weight", (300, 64), "BF16"), one) == 320 * 64 * 2


def test_kv_heads_replicate_when_tp_exceeds_them():
    # 2 KV heads of 16 at TP 4: each rank holds one head (QKVParallelLinear num_kv_head_replicas = 2)
    assert _bytes(TensorGroup("model.layers.{L}.self_attn.k_proj.weight", (32, 64), "BF16", 0)) == 16 * 64 * 2
    assert _bytes(TensorGroup("model.layers.{L}.self_attn.q_proj.weight", (64, 64), "BF16", 0)) == 16 * 64 * 2
    # fused qkv (Phi-3 qkv_proj, 4 q + 2 kv heads): (4/4 + 2 * 1) heads of 16 rows per rank
    assert _bytes(TensorGroup("model.layers.{L}.self_attn.qkv_proj.weight", (128, 64), "BF16", 0)) == 48 * 64 * 2


def test_row_parallel_splits_inputs_and_keeps_bias_whole():
    assert _bytes(TensorGroup("model.layers.{L}.self_attn.o_proj.weight", (64, 64), "BF16", 0)) == 64 * 16 * 2
    assert _bytes(TensorGroup("model.layers.{L}.mlp.down_proj.bias", (64,), "BF16", 0)) == 64 * 2
    assert _bytes(TensorGroup("model.layers.{L}.mlp.up_proj.bias", (96,), "BF16", 0)) == 24 * 2
    # AWQ qweight [in, out/8]: a column split cuts axis 1, a row split axis 0
    assert _bytes(TensorGroup("model.layers.{L}.mlp.up_proj.qweight", (64, 12), "I32", 0)) == 64 * 3 * 4
    assert _bytes(TensorGroup("model.layers.{L}.mlp.down_proj.qweight", (96, 8), "I32", 0)) == 24 * 8 * 4


def test_replicated_pieces_stay_whole():
    for name, shape in (("model.layers.{L}.self_attn.kv_a_proj_with_mqa.weight", (80, 64)),
                        ("model.layers.{L}.mlp.gate.weight", (8, 64)),
                        ("model.layers.{L}.input_layernorm.weight", (64,))):
        g = TensorGroup(name, shape, "BF16", 0)
        assert _bytes(g) == g.nbytes


def test_experts_split_over_ep_then_moe_tp():
    g = TensorGroup("model.layers.{L}.mlp.experts.#.gate_proj.weight", (32, 64), "BF16", 0, count=8)
    assert _bytes(g) == 8 * (8 * 64 * 2)  # TP 4: every expert, a quarter of its intermediate rows
    ep = Layout(tp=4, attn_tp=4, moe_tp=1, ep=4, num_heads=4, num_kv_heads=2, n_layers=2)
    assert _bytes(g, ep) == 2 * (32 * 64 * 2)  # EP 4: two whole experts per rank
    fused = TensorGroup("model.layers.{L}.mlp.experts.gate_up_proj_blocks", (8, 64, 2, 16), "U8", 0)
    assert _bytes(fused, ep) == 2 * 64 * 2 * 16 and _bytes(fused) == 8 * 16 * 2 * 16


def test_mtp_layers_are_not_loaded():
    assert place(TensorGroup("model.layers.{L}.self_attn.o_proj.weight", (64, 64), "BF16", 2), LAY4) is None


def test_shard_rounds_up_not_down():
    assert shard_bytes(TensorGroup("w", (10, 3), "BF16"), Placement("x", 0, 4)) == 3 * 3 * 2


def test_pipeline_layer_splits_per_engine_and_version():
    from kvplan.engines.sglang.weights import pp_ranges as sgl
    from kvplan.engines.vllm.weights import pp_ranges as vll

    def sizes(r):
        return [len(x) for x in r]
    # sglang distributed/utils.py::get_pp_indices: 0.5.9 last `remainder` stages +1; 0.4.8 last stage all of it
    assert sizes(sgl(94, 4, Version("0.5.9"))) == [23, 23, 24, 24]
    assert sizes(sgl(94, 4, Version("0.4.8.post1"))) == [23, 23, 23, 25]
    # vllm: 0.8.5+ partitions[-2], [-3] get the extra layers; 0.7.3 the last stage
    assert sizes(vll(94, 4, Version("0.11.0"))) == [23, 24, 24, 23]
    assert sizes(vll(94, 4, Version("0.7.3"))) == [23, 23, 23, 25]
