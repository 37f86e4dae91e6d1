"""Severities from the whole host ledger (issue 25): one rule per question (host-oversubscribed: the node's memory,
container-memory-limit: the cgroup, host-near-full: the last 10 %, host-pin-slow: the time to pin), each naming the
biggest terms. Figures are hand arithmetic (tests/test_host_ledger.py writes the ledger's out)."""

from __future__ import annotations

from kvplan import check

SG = ["python", "-m", "sglang.launch_server", "--model-path"]
RTX = "NVIDIA RTX PRO 6000 Blackwell Server Edition"
SEEDS = [*SG, "moonshotai/Kimi-K2.5", "--tp", "8", "--mem-fraction-static", "0.88", "--trust-remote-code",
         "--enable-hierarchical-cache", "--hicache-size", "48"]


def _ids(res) -> dict[str, str]:
    return {f.id: f.severity for f in res.findings}


def test_hicache_95_on_a_100_gib_host_is_a_warning_that_names_the_terms():
    # 88.48 GiB pinned + 2.24 GiB scheduler + 0.86 GiB frontends = 91.58 GiB = 91.6 % of 100 GiB (> 90 %, fits)
    r = check([*SG, "Qwen/Qwen3-8B", "--enable-hierarchical-cache", "--hicache-size", "95"], gpu="h100",
              host_mem_gib=100, engine_version="0.5.9")
    assert _ids(r)["host-near-full"] == "warning" and r.verdict == "warn"
    msg = next(f.message for f in r.findings if f.id == "host-near-full")
    assert "HiCache host pool 88.5 GiB" in msg and "Scheduler process 2.2 GiB" in msg and "91.6%" in msg
    assert "--hicache-size" in r.suggested_command  # the engine's own resize fits the node again


def test_the_seeds_working_launch_passes_the_host_check():
    # 376.4 GiB steady peak of 449 GiB (83.8 %): no host error or warning; pinning 384e9 B at 1 GB/s = 6.4 minutes
    r = check(SEEDS, gpu=RTX, host_mem_gib=449, engine_version="0.5.9")
    assert not {"host-oversubscribed", "host-near-full"} & set(_ids(r))
    assert not [f for f in r.findings if f.severity == "error"]
    pin = next(f for f in r.findings if f.id == "host-pin-slow")
    assert pin.severity == "warning" and "384 GB pinned" in pin.message and "about 6 minutes" in pin.message


def test_the_example_warns_about_its_pin_time():
    # 8 × 300e9 B = 2.4e12 B at 1 GB/s = 40 minutes; the node (449 GiB) runs dry after 482e9 B ≈ 8 minutes of it
    r = check([*SG, "moonshotai/Kimi-K2.5", "--tp", "8", "--enable-hierarchical-cache", "--hicache-size", "300"],
              gpu=RTX, host_mem_gib=449, engine_version="0.5.9")
    assert _ids(r)["host-oversubscribed"] == "error"
    pin = next(f for f in r.findings if f.id == "host-pin-slow")
    assert "about 40 minutes to pin" in pin.message and "run the host dry after about 8 minutes" in pin.message


def test_a_cpu_kv_cache_larger_than_the_host_is_an_error():
    r = check(["VLLM_CPU_KVCACHE_SPACE=40", "vllm", "serve", "Qwen/Qwen3-8B", "--max-model-len", "4096"],
              host_mem_gib=32, engine_version="0.32.0")
    assert _ids(r)["host-oversubscribed"] == "error"
    msg = next(f.message for f in r.findings if f.id == "host-oversubscribed")
    assert "CPU KV cache 40.0 GiB" in msg and "32 GiB available" in msg


def test_unknown_hosts_say_what_the_node_needs():
    r = check([*SG, "Qwen/Qwen3-8B", "--enable-hierarchical-cache", "--hicache-size", "100"], gpu="h100",
              engine_version="0.5.9")
    info = next(f for f in r.findings if f.id == "host-oversubscribed")
    assert info.severity == "info" and "needs at least 96 GiB" in info.message  # 93.1 + 2.24 + 0.86 GiB
