"""Deployments planned with their own limits: the findings, with the arithmetic written out by hand.

Ground truth: the manifests' own numbers (tests/data/deploy), the engines' flag semantics (--hicache-size is decimal
GB per rank; vLLM's --kv-offloading-size is GiB in one /dev/shm region, 0.27+) and vLLM's MessageQueue sizes read
in its source (shm_broadcast.py, multiproc_executor.py, parallel_state.py)."""

from __future__ import annotations

from pathlib import Path

from kvplan import check
from kvplan.deploy.check import check_containers
from kvplan.deploy.loader import parse_text, read_deployments
from kvplan.findings.container_memory_limit import PER_RANK_FLOOR_BYTES

DATA = Path(__file__).resolve().parents[1] / "data" / "deploy"
GiB, MiB = 2**30, 2**20
SG = ["python", "-m", "sglang.launch_server", "--model-path"]


def deploy(name: str, **base):
    return check_containers(read_deployments([str(DATA / name)]), base)


def ids(result) -> dict[str, str]:
    return {f.id: f.severity for f in result.findings}


def test_floor_is_the_public_measurement():
    assert PER_RANK_FLOOR_BYTES == 2_056_600 * 1024  # pytorch/pytorch#113326: max RSS 2,056,600 kB
    assert 1.9 * GiB < PER_RANK_FLOOR_BYTES < 2 * GiB


def test_incident_in_a_400gi_pod_is_an_oom_kill():
    r = deploy("incident-pod.yaml")
    (item,) = r.items
    res = item.result
    assert res is not None and item.error is None
    # 8 ranks × 300 GB (decimal, per rank) = 2.4e12 B ≈ 2,235 GiB pinned, ≫ 400 GiB of cgroup limit
    pools = res.plan.per_node.host_kv_bytes
    assert 8 * 300 * 10**9 <= pools < 8 * 300 * 10**9 + 8 * 64 * 70272  # + page rounding (< one page per rank)
    assert res.plan.per_node.container_limit_bytes == 400 * GiB
    found = ids(res)
    assert found["container-memory-limit"] == "error"
    assert "host-oversubscribed" not in found  # the limit binds before the node: one finding, not two
    msg = next(f.message for f in res.findings if f.id == "container-memory-limit")
    assert "400.0 GiB" in msg and "resources.limits.memory: 400Gi" in msg and "psutil" in msg  # 0.5.9: blind
    assert item.to_dict()["name"].startswith("Deployment/sglang-kimi, container server")
    assert r.exit_code == 1 and r.verdict == "fail"
    # the suggested command fits the limit: 0.8 × (400 − 10) GiB / 8 = 39 GiB = 41.9 GB -> --hicache-size 41
    assert res.suggested_command is not None and "--hicache-size 41" in res.suggested_command


def test_incident_fixed_pod_passes():
    r = deploy("incident-fixed-pod.yaml")
    (item,) = r.items
    res = item.result
    assert res is not None
    # 8 × 47 GB = 376e9 B = 350.2 GiB pinned + 8 × 1.96 GiB floor = 365.9 GiB < 400 GiB
    assert res.plan.per_node.host_kv_bytes + 8 * PER_RANK_FLOOR_BYTES < 400 * GiB
    assert not [f for f in res.findings if f.severity == "error"], res.findings
    assert r.exit_code == 0


def test_vllm_offload_with_the_runtime_default_shm():
    (item,) = deploy("vllm-offload-default-shm.yaml").items
    res = item.result
    assert res is not None
    # --kv-offloading-size 64: one /dev/shm region of 64 GiB; the pod has the runtime's 64 MiB
    assert res.plan.per_node.shm_bytes == 64 * MiB
    assert ids(res)["shm-too-small"] == "error"
    msg = next(f.message for f in res.findings if f.id == "shm-too-small")
    assert "64.0 GiB" in msg and "default 64 MB" in msg
    assert "container-memory-limit" not in ids(res)  # 64 GiB + 1 rank × 1.96 GiB < 256 GiB


def test_vllm_tp2_docker_default_shm_is_ipc_missing():
    (item,) = deploy("vllm-docker-run.sh", gpu="h100").items
    res = item.result
    assert res is not None and res.plan.engine_version == "0.10.2"
    # vLLM 0.10.2, V1, 2 workers: scheduler broadcast (16 MiB + 1 + 2) × 10 + TP group (4 MiB + 1 + 2) × 6
    need = (16 * MiB + 3) * 10 + (4 * MiB + 3) * 6
    assert need == 192_938_032 and round(need / MiB) == 184
    f = next(f for f in res.findings if f.id == "ipc-missing")
    assert f.severity == "error" and "184 MiB" in f.message and "64 MiB" in f.message
    assert "gpu-count-mismatch" not in ids(res)  # --gpus 2 for TP 2


