"""The rough edges of issue 13 item 6 and `kvplan plan` for both engines (item 5)."""

from __future__ import annotations

import io
import json

from kvplan import check, plan
from kvplan.report.human import render
from tests.conftest import run_cli

SG = ["python", "-m", "sglang.launch_server", "--model-path"]


def _text(result, width=80) -> str:
    from rich.console import Console

    buf = io.StringIO()
    render(result, Console(file=buf, width=width, color_system=None))
    return buf.getvalue()


def test_fixes_name_no_other_version():
    r = check([*SG, "moonshotai/Kimi-K2.5", "--tp", "8", "--enable-hierarchical-cache", "--hicache-size", "300"],
              gpu="NVIDIA RTX PRO 6000 Blackwell Server Edition", host_mem_gib=449, engine_version="0.5.9")
    for f in r.findings:
        assert "0.5.23" not in f.fix, f.fix
    assert "0.5.23" not in r.plan.settings.host_fix.text


def test_no_doubled_words_in_the_report():
    for cmd, hw in (([*SG, "Qwen/Qwen3-8B"], {"gpu": "h100"}),
                    (["vllm", "serve", "Qwen/Qwen3-8B", "--cpu-offload-gb", "4"], {"gpu": "h100"})):
        out = _text(check(cmd, **hw), width=400)
        for doubled in ("from estimated from", "not given (not given", "estimated (estimated"):
            assert doubled not in out


def test_long_values_wrap_not_truncate():
    r = check(["vllm", "serve", "meta-llama/Llama-3.1-70B", "-tp", "4", "--cpu-offload-gb", "40",
               "--kv-offloading-size", "100"], gpu="NVIDIA RTX PRO 6000 Blackwell Server Edition", host_mem_gib=256,
              engine_version="0.27.0")
    out = _text(r, width=80)
    assert "…" not in out
    # the suggested command and the command checked are printed whole (soft wrap) so that they copy as one line
    whole = {r.suggested_command or "", f"command checked: {r.plan.command}"}
    assert max(len(x) for x in out.splitlines() if x not in whole) <= 80


def test_vllm_report_has_no_sglang_reserve_row_and_labels_weights():
    r = check(["vllm", "serve", "meta-llama/Llama-3.1-70B", "-tp", "4", "--cpu-offload-gb", "10"], gpu="h100",
              host_mem_gib=256, engine_version="0.11.0")
    out = _text(r, width=200)
    assert "engine host reserve" not in out and "HiCache" not in out
    assert "host KV requested" not in out  # --cpu-offload-gb holds weights, not KV
    assert "host weights pinned" in out and "kept free by kvplan" in out


def test_requests_use_min_of_avg_and_max_len():
    """--max-model-len 1024: no request is longer, so "requests that fit" counts requests of 1,024 tokens: the
    usable blocks (all but the null block) / ceil(1024 / 16) blocks, capped by max_num_seqs."""
    r = check(["vllm", "serve", "Qwen/Qwen3-8B", "--max-model-len", "1024"], gpu="h100", host_mem_gib=256,
              engine_version="0.11.0")
    rep, s = r.plan.per_replica, r.plan.settings
    assert rep.avg_tokens == 1024
    assert rep.requests_fit == min((r.plan.per_rank.kv_blocks - 1) // (1024 // 16), s.max_num_seqs)
    assert "requests of 1,024 tokens" in _text(r, width=200)
    r2 = check([*SG, "Qwen/Qwen3-8B", "--context-length", "2048"], gpu="h100", host_mem_gib=256,
               engine_version="0.5.9")
    assert r2.plan.per_replica.avg_tokens == 2048


def test_tp16_spans_two_nodes_of_eight():
    r = check([*SG, "deepseek-ai/DeepSeek-V3", "--tp", "16"], gpu="h100", host_mem_gib=1024, engine_version="0.5.9")
    c, n = r.plan.cluster, r.plan.per_node
    assert (c.gpus_per_node, c.nodes, n.ranks) == (8, 2, 8)
    r2 = check([*SG, "deepseek-ai/DeepSeek-V3", "--tp", "16"], gpu="h100", host_mem_gib=1024,
               engine_version="0.5.9", gpus_per_node=16)
    assert (r2.plan.cluster.gpus_per_node, r2.plan.cluster.nodes) == (16, 1)


def test_plan_for_vllm_builds_its_command():
    r = plan("Qwen/Qwen3-8B", engine="vllm", tp=2, gpu="h100", host_mem_gib=256, engine_version="0.11.0",
             extra_args=["--max-model-len", "8192"])
    assert r.plan.engine == "vllm" and r.plan.settings.tensor_parallel_size == 2
    assert r.plan.settings.max_model_len == 8192
    code, out, err = run_cli(["plan", "--engine", "vllm", "--model", "Qwen/Qwen3-8B", "--tp", "2", "--gpu", "h100",
                              "--host-mem-gib", "256", "--engine-version", "0.27.0", "--gpu-memory-utilization", "0.8",
                              "--kv-offloading-size", "16", "--json"])
    assert code == 0, err
    d = json.loads(out)
    assert d["engine"] == "vllm" and d["settings"]["gpu_memory_utilization"] == 0.8
    assert "--kv-offloading-size 16" in d["command"] and "--tensor-parallel-size 2" in d["command"]


def test_plan_refuses_another_engines_setting():
    code, out, err = run_cli(["plan", "--engine", "vllm", "--model", "Qwen/Qwen3-8B", "--gpu", "h100",
                              "--mem-fraction-static", "0.8"])
    assert code == 2 and "--mem-fraction-static is not a vLLM setting" in err and "--gpu-memory-utilization" in err
    code, out, err = run_cli(["plan", "--model", "Qwen/Qwen3-8B", "--gpu", "h100", "--max-model-len", "4096"])
    assert code == 2 and "not a SGLang setting" in err


def test_plan_help_explains_every_option():
    code, out, _ = run_cli(["plan", "--help"])
    assert code == 0
    import re

    opts = re.findall(r"^  (--[a-z-]+)", out, re.M)
    assert len(opts) > 20
    # every option line is followed by help text (argparse prints "--opt X   help" or help on the next line)
    for o in opts:
        block = out.split(o, 1)[1].split("\n  --", 1)[0]
        assert len(block.split()) >= 3, o
    for unit in ("decimal GB", "GiB", "per rank", "per node", "fraction (0-1)"):
        assert unit in out
