"""One validation layer for numbers (issue #9, items 9 and 10): every value that crashed or lied before is a
one-line KvplanError naming the field and the value; sane values still plan."""

from __future__ import annotations

import json
import time

import pytest

from kvplan import check, validate
from kvplan.errors import KvplanError
from kvplan.models.config import spec_from_config

SGL = ["python", "-m", "sglang.launch_server", "--model-path", "Qwen/Qwen3-8B"]
VLLM = ["vllm", "serve", "Qwen/Qwen3-8B"]
HW = {"gpu": "h100", "host_mem_gib": 100}


@pytest.mark.parametrize("value, ok", [(0.5, True), ("0.5", True), (1, True), (float("nan"), False),
                                       (float("inf"), False), (0, False), (1.01, False), (True, False),
                                       ("abc", False), (None, False), ([0.5], False)])
def test_fraction(value, ok):
    if ok:
        assert 0 < validate.fraction("--x", value) <= 1
    else:
        with pytest.raises(KvplanError, match="--x"):
            validate.fraction("--x", value)


def test_sizes_are_bounded_below_2_to_60():
    assert validate.size_bytes("--b", 2**60 - 1) == 2**60 - 1
    for bad in (2**60, -1, 1e400, float("nan"), 1.5):
        with pytest.raises(KvplanError, match="--b"):
            validate.size_bytes("--b", bad)
    assert validate.gib("--g", 0) == 0.0
    with pytest.raises(KvplanError):
        validate.gib("--g", 2**30)  # 2^30 GiB = 2^60 bytes
    with pytest.raises(KvplanError):
        validate.gib("--g", 0, positive=True)


@pytest.mark.parametrize("cmd, field", [
    ([*SGL, "--mem-fraction-static", "nan"], "--mem-fraction-static"),
    ([*SGL, "--mem-fraction-static", "inf"], "--mem-fraction-static"),
    ([*SGL, "--enable-hierarchical-cache", "--hicache-size", "inf"], "--hicache-size"),
    ([*SGL, "--enable-hierarchical-cache", "--hicache-size", "nan"], "--hicache-size"),
    ([*SGL, "--enable-hierarchical-cache", "--hicache-ratio", "inf"], "--hicache-ratio"),
    ([*SGL, "--swa-full-tokens-ratio", "nan"], "--swa-full-tokens-ratio"),
    ([*SGL, "--hicache-host-memory-fraction", "2"], "--hicache-host-memory-fraction"),
    ([*SGL, "--context-length", "99999999999999"], "--context-length"),
    ([*SGL, "--tp", "100000000"], "--tp-size"),
    ([*SGL, "--max-running-requests", "0"], "--max-running-requests"),
    ([*VLLM, "--kv-cache-memory-bytes", "1e400"], "--kv-cache-memory-bytes"),
    ([*VLLM, "--kv-cache-memory-bytes", "nan"], "--kv-cache-memory-bytes"),
    ([*VLLM, "--kv-cache-memory-bytes", "2000000T"], "--kv-cache-memory-bytes"),
    ([*VLLM, "--gpu-memory-utilization", "nan"], "--gpu-memory-utilization"),
    ([*VLLM, "--cpu-offload-gb", "inf"], "--cpu-offload-gb"),
    ([*VLLM, "--kv-offloading-size", "nan"], "--kv-offloading-size"),
    ([*VLLM, "--swap-space", "1e300"], "--swap-space"),
    ([*VLLM, "--max-model-len", "1e30"], "--max-model-len"),
    ([*VLLM, "--max-model-len", "4294967296"], "--max-model-len"),
    (["LMCACHE_MAX_LOCAL_CPU_SIZE=nan", *VLLM, "--kv-transfer-config", '{"kv_connector":"LMCacheConnectorV1"}'],
     "LMCACHE_MAX_LOCAL_CPU_SIZE"),
    (["LMCACHE_MAX_LOCAL_CPU_SIZE=inf", *VLLM, "--kv-transfer-config", '{"kv_connector":"LMCacheConnectorV1"}'],
     "LMCACHE_MAX_LOCAL_CPU_SIZE"),
    ([*VLLM, "--kv-transfer-config", '{"kv_connector":"LMCacheConnectorV1","kv_connector_extra_config":'
      '{"max_local_cpu_size": -3}}'], "max_local_cpu_size"),
    (["VLLM_CPU_KVCACHE_SPACE=99999999999999999999", *VLLM], "VLLM_CPU_KVCACHE_SPACE"),
    ([*VLLM, "--kv-transfer-config", "[" * 100_000], "--kv-transfer-config"),
])
def test_bad_flag_and_env_values_name_the_field(cmd, field):
    """Refused either as a one-line KvplanError (exit 2) or, when the engine's own argparse would refuse the value
    too (``type=int`` for "inf", a flag that version no longer has), as an error finding naming the flag (exit 1)."""
    t0 = time.process_time()  # CPU time: the work done, not the waits of a busy machine
    try:
        res = check(cmd, engine_version="0.10.0" if cmd[0] == "vllm" or "vllm" in cmd else None, **HW)
    except KvplanError as e:
        assert field in str(e) and "\n" not in str(e)
    else:
        errors = [f for f in res.findings if f.severity == "error" and f.id.startswith("flag-")]
        assert errors and field in errors[0].message, [f.to_dict() for f in res.findings]
    assert time.process_time() - t0 < 5


