"""vLLM-CPU's MLA backend choice, which sets the block size and chunked prefill of an MLA launch on CPU."""

from __future__ import annotations

from collections.abc import Mapping

from kvplan.engines.versions import Version


def cpu_amx_mla(version: str, env: Mapping[str, str]) -> bool:
    """vLLM-CPU 0.29+ runs MLA on its AMX backend when this machine's CPU has AMX tiles and the CPU_MLA backend is
    not forced (``platforms/cpu.py::CpuPlatform.check_and_update_config``: ``amx_mla_enabled``; 0.28 forces the
    reference CPU MLA kernel, block 16, everywhere; https://github.com/vllm-project/vllm/blob/v0.29.0/vllm/platforms/
    cpu.py). The CPU platform runs where the command runs, so this machine's CPU is the one that counts."""
    from kvplan.hardware.detect import cpu_has_amx

    if Version(version) < Version("0.29.0"):
        return False
    if (env.get("VLLM_ATTENTION_BACKEND") or "").upper() == "CPU_MLA":
        return False
    return cpu_has_amx()
