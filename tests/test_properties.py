"""Properties: parsers never raise anything but KvplanError on random input; plans are monotone where
physics says so (more memory never gives fewer tokens; more ranks per node never less host demand)."""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kvplan import check
from kvplan.engines import split_command
from kvplan.engines.sglang.args import parse_sglang
from kvplan.errors import KvplanError
from kvplan.models.config import spec_from_config

FLAG_WORDS = ["--tp", "--tp-size", "--dp", "--mem-fraction-static", "--hicache-size", "--hicache-ratio",
              "--enable-hierarchical-cache", "--page-size", "--kv-cache-dtype", "--model-path", "--context-length",
              "--max-running-requests", "--enable-dp-attention", "--weird-flag", "--", "-m", "="]
token = st.one_of(st.sampled_from(FLAG_WORDS), st.text(max_size=12),
                  st.integers(-5, 10**6).map(str), st.floats(allow_nan=True).map(str))


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(token, max_size=14), st.sampled_from([["python", "-m", "sglang.launch_server"],
                                                     ["sglang", "serve"], ["FOO=1", "python3", "-m",
                                                                           "sglang.launch_server"]]))
def test_command_parser_never_crashes(tokens, prefix):
    # the launcher is recognised whatever follows it: its env prefix, program and flags split where they are
    if any("\0" in t for t in tokens):  # no argv holds a NUL: the validation layer refuses it in one line
        with pytest.raises(KvplanError) as e:
            split_command([*prefix, *tokens])
        _one_line(e.value)
        return
    cmd = split_command([*prefix, *tokens])
    assert cmd.env == ({"FOO": "1"} if prefix[0] == "FOO=1" else {})
    kept = tuple(t for t in tokens if t not in ("\\", "\\\n", "") and t.strip() != "\\")  # minus continuations
    assert cmd.program == tuple(t for t in prefix if t != "FOO=1") and cmd.args == kept
    try:
        parse_sglang(cmd)
    except KvplanError as e:  # a bad flag value is the CLI's one line, never a traceback
        _one_line(e)


def _one_line(e: KvplanError) -> None:
    msg = str(e)
    assert msg.strip() and "\n" not in msg and "Traceback" not in msg, msg


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=200))
def test_command_string_parser_never_crashes(text):
    try:
        cmd = split_command(text)
    except KvplanError as e:  # empty, unbalanced quotes, only variables: one line
        _one_line(e)
        return
    # what it split is the whole command: env prefixes (and wrappers), then the program, then its flags
    assert cmd.program and cmd.argv[len(cmd.argv) - len(cmd.program) - len(cmd.args):] == cmd.program + cmd.args
    assert all(f"{k}={v}" in cmd.argv for k, v in cmd.env.items())


json_value = st.recursive(st.none() | st.booleans() | st.integers(-10, 10**6) | st.floats() | st.text(max_size=8),
                          lambda c: st.lists(c, max_size=4) | st.dictionaries(st.text(max_size=8), c, max_size=4),
                          max_leaves=12)
CONFIG_KEYS = ["architectures", "num_hidden_layers", "hidden_size", "num_attention_heads", "num_key_value_heads",
               "head_dim", "vocab_size", "max_position_embeddings", "kv_lora_rank", "qk_rope_head_dim",
               "qk_nope_head_dim", "v_head_dim", "layer_types", "sliding_window", "text_config", "quantization_config",
               "n_routed_experts", "linear_num_key_heads", "model_type", "torch_dtype"]


@settings(max_examples=400, deadline=None)
@given(st.dictionaries(st.sampled_from(CONFIG_KEYS), json_value | st.just(["LlamaForCausalLM"])
                       | st.just(["DeepseekV3ForCausalLM"]) | st.integers(1, 64), max_size=12))
def test_config_reader_never_crashes(cfg):
    try:
        spec = spec_from_config(json.loads(json.dumps(cfg, default=str)), name="fuzz")
        assert spec.num_layers > 0
    except KvplanError:
        pass


SGL = ["python", "-m", "sglang.launch_server", "--model-path", "meta-llama/Llama-3.1-8B-Instruct"]


def _tokens(mfs: float, mib: int) -> int:
    return check([*SGL, "--mem-fraction-static", f"{mfs}"], gpu_mem_mib=mib, host_mem_gib=64,
                 engine_version="0.5.9").plan.per_rank.kv_tokens


@settings(max_examples=40, deadline=None)
@given(st.floats(0.3, 0.94), st.floats(0.001, 0.05), st.integers(20_000, 200_000), st.integers(0, 50_000))
def test_more_memory_never_fewer_tokens(mfs, dm, mib, dmib):
    assert _tokens(mfs + dm, mib) >= _tokens(mfs, mib)
    assert _tokens(mfs, mib + dmib) >= _tokens(mfs, mib)


@settings(max_examples=20, deadline=None)
@given(st.integers(1, 8), st.integers(1, 200))
def test_more_ranks_per_node_never_less_host_demand(per_node, size_gb):
    cmd = [*SGL, "--tp", "8", "--enable-hierarchical-cache", "--hicache-size", str(size_gb)]
    a = check(cmd, gpu="h100", gpus_per_node=per_node, host_mem_gib=4096, engine_version="0.5.9")
    b = check(cmd, gpu="h100", gpus_per_node=min(8, per_node + 1), host_mem_gib=4096, engine_version="0.5.9")
    assert b.plan.per_node.host_kv_bytes >= a.plan.per_node.host_kv_bytes
    # and the per-node demand is exactly ranks on the node × the per-rank pool
    assert a.plan.per_node.host_kv_bytes == a.plan.per_node.ranks * a.plan.per_rank.host_kv_pinned_bytes