@pytest.mark.parametrize("opt, value", [("weights_gib", float("inf")), ("free_gib", float("inf")),
                                        ("kv_memory_gib", float("nan")), ("host_mem_gib", float("nan")),
                                        ("gpu_mem_mib", 10**20), ("avg_tokens", 10**21), ("nodes", 0),
                                        ("gpus_per_node", 10**9), ("weights_gib", -2.0)])
def test_bad_options_name_the_option(opt, value):
    with pytest.raises(KvplanError, match="--" + opt.replace("_", "-")):
        check(SGL, **{**HW, opt: value})


def test_sane_values_still_plan():
    r = check([*SGL, "--mem-fraction-static", "0.85", "--enable-hierarchical-cache", "--hicache-size", "20"], **HW)
    assert r.plan.per_rank.kv_tokens > 0
    r = check([*VLLM, "--kv-cache-memory-bytes", "8G", "--max-model-len", "32k"], **HW)
    assert r.plan.per_rank.kv_tokens > 0


LLAMA = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "num_hidden_layers": 32, "hidden_size": 4096,
         "num_attention_heads": 32, "num_key_value_heads": 8, "vocab_size": 128256, "intermediate_size": 14336,
         "max_position_embeddings": 8192, "torch_dtype": "bfloat16"}
DSV3 = {"architectures": ["DeepseekV3ForCausalLM"], "model_type": "deepseek_v3", "num_hidden_layers": 61,
        "hidden_size": 7168, "num_attention_heads": 128, "num_key_value_heads": 128, "vocab_size": 129280,
        "intermediate_size": 18432, "moe_intermediate_size": 2048, "n_routed_experts": 256,
        "num_experts_per_tok": 8, "n_shared_experts": 1, "first_k_dense_replace": 3, "kv_lora_rank": 512,
        "qk_rope_head_dim": 64, "qk_nope_head_dim": 128, "v_head_dim": 128, "q_lora_rank": 1536,
        "max_position_embeddings": 163840}


@pytest.mark.parametrize("base, change, field", [
    (LLAMA, {"num_hidden_layers": 1e8}, "num_hidden_layers"),
    (LLAMA, {"num_hidden_layers": 100_000}, "num_hidden_layers"),
    (LLAMA, {"head_dim": -128}, "head_dim"),
    (LLAMA, {"head_dim": 0}, "head_dim"),
    (LLAMA, {"intermediate_size": -5}, "intermediate_size"),
    (LLAMA, {"num_attention_heads": 8192, "hidden_size": 4096}, "hidden_size"),  # was a ZeroDivisionError
    (LLAMA, {"num_attention_heads": 5000, "num_key_value_heads": 8}, "hidden_size"),  # 4096 % 5000
    (LLAMA, {"num_key_value_heads": 0}, "num_key_value_heads"),
    (LLAMA, {"num_key_value_heads": 64}, "num_key_value_heads"),  # more KV heads than heads
    (LLAMA, {"max_position_embeddings": 1e30}, "max_position_embeddings"),
    (LLAMA, {"max_position_embeddings": float("nan")}, "max_position_embeddings"),
    (LLAMA, {"rope_scaling": {"type": "linear", "factor": float("inf")}}, "factor"),
    (LLAMA, {"vocab_size": "many"}, "vocab_size"),
    (LLAMA, {"hidden_size": True}, "hidden_size"),
    (DSV3, {"first_k_dense_replace": 62}, "first_k_dense_replace"),
    (DSV3, {"kv_lora_rank": -1}, "kv_lora_rank"),
    (DSV3, {"num_experts_per_tok": 300}, "num_experts_per_tok"),
    (LLAMA, {"quantization_config": {"quant_method": "fp8", "weight_block_size": [0, 128]}}, "weight_block_size"),
    (LLAMA, {"quantization_config": {"quant_method": "gptq", "bits": float("inf")}}, "bits"),
])
def test_bad_config_fields_name_the_field(base, change, field):
    cfg = json.loads(json.dumps({**base, **change}))
    t0 = time.process_time()  # CPU time: the work done, not the waits of a busy machine
    with pytest.raises(KvplanError) as e:
        spec_from_config(cfg, name="fuzz")
    assert field in str(e.value), str(e.value)
    assert time.process_time() - t0 < 1


