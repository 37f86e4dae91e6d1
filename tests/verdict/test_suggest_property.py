"""Property (issue 13 item 4): for random valid launches on random hardware, the suggested command kvplan shows,
checked again from its text like any launch, has no error finding; a fix that resizes a host tier shrinks it.

"Valid" means the engine version's own argparse accepts every flag (no flag-* finding): a misspelt flag's fix is a
rename, tested in tests/flags. ``KVPLAN_SUGGEST_EXAMPLES=500`` runs longer than the default."""

from __future__ import annotations

import os
import re

from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from kvplan import check
from kvplan.errors import KvplanError

N = int(os.environ.get("KVPLAN_SUGGEST_EXAMPLES", "30"))
GPUS = ["h100", "h200", "NVIDIA A100-SXM4-80GB", "NVIDIA L40S", "NVIDIA GeForce RTX 4090", "NVIDIA B200",
        "AMD Instinct MI300X", "NVIDIA RTX PRO 6000 Blackwell Server Edition", "NVIDIA A10G"]
MODELS = ["Qwen/Qwen3-8B", "Qwen/Qwen3-32B", "meta-llama/Llama-3.1-8B", "meta-llama/Llama-3.1-70B",
          "deepseek-ai/DeepSeek-V2-Lite", "moonshotai/Kimi-K2.5", "Qwen/Qwen3-30B-A3B",
          "mistralai/Mistral-7B-Instruct-v0.3", "google/gemma-3-27b-it", "openai/gpt-oss-20b"]
SGLANG_VERSIONS = ["0.4.7", "0.5.5", "0.5.9", "0.5.14", "0.5.20", "0.5.23"]
VLLM_VERSIONS = ["0.8.0", "0.10.2", "0.11.0", "0.14.0", "0.20.0", "0.27.0", "0.33.0"]
HOST = st.one_of(st.none(), st.sampled_from([16, 64, 128, 256, 449, 512, 1024, 2048]))
SIZE = re.compile(r"(--hicache-size|--cpu-offload-gb|--kv-offloading-size)[ =]([0-9.]+)")


@st.composite
def sglang_launch(draw):
    cmd = ["python", "-m", "sglang.launch_server", "--model-path", draw(st.sampled_from(MODELS)),
           "--tp", str(draw(st.sampled_from([1, 2, 4, 8])))]
    if draw(st.booleans()):
        cmd += ["--mem-fraction-static", f"{draw(st.floats(0.5, 0.97)):.2f}"]
    if draw(st.booleans()):
        cmd += ["--enable-hierarchical-cache"]
        if draw(st.booleans()):
            cmd += ["--hicache-size", str(draw(st.sampled_from([4, 16, 48, 100, 300, 1000])))]
        elif draw(st.booleans()):
            cmd += ["--hicache-ratio", str(draw(st.sampled_from([1.0, 1.5, 2.0, 4.0])))]
    if draw(st.booleans()):
        cmd += ["--context-length", str(draw(st.sampled_from([2048, 8192, 32768, 131072])))]
    return cmd, draw(st.sampled_from(SGLANG_VERSIONS))


@st.composite
def vllm_launch(draw):
    cmd = ["vllm", "serve", draw(st.sampled_from(MODELS)), "-tp", str(draw(st.sampled_from([1, 2, 4, 8])))]
    if draw(st.booleans()):
        cmd += ["--gpu-memory-utilization", f"{draw(st.floats(0.5, 0.97)):.2f}"]
    if draw(st.booleans()):
        cmd += ["--cpu-offload-gb", str(draw(st.sampled_from([2, 10, 40, 100])))]
    if draw(st.booleans()):
        cmd += ["--kv-offloading-size", str(draw(st.sampled_from([8, 64, 256, 1024, 4096])))]
    if draw(st.booleans()):
        cmd += ["--max-model-len", str(draw(st.sampled_from([1024, 8192, 32768])))]
    return cmd, draw(st.sampled_from(VLLM_VERSIONS))


def _assert_suggestion_passes(cmd: list[str], version: str, gpu: str, host: int | None) -> None:
    opts = {"gpu": gpu, "engine_version": version, **({"host_mem_gib": host} if host else {})}
    try:
        r = check(cmd, **opts)
    except KvplanError:  # e.g. a model the version does not support: bad input, exit 2, no suggestion
        assume(False)
        return
    assume(not any(f.id.startswith("flag-") for f in r.findings))
    if r.suggested_command is None:
        # none shown: no error/warning had flags, or kvplan said why none passes
        assert r.suggestion_note or not any(f.flags for f in r.findings if f.severity in ("error", "warning"))
        return
    again = check(r.suggested_command, **opts)
    errors = [f"{f.id}: {f.message}" for f in again.findings if f.severity == "error"]
    assert errors == [], (" ".join(cmd), r.suggested_command, errors)
    if any(f.id == "host-oversubscribed" and f.severity == "error" for f in r.findings):
        before = dict(SIZE.findall(" ".join(cmd)))
        after = dict(SIZE.findall(r.suggested_command))
        for flag, value in after.items():  # no host tier's setting grows ...
            if flag in before:
                assert float(value) <= float(before[flag]), (flag, before[flag], value)
        # ... and the node pins less (the error was too much pinned host memory)
        assert again.plan.per_node.host_kv_bytes < r.plan.per_node.host_kv_bytes, (before, after)


@settings(max_examples=N, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(sglang_launch(), st.sampled_from(GPUS), HOST)
def test_sglang_suggested_command_has_no_error(launch, gpu, host):
    cmd, version = launch
    _assert_suggestion_passes(cmd, version, gpu, host)


@settings(max_examples=N, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(vllm_launch(), st.sampled_from(GPUS), HOST)
def test_vllm_suggested_command_has_no_error(launch, gpu, host):
    cmd, version = launch
    _assert_suggestion_passes(cmd, version, gpu, host)
