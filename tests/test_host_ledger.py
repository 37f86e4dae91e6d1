"""The host ledger (issue 25): every term of one node's host memory, by phase, with hand arithmetic from the engines'
own code (flag units, pool formulas) and the calibration entries' published or measured figures. Its findings:
tests/verdict/test_host_findings.py; the real engine's processes against it:
tests/integration/test_host_ledger_real.py."""

from __future__ import annotations

from kvplan import check
from kvplan.hostmem import PIN_RATE
from kvplan.units import GB, GiB, MiB

SG = ["python", "-m", "sglang.launch_server", "--model-path"]
RTX = "NVIDIA RTX PRO 6000 Blackwell Server Edition"
SEEDS = [*SG, "moonshotai/Kimi-K2.5", "--tp", "8", "--mem-fraction-static", "0.88", "--trust-remote-code",
         "--enable-hierarchical-cache", "--hicache-size", "48"]
# ledger calibration figures (hostmem.GPU_RANK_PROCESS, engines/sglang/ledger.py FRONTEND, DETOKENIZER)
RANK = 2_056_600 * 1024 + int(0.28 * GiB)  # torch + CUDA floor (pytorch#113326) + the engine's imports
FRONTENDS = 480 * MiB + 400 * MiB


def _rows(res) -> dict[str, dict]:
    return {r["term"]: r for r in res.to_dict()["per_node"]["host_ledger"]["rows"]}


def test_hicache_95_on_a_100_gib_host():
    r = check([*SG, "Qwen/Qwen3-8B", "--enable-hierarchical-cache", "--hicache-size", "95"], gpu="h100",
              host_mem_gib=100, engine_version="0.5.9")
    # Qwen3-8B bf16 TP1: 8 KV heads × 128 × 2 × 36 layers × 2 B = 147,456 B/token; 95e9 // 147,456 = 644,259 tokens,
    # + one page (page 1) = 644,260 tokens = 95,000,002,560 B = 88.48 GiB pinned (0.5.9: exact cudaHostRegister)
    pool = 644_260 * 147_456
    assert r.plan.per_rank.host_kv_pinned_bytes == pool
    led = r.to_dict()["per_node"]["host_ledger"]
    assert led["steady_bytes"] == pool + RANK + FRONTENDS  # 88.48 + 2.24 + 0.86 = 91.58 GiB
    assert led["peak_phase"] == "steady" and 0.915 < led["peak_share"] < 0.917
    assert led["loading_bytes"] == RANK + FRONTENDS  # the pool is built after the weights and the CUDA graphs


def test_the_seeds_working_launch_ledger():
    r = check(SEEDS, gpu=RTX, host_mem_gib=449, engine_version="0.5.9")
    rows = _rows(r)
    # 8 ranks × 48e9 B (+ one 70,272 B page each) = 384.0e9 B = 357.6 GiB pinned; 8 × 2.24 GiB schedulers; 0.86 GiB
    # of frontends; NCCL between the RTX PRO 6000s' P2P buffers is in GPU memory (0, SHM fallback the high end)
    pools = 8 * rows["hicache"]["bytes_each"]
    assert abs(pools - 8 * 48e9) < 8 * 70_272
    assert rows["hicache"]["memory"] == "pinned" and rows["hicache"]["phases"] == ["steady"]
    assert rows["rank-process"]["count"] == 8 and rows["rank-process"]["bytes_each"] == RANK
    assert rows["weights-page-cache"]["memory"] == "page cache" and rows["weights-page-cache"]["phases"] == ["loading"]
    assert rows["nccl"]["node_range_bytes"] == [0, 8 * 7 * 32 * 4 * MiB]  # communicators: 7 peers × 32 channels
    # the TP group's /dev/shm ring buffer: a page per chunk in use, (4 MiB + 1 + 7 readers) × 6 at worst
    assert rows["message-queue"]["memory"] == "shmem"
    assert rows["message-queue"]["node_range_bytes"] == [6 * 4096, (4 * MiB + 8) * 6]
    led = r.to_dict()["per_node"]["host_ledger"]
    steady = pools + 8 * RANK + FRONTENDS + rows["message-queue"]["node_bytes"]
    assert led["steady_bytes"] == steady and led["budget_bytes"] == 449 * GiB
    assert led["margin_bytes"] == 449 * GiB - steady and 72 * GiB < led["margin_bytes"] < 73 * GiB
    assert led["pin_seconds"] == 384.0  # 384e9 B at 1 GB/s


def test_the_example_prints_the_ledger_and_a_pin_time():
    from tests.conftest import run_cli

    code, out, _ = run_cli(["check", "--example"])
    assert code == 1 and "Host ledger (one node)" in out
    # 8 × 300e9 B pinned at 1 GB/s = 2,400 s = 40 minutes (0.4-10 GB/s: 4-100 minutes)
    assert "pinning 2,400 GB per node: about 40.0 min at 1 GB/s (4.0 min–100.0 min" in out
    assert PIN_RATE.value == 1e9