def test_kv_heads_are_never_silently_replaced():
    with pytest.raises(KvplanError, match="num_key_value_heads"):
        spec_from_config({**LLAMA, "num_key_value_heads": 0})
    assert spec_from_config({k: v for k, v in LLAMA.items() if k != "num_key_value_heads"}).num_kv_heads == 32


def test_gptq_per_channel_group_size_gives_positive_weights():
    # 32 layers of a Llama-8B at 4 bits: about 8e9 params × 0.5 byte in the linear layers, never negative
    spec = spec_from_config({**LLAMA, "quantization_config": {"quant_method": "gptq", "bits": 4, "group_size": -1}})
    assert spec.weight_bytes > 3e9


def test_real_configs_still_parse():
    assert spec_from_config(LLAMA).num_layers == 32
    assert spec_from_config(DSV3).num_layers == 61


def test_sliding_window_zero_means_no_window():
    # transformers' Qwen2MoeConfig(use_sliding_window=False) serialises sliding_window 0 (seen in CI's tiny
    # checkpoints); a negative window is still refused
    moe = {**LLAMA, "architectures": ["Qwen2MoeForCausalLM"], "model_type": "qwen2_moe", "sliding_window": 0,
           "use_sliding_window": False, "num_experts": 8, "num_experts_per_tok": 2, "moe_intermediate_size": 1408}
    assert spec_from_config(moe).sliding_window is None
    with pytest.raises(KvplanError, match="sliding_window"):
        spec_from_config({**moe, "sliding_window": -1})


# ------------------------------------------------------------------------- issue #22: strings, paths, nesting, JSON
def test_text_and_scalar():
    assert validate.text("--x", "abc") == "abc"
    assert validate.text("env A", 8, scalar=True) == "8" and validate.text("env A", True, scalar=True) == "true"
    for bad, why in ((["a"], "a list of 1 item"), ({"a": 1, "b": 2}, "a map of 2 keys"), (None, "null"),
                     ("x" * 5000, "5,000 characters long"), ("a\0b", "NUL")):
        with pytest.raises(KvplanError, match=why):
            validate.text("--x", bad, scalar=True)
    with pytest.raises(KvplanError, match="bits"):
        validate.text("env A", 10**400, scalar=True)  # str() of it would raise ValueError past 4,300 digits


@pytest.mark.parametrize("value, why", [("/" + "a" * 256, "component of 256 bytes"),
                                        ("é/" * 1500, "longer than a path can be"),
                                        ("/é" * 200, None), (b"/x", "must be a string")])
def test_paths_are_bounded_like_the_kernel(value, why):
    if why is None:
        assert validate.path("--p", value) == value  # 400 bytes in all, 2-byte components: fine
        return
    with pytest.raises(KvplanError, match=why):
        validate.path("--p", value)


def test_numbers_written_as_long_text():
    with pytest.raises(KvplanError, match="too long to be a number"):
        validate.count("--n", "9" * 5000)
    assert validate.count("--n", "  8  ") == 8


@pytest.mark.parametrize("text, why", [("[" * 100_000 + "]" * 100_000, "nested more than 64 levels"),
                                       ("[" * 70 + "]" * 70, "nested more than 64 levels"),
                                       ('{"n": ' + "9" * 5000 + "}", "a number of 5,000 digits"),
                                       ('{"n": 1', "malformed JSON at line 1"),
                                       (b"\xff\xfe", "not UTF-8")])
def test_json_value_bounds(text, why):
    with pytest.raises(KvplanError, match=why):
        validate.json_value(text, "f.json")


def test_json_value_keeps_ordinary_json():
    assert validate.json_value('{"a": [1, 2.5, null, true], "n": 12345678901234567890}', "f") == \
        {"a": [1, 2.5, None, True], "n": 12345678901234567890}
    assert validate.json_value("[" * 64 + "]" * 64, "f") is not None
    shared: list = []
    assert validate.depth("x", [shared, shared, {"k": shared}]) is not None  # shared values walked once


def test_error_messages_are_one_bounded_line():
    e = KvplanError("bad value 'a\nb\x1b[31m'" + "x" * 5000, "hint\nsecond line")
    text = str(e)
    assert "\n" not in text and "\x1b" not in text and "\\n" in text and "\\x1b" in text
    assert len(text) < 2100
