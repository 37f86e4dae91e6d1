"""vLLM's profile-run terms planned from the command alone vs what real logs printed (../shared/logcorpus).

For each case with a memory breakdown: the activation peak, non-torch, CUDA-graph and KV memory the log shows
next to kvplan's prediction (value and range), and the KV token / block error twice: with kvplan's own weights
(the command alone) and with the log's weight figure (isolates the profile terms). Run:

    python benchmarks/vllm_profile.py [--corpus ../shared/logcorpus]
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import tempfile
from pathlib import Path

GiB = 2**30
ORPHEUS_3B = {
    "architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 3072, "intermediate_size": 8192,
    "num_hidden_layers": 28, "num_attention_heads": 24, "num_key_value_heads": 8, "head_dim": 128,
    "vocab_size": 156940, "max_position_embeddings": 131072, "torch_dtype": "bfloat16", "tie_word_embeddings": True,
    "rope_scaling": {"factor": 32.0, "rope_type": "llama3", "original_max_position_embeddings": 8192}}
R1_DISTILL_QWEN_14B = {
    "architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2", "hidden_size": 5120, "intermediate_size": 13824,
    "num_hidden_layers": 48, "num_attention_heads": 40, "num_key_value_heads": 8, "vocab_size": 152064,
    "max_position_embeddings": 131072, "torch_dtype": "bfloat16", "tie_word_embeddings": False}

# id, command (model dir placeholders), check() options, regexes: weights, activation, non-torch, graph, KV GiB,
# KV blocks (or tokens), block size
CASES = [
    ("vllm-10517-llama31-8b-3090-20k",
     ["vllm", "serve", "meta-llama/Llama-3.1-8B-Instruct", "--max-model-len", "20000"],
     dict(gpu="rtx-3090", engine_version="0.6.4"),
     dict(weights=r"took ([\d.]+) GB", peak_abs=r"peak_torch_memory=([\d.]+)GiB",
          non_torch=r"non_torch_memory=([\d.]+)", kv=r"kv_cache_size=([\d.]+)GiB", blocks=r"GPU blocks: (\d+)")),
    ("vllm-pr10511-llama3-8b-tp1", ["vllm", "serve", "meta-llama/Meta-Llama-3-8B"],
     dict(gpu="h100", engine_version="0.6.5"),
     dict(weights=r"model weights take\s+([\d.]+)GiB", act=r"activation peak memory\s+([\d.]+)GiB",
          non_torch=r"non_torch_memory\s+([\d.]+)GiB", kv=r"available_kv_cache_memory\s+([\d.]+)GiB")),
    ("orpheus-115-orpheus-3b-80gb-v0", ["VLLM_USE_V1=0", "vllm", "serve", "<orpheus>"],
     dict(gpu="a100", engine_version="0.8.0"),
     dict(weights=r"model weights take ([\d.]+)GiB", act=r"activation peak memory takes ([\d.]+)GiB",
          non_torch=r"non_torch_memory takes ([\d.]+)GiB", usable=r"= ([\d.]+)GiB")),
    ("vllm-13882-qwen25-7b-rtx4060-negative-kv", ["vllm", "serve", "Qwen/Qwen2.5-7B-Instruct",
                                                  "--gpu-memory-utilization", "0.7", "--max-model-len", "4096"],
     dict(gpu_mem_mib=8188, gpu="NVIDIA GeForce RTX 4060", engine_version="0.7.3"),
     dict(weights=r"model weights take ([\d.]+)GiB", act=r"activation peak memory takes ([\d.]+)GiB",
          non_torch=r"non_torch_memory takes ([\d.]+)GiB", kv=r"KV Cache is (-?[\d.]+)GiB",
          blocks=r"cuda blocks: (\d+)")),
    ("vllm-13061-r1-distill-qwen14b-2x4090", ["vllm", "serve", "<r1q14>", "--tensor-parallel-size", "2",
                                              "--gpu-memory-utilization", "0.98"],
     dict(gpu="rtx-4090", engine_version="0.7.2"),
     dict(weights=r"took ([\d.]+) GB", non_torch=r"non_torch_memory takes ([\d.]+)GiB",
          act_worker=r"activation peak memory takes ([\d.]+)GiB", tokens=r"stored in KV cache \((\d+)\)")),
    ("vllm-pr57047-qwen3-4b-awq-sm89-48gb-newformat", ["vllm", "serve", "Qwen/Qwen3-4B", "--quantization", "awq",
                                                       "--gpu-memory-utilization", "0.85", "--max-model-len", "2048"],
     dict(gpu="rtx-6000-ada", engine_version="0.33.0"),
     dict(weights=r"([\d.]+) GiB for consumed", act_incl_graph=r"([\d.]+) GiB for peak activation",
          graph=r"([\d.]+) GiB \(estimated\)", kv=r"kv cache memory in use is ([\d.]+) GiB",
          tokens=r"GPU KV cache size: ([\d,]+) tokens")),
    ("llmtracker-vllm063-mi300x-llama2-7b-tp1", ["vllm", "serve", "meta-llama/Llama-2-7b-chat-hf", "--dtype",
                                                 "float16", "--max-model-len", "4096"],
     dict(gpu="mi300x", engine_version="0.6.3"), dict(weights=r"took ([\d.]+) GB", blocks=r"GPU blocks: (\d+)")),
    ("llmtracker-vllm063-mi300x-llama2-7b-tp8", ["vllm", "serve", "meta-llama/Llama-2-7b-chat-hf", "--dtype",
                                                 "float16", "--max-model-len", "4096", "-tp", "8"],
     dict(gpu="mi300x", engine_version="0.6.3"), dict(weights=r"took ([\d.]+) GB", blocks=r"GPU blocks: (\d+)")),
]


def _num(raw: str, pattern: str | None) -> float | None:
    if not pattern:
        return None
    m = re.search(pattern, raw)
    return float(m.group(1).replace(",", "")) if m else None


def _g(b: int) -> str:
    return f"{b / GiB:.2f}"


def _range(terms: dict, name: str) -> str:
    t = terms.get(name)
    return f"{_g(t['bytes'])} [{_g(t['low_bytes'])}-{_g(t['high_bytes'])}]" if t else "-"


def _tokens(plan, want: float | None) -> str:
    if isinstance(plan, Exception):
        return f"error: {plan}"
    got = plan.per_replica.kv_tokens
    return f"{got:,}" if not want else f"{got:,} ({(got - want) / want * 100:+.1f} %)"


def main(argv: list[str] | None = None) -> int:
    from kvplan import check

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--corpus", default=str(Path(__file__).resolve().parents[1].parent / "shared" / "logcorpus"))
    a = ap.parse_args(argv)
    corpus = Path(a.corpus)
    raw_of = {json.loads(x)["id"]: json.loads(x)["raw_file"] for x in (corpus / "cases.jsonl").read_text().splitlines()}
    tmp = Path(tempfile.mkdtemp())
    for name, cfg in (("orpheus", ORPHEUS_3B), ("r1q14", R1_DISTILL_QWEN_14B)):
        (tmp / name).mkdir()
        (tmp / name / "config.json").write_text(json.dumps(cfg))
    g = _g
    print("case | act log/pred [range] | non-torch log/pred [range] | graph log/pred | KV GiB log/pred [range] | "
          "tokens log / pred (kvplan weights, err) / pred (log weights, err)")
    for cid, cmd, opts, rx in CASES:
        raw = (corpus / raw_of[cid]).read_text()
        cmd = [c.replace("<orpheus>", str(tmp / "orpheus")).replace("<r1q14>", str(tmp / "r1q14")) for c in cmd]
        log = {k: _num(raw, v) for k, v in rx.items()}
        plans = []
        for w in (None, log.get("weights")):
            try:
                plans.append(check(cmd, host_mem_gib=64, weights_gib=w, **opts).plan)
            except Exception as e:  # noqa: BLE001 - a report line, not a crash
                plans.append(e)
        p = plans[1] if not isinstance(plans[1], Exception) else plans[0]
        t = {x.name: x.to_dict() for x in p.settings.kv_budget_terms}
        act = log.get("act")
        if log.get("peak_abs") is not None:
            act = log["peak_abs"] - log["weights"]
        if log.get("act_incl_graph") is not None:
            act = log["act_incl_graph"] - log["graph"]
        if log.get("act_worker") is not None:
            act = None
        kv = log.get("kv")
        if kv is None and log.get("usable") is not None:
            kv = log["usable"] - log["weights"] - log["non_torch"] - log["act"]
        bs = p.settings.block_size
        want = log.get("tokens") or (log["blocks"] * bs if log.get("blocks") is not None else None)
        if want is None and kv is not None and kv > 0:  # from the log's 2-decimal KV GiB (± 0.005 GiB)
            want = int(kv * GiB // p.settings.bytes_per_block) * bs
        lo, hi = p.settings.kv_budget_range_bytes_per_rank
        print(f"{cid} | {act if act is None else f'{act:.2f}'} / {_range(t, 'activation-peak')}"
              + (f" (worker log {log['act_worker']:.2f})" if log.get("act_worker") is not None else "")
              + f" | {log.get('non_torch')} / {_range(t, 'non-torch')}"
              f" | {log.get('graph')} / {_range(t, 'cudagraph-estimate')}"
              f" | {kv if kv is None else f'{kv:.2f}'} / {g(p.settings.kv_budget_bytes_per_rank)} [{g(lo)}-{g(hi)}]"
              f" | {want and f'{int(want):,}'} / {_tokens(plans[0], want)} / {_tokens(plans[1], want)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