def test_a_plan_does_not_build_the_ledger():
    from kvplan.engines import detect_engine, split_command
    from kvplan.ledger import _LEDGERS
    from kvplan.options import PlanOptions

    cmd = split_command(SEEDS)
    before = len(_LEDGERS)
    detect_engine(cmd).plan(cmd, PlanOptions(gpu=RTX, host_mem_gib=449.0, engine_version="0.5.9"))
    assert len(_LEDGERS) == before


def test_weights_read_whole_are_a_loading_term():
    r = check([*SG, "Qwen/Qwen3-8B", "--tp", "2", "--weight-loader-disable-mmap"], gpu="h100", host_mem_gib=512,
              engine_version="0.5.9")
    row = _rows(r)["weights-file-read"]
    # safetensors.torch.load(f.read()): the file and its tensors, per rank; transformers' 5 GB shards
    assert row["phases"] == ["loading"] and row["count"] == 2 and row["bytes_each"] == 10 * GB


def test_mooncake_segment_per_tp_rank():
    r = check(["MOONCAKE_GLOBAL_SEGMENT_SIZE=16gb", "MOONCAKE_PROTOCOL=rdma", *SG, "Qwen/Qwen3-8B", "--tp", "4",
               "--enable-hierarchical-cache", "--hicache-storage-backend", "mooncake"], gpu="h100", host_mem_gib=512,
              engine_version="0.5.9")
    rows = _rows(r)
    # "16gb" = 16 GiB (_parse_global_segment_size), // 4 TP ranks = 4 GiB per rank, registered for RDMA
    assert rows["mooncake-segment"]["bytes_each"] == 4 * GiB and rows["mooncake-segment"]["count"] == 4
    assert rows["mooncake-segment"]["memory"] == "pinned" and rows["mooncake-buffer"]["bytes_each"] == 16 * MiB


def test_env_tiers_of_vllm():
    kvbm = check(["DYN_KVBM_CPU_CACHE_GB=100", "vllm", "serve", "Qwen/Qwen3-8B", "-tp", "2", "--kv-transfer-config",
                  '{"kv_connector":"DynamoConnector","kv_role":"kv_both"}'], gpu="h100", host_mem_gib=1024,
                 engine_version="0.11.0")
    row = _rows(kvbm)["kvbm-cpu-cache"]
    # decimal GB over the leader's summed block bytes: 100e9 B for the engine; per rank (2 × 100e9) at the high end
    assert row["node_bytes"] == 100 * GB and row["node_range_bytes"] == [100 * GB, 200 * GB]
    aibrix = check(["vllm", "serve", "Qwen/Qwen3-8B", "-tp", "2", "--kv-transfer-config",
                    '{"kv_connector":"AIBrixOffloadingConnector","kv_role":"kv_both"}'], gpu="h100",
                   host_mem_gib=1024, engine_version="0.11.0")
    row = _rows(aibrix)["aibrix-l1"]
    assert row["bytes_each"] == 10 * GiB and row["count"] == 2 and row["memory"] == "pinned"  # the 10 GiB default


def test_vllm_process_layout_and_cpu_terms():
    one = _rows(check(["vllm", "serve", "Qwen/Qwen3-8B"], gpu="h100", host_mem_gib=512, engine_version="0.11.0"))
    assert "engine-core" not in one and one["rank-process"]["count"] == 1  # uni-process executor at world size 1
    two = _rows(check(["vllm", "serve", "Qwen/Qwen3-8B", "-tp", "2"], gpu="h100", host_mem_gib=512,
                      engine_version="0.11.0"))
    assert two["engine-core"]["count"] == 1 and two["rank-process"]["count"] == 2
    # queues: scheduler broadcast (16 MiB + 3) × 10, two response queues (24 MiB + 2) × 10, TP group (4 MiB + 2) × 6
    full = (16 * MiB + 3) * 10 + 2 * (24 * MiB + 2) * 10 + (4 * MiB + 2) * 6
    assert two["message-queues"]["node_range_bytes"] == [(10 + 20 + 6) * 4096, full]
    cpu = check(["VLLM_CPU_KVCACHE_SPACE=2", "vllm", "serve", "Qwen/Qwen3-8B", "--max-model-len", "4096"],
                host_mem_gib=512, engine_version="0.32.0")
    rows = _rows(cpu)
    assert rows["kv-cache-cpu"]["node_bytes"] == cpu.plan.per_rank.kv_pool_bytes <= 2 * GiB
    assert rows["weights"]["node_bytes"] == cpu.plan.per_rank.weights_bytes
    assert "engine-core" in rows and rows["rank-process"]["count"] == 1  # vLLM-CPU forces the mp executor


def test_json_is_additive():
    r = check([*SG, "Qwen/Qwen3-8B", "--enable-hierarchical-cache", "--hicache-size", "100"], gpu="h100",
              engine_version="0.5.9")
    d = r.to_dict()
    assert d["schema_version"] == 1 and {"host_kv_bytes", "host_available_bytes", "ranks"} <= set(d["per_node"])
    led = d["per_node"]["host_ledger"]
    assert led["budget_bytes"] is None and led["budget_source"] == "not given" and led["margin_bytes"] is None
    assert {"rows", "loading_bytes", "steady_bytes", "peak_phase", "peak_bytes", "pin_seconds"} <= set(led)