def test_sglang_tp2_small_shm_is_a_warning():
    res = check([*SG, "Qwen/Qwen3-8B", "--tp", "2"], gpu="h100", host_mem_gib=512, engine_version="0.5.23",
                shm_gib=64 / 1024, shm_source="docker's default 64 MB")
    assert ids(res)["ipc-missing"] == "warning"
    one_rank = check([*SG, "Qwen/Qwen3-8B"], gpu="h100", host_mem_gib=512, engine_version="0.5.23", shm_gib=0.0625)
    assert "ipc-missing" not in ids(one_rank)


def test_gpu_count_mismatch_both_ways():
    pod = (DATA / "incident-fixed-pod.yaml").read_text()
    fewer = pod.replace("nvidia.com/gpu: 8", "nvidia.com/gpu: 4")
    assert fewer != pod
    (item,) = check_containers(parse_text(fewer, "fewer.yaml", "fewer.yaml"), {}).items
    f = next(f for f in item.result.findings if f.id == "gpu-count-mismatch")
    assert f.severity == "error" and "8 per node" in f.message and "given 4 GPU(s)" in f.message
    more = check([*SG, "Qwen/Qwen3-8B", "--tp", "2"], gpu="h100", host_mem_gib=512, engine_version="0.5.23",
                 gpus_requested=4)
    f = next(f for f in more.findings if f.id == "gpu-count-mismatch")
    assert f.severity == "warning" and "2 stay idle" in f.message


def test_multi_node_is_planned_per_node():
    (s,) = deploy("sglang-sbatch.sh").items  # --tp 16 --nnodes 2, #SBATCH --nodes=2 --gres=gpu:h100:8
    p = s.result.plan
    assert p.cluster.nodes == 2 and p.per_node.ranks == 16 // 2 and p.per_node.gpus_requested == 8
    assert p.per_node.host_kv_bytes >= 8 * 100 * 10**9  # 8 ranks × --hicache-size 100 (GB per rank) on a node
    assert p.per_node.container_limit_bytes == 1000 * GiB  # --mem=1000G per node
    assert "gpu-count-mismatch" not in ids(s.result) and "container-memory-limit" not in ids(s.result)
    (lws,) = deploy("vllm-lws-docs.yaml", gpu="h100").items  # TP8 × PP2 over a group of 2 pods of 8 GPUs
    p = lws.result.plan
    assert p.cluster.nodes == 2 and p.per_node.ranks == 8 and "gpu-count-mismatch" not in ids(lws.result)


def test_docs_examples_plan_without_error():
    tiny = str(Path(__file__).resolve().parents[1] / "data" / "tiny" / "deepseek_v3" / "config.json")
    for name in sorted(p.name for p in DATA.iterdir()):
        base = {"gpu": "h100", "model_config": tiny} if "sts" in name else {"gpu": "h100"}
        r = deploy(name, **base)
        for item in r.items:
            assert item.error is None and item.result is not None, (name, item.error)
            assert r.exit_code in (0, 1)


def test_bare_command_with_a_container_limit():
    cmd = [*SG, "moonshotai/Kimi-K2.5", "--tp", "8", "--enable-hierarchical-cache", "--hicache-size", "300"]
    hw = {"gpu": "NVIDIA RTX PRO 6000 Blackwell Server Edition", "host_mem_gib": 449}
    old = check(cmd, **hw, engine_version="0.5.9", container_mem_gib=400)
    assert ids(old)["container-memory-limit"] == "error" and "host-oversubscribed" not in ids(old)
    new = check(cmd, **hw, engine_version="0.5.23", container_mem_gib=400)
    msg = next(f.message for f in new.findings if f.id == "container-memory-limit")
    assert "reads the cgroup headroom" in msg and "refuses" in msg
    # 0.5.23 checks against min(available 449, cgroup 400) − 10 GiB, split by 8 ranks: 48.75 GiB each < 300 GB
    assert new.plan.settings.hicache.engine_budget_bytes_per_rank == (400 - 10) * GiB // 8
    loose = check(cmd, **hw, engine_version="0.5.9", container_mem_gib=4096)  # the node binds first
    assert ids(loose)["host-oversubscribed"] == "error" and "container-memory-limit" not in ids(loose)
