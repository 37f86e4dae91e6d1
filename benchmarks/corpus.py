"""What the fidelity and preflight benchmarks share: the logcorpus cases and how a user would state their
launch (command, GPU, engine version) from a case's own fields."""

from __future__ import annotations

import json
import re
import shlex
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

DEFAULT_CORPUS = ROOT.parent / "shared" / "logcorpus"
HELDOUT_CORPUS = ROOT / "tests" / "data" / "preflight"  # public launches nobody tuned kvplan for (its README)
VERSION_RE = re.compile(r"\b(?:v)?(0\.\d+\.\d+(?:\.post\d+|\.\d+)?)\b")
LAUNCHER_RE = re.compile(r"^\s*(\S+=\S+\s+)*(python\S*\s+-m\s+(sglang|vllm)|sglang\s+serve|vllm\s+serve)")


def load_cases(corpus: Path) -> list[dict]:
    return [json.loads(x) for x in (corpus / "cases.jsonl").read_text().splitlines() if x.strip()]


def model_id(case: dict) -> str:
    """The case's model without the corpus' parenthetical notes ("Qwen/X (Qwen3MoeForCausalLM)" -> "Qwen/X")."""
    return re.sub(r"\s*\(.*$", "", str(case.get("model") or "")).strip()


def model_config(case: dict, corpus: Path) -> str | None:
    """The case's vendored config.json (``model_config`` is relative to the corpus directory), if it has one."""
    rel = case.get("model_config")
    return str(corpus / rel) if rel else None


def engine_version(case: dict) -> str | None:
    m = VERSION_RE.search(str(case.get("engine_version") or ""))
    return m.group(1) if m else None


def gpu_option(case: dict, default: str | None = "h100") -> dict:
    """The GPU as the user would name it: the case's GPU name, else the memory the log printed for it."""
    from kvplan.errors import KvplanError
    from kvplan.hardware.gpus import lookup_gpu

    name = str(case.get("gpu") or "")
    for cand in (name, re.sub(r"\s*\(.*?\)", "", name), name.split(",")[0]):
        if not cand.strip():
            continue
        try:
            return {"gpu": lookup_gpu(cand).name}
        except KvplanError:
            continue
    m = (re.search(r"(\d+(?:\.\d+)?)\s*GiB", str(case.get("gpu_total_mem") or ""))
         or re.search(r"(\d+\.\d+)\s*GiB(?: total)? printed", name))  # "80GB-class (79.22GiB total printed)"
    if m:
        return {"gpu_mem_mib": int(float(m.group(1)) * 1024)}
    return {"gpu": default} if default else {}


def command(case: dict) -> list[str] | None:
    """The case's launch command when it is one; else the engine's launcher with the case's model and args
    (what a user adds after -- for flags the log does not show)."""
    from kvplan.models.catalog import catalog_entry

    cmd = str(case.get("command") or "")
    if LAUNCHER_RE.match(cmd):
        try:
            return shlex.split(cmd.replace("\\\n", " "))
        except ValueError:
            return None
    entry = catalog_entry(model_id(case))
    if entry is None:
        return None
    a = case.get("args") or {}

    def given(k: str) -> bool:
        v = a.get(k)
        return isinstance(v, (int, float, str)) and not isinstance(v, bool) and not str(v).startswith("default")

    if case["engine"] == "sglang":
        argv = ["python", "-m", "sglang.launch_server", "--model-path", entry["id"]]
        for k, flag in (("tp_size", "--tp"), ("dp_size", "--dp"), ("pp_size", "--pp"),
                        ("mem_fraction_static", "--mem-fraction-static"), ("kv_cache_dtype", "--kv-cache-dtype"),
                        ("page_size", "--page-size"), ("context_length", "--context-length")):
            if given(k) and isinstance(a[k], (int, float)):
                argv += [flag, str(a[k])]
        return argv
    argv = ["vllm", "serve", entry["id"]]
    for k, flag in (("tp_size", "-tp"), ("pp_size", "-pp"), ("gpu_memory_utilization", "--gpu-memory-utilization"),
                    ("max_model_len", "--max-model-len"), ("block_size", "--block-size"),
                    ("kv_cache_dtype", "--kv-cache-dtype"), ("dtype", "--dtype"), ("quantization", "--quantization"),
                    ("max_num_seqs", "--max-num-seqs"), ("max_num_batched_tokens", "--max-num-batched-tokens")):
        if given(k):
            argv += [flag, str(a[k])]
    return argv
