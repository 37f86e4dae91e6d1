"""vLLM 0.11 speculative decoding (eagle3) and LoRA: the drafter's head and KV layers, the LoRA buffers, pinned to
arithmetic done by hand from the 0.11.0 source (engines/vllm/speculative.py, lora.py)."""

from __future__ import annotations

from kvplan import check

VLLM = ["vllm", "serve", "meta-llama/Llama-3.1-8B-Instruct"]
SPEC = ["--speculative-config",
        '{"method":"eagle3","model":"yuhuili/EAGLE3-LLaMA3.1-Instruct-8B","num_speculative_tokens":3}']
LORA = ["--enable-lora", "--max-loras", "4", "--max-lora-rank", "64"]


def plan(*flags: str, version: str = "0.11.0", **opts):
    opts.setdefault("gpu", "h100")
    return check([*VLLM, *flags], engine_version=version, **opts)


def terms(r) -> dict[str, int]:
    return {t.term: t.bytes for t in r.plan.per_rank.feature_terms}


def ids(r) -> set[str]:
    return {f.id for f in r.findings}


def test_eagle3_head_is_model_memory_and_its_layer_joins_the_block_pool():
    # the head (models/drafts.py, hand sum in tests/sglang/test_speculative_lora.py): 849,635,328 B per rank
    # KV: target 32 layers × 8 heads × 256 × 2 B = 131,072 B/token + 1 draft layer 4,096 = 135,168 B/token
    a, b = plan(), plan(*SPEC)
    t = terms(b)
    assert t["draft-weights"] == 849_635_328
    # EagleProposer's buffers: max_num_batched_tokens 8192 × (int32 + int64 + int32 + 2 × 4096 × 2 B) = 134,348,800
    assert t["draft-buffers"] == 8192 * (4 + 8 + 4 + 2 * 4096 * 2) == 134_348_800
    assert b.plan.per_rank.weights_bytes - a.plan.per_rank.weights_bytes == 849_635_328 + 134_348_800
    assert b.plan.per_rank.kv_bytes_per_token == 135_168
    blocks = b.plan.per_rank.kv_blocks
    assert blocks is not None and t["draft-kv-pool"] == blocks * 16 * 4096
    assert b.plan.per_rank.kv_tokens < a.plan.per_rank.kv_tokens
    assert not ids(b) & {"unmodeled-memory", "unknown-flags"}


def test_lora_buffers_by_hand():
    # Llama-3.1-8B, max_loras 4, rank 64, bf16, TP1 (lora/layers/*.py::create_lora_weights):
    #   linear layers, per layer: qkv A 3 × 4·64·4096 + B 4·(4096 + 1024 + 1024)·64; o A 4·64·4096 + B 4·4096·64;
    #   gate_up A 2 × 4·64·4096 + B 2 × 4·14336·64; down A 4·64·14336 + B 4·4096·64 = 20,971,520 elements
    #   × 2 B × 32 layers                                                     = 1,342,177,280
    #   embed_tokens: (4, 256, 4096) + A (4, 128256 + 256, 64) + B (4, 1, 4096, 64) = 38,141,952 el = 76,283,904
    #   logits: A (4, 1, 64, 4096) + B (4, 1, 128512, 64) + (4, 256, 4096)         = 38,141,952 el = 76,283,904
    #   base model rows: embed + 256 × 4 rows, lm_head + 256 rows: 1280 × 4096 × 2  =     10,485,760
    #   = 1,505,230,848 B per rank, in the model memory before the KV cache
    a, b = plan(), plan(*LORA)
    t = terms(b)
    assert t["lora-buffers"] == 1_505_230_848
    # host: max_cpu_loras (= max_loras) whole adapters, each at most one slot at TP1: linear 1,342,177,280 / 4 =
    # 335,544,320, embed 19,070,976 + logits 19,070,976 (the same shapes with 1 slot) + 512 extra rows 4,194,304
    assert t["lora-cpu-cache"] == 4 * (335_544_320 + 2 * 19_070_976 + 4_194_304)
    assert b.plan.per_rank.weights_bytes - a.plan.per_rank.weights_bytes == 1_505_230_848
    assert not ids(b) & {"unmodeled-memory", "unknown-flags"}


def test_outside_the_release_read_the_features_warn():
    r = plan(*LORA, version="0.7.3")  # V0 before 0.8: not read
    assert "unmodeled-memory" in ids(r) and "unknown-flags" not in ids(r)
    r = plan("--speculative-config", '{"method":"deepseek_mtp","num_speculative_tokens":1}')
    assert "unmodeled-memory" in ids(r)


def test_releases_read_agree_and_v0_builds_the_same_buffers():
    # 0.10.2 builds the same head (draft_vocab_size set: its own 32k lm_head in both) and the same LoRA buffers
    assert terms(plan(*SPEC, version="0.10.2"))["draft-weights"] == 849_635_328
    assert terms(plan(*LORA, version="0.8.5"))["lora-buffers"] == 1_505_230_848
    # the V0 engine (VLLM_USE_V1=0; read in 0.8.0 and 0.8.2: worker/model_runner.py::load_model wraps the model in
    # create_lora_manager inside the memory profiler, the warm-up adapters live on the CPU): the same buffers
    for version in ("0.8.0", "0.8.2", "0.10.2"):
        r = check(["VLLM_USE_V1=0", *VLLM, *LORA], engine_version=version, gpu="h100")
        assert r.plan.settings.engine_kind == "v0", version
        assert terms(r)["lora-buffers"] == 1_505_230_848, version
        assert "unmodeled-memory" not in ids(r), version


def test_lora_buffers_at_tp4_by_hand():
    # Llama-3.1-8B, 4 slots of rank 64, bf16, TP4 (column-parallel qkv/gate_up: A whole, B sharded; row-parallel
    # o/down: A sharded, B whole), per layer in elements:
    #   qkv A 3·4·64·4096 = 3,145,728 + B 4·(1024 + 256 + 256)·64 = 393,216; o A 4·64·1024 = 262,144 + B 4·4096·64 =
    #   1,048,576; gate_up A 2·4·64·4096 = 2,097,152 + B 2·4·3584·64 = 1,835,008; down A 4·64·3584 = 917,504 + B
    #   4·4096·64 = 1,048,576: 10,747,904 el × 2 B × 32 layers                            = 687,865,856
    #   embed_tokens and logits as at TP1 (76,283,904 each: not sharded)                 = 152,567,808
    #   base model rows: ceil(1024 / 4) + ceil(256 / 4) = 320 rows × 4096 × 2 B           =   2,621,440
    r = check(["VLLM_USE_V1=0", *VLLM, *LORA, "--tensor-parallel-size", "4"], engine_version="0.8.2", gpu="h100")
    assert terms(r)["lora-buffers"] == 687_865_856 + 152_567_808 + 2_621_440 == 843_055_104
