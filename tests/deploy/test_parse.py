"""Deployment files -> engine containers: what each manifest says, read by hand from the files in tests/data/deploy
(written the way the SGLang / vLLM docs and Helm charts write them). Sizes are the files' own quantities converted
by hand: Gi = 2^30, G = 10^9 (Kubernetes), docker letters are powers of 1024, Slurm --mem is MiB by default."""

from __future__ import annotations

from pathlib import Path

import pytest

from kvplan.deploy.images import entrypoint, is_image_of, tag_version, with_engine_env
from kvplan.deploy.loader import parse_text, read_deployments
from kvplan.deploy.quantity import docker_bytes, k8s_bytes, slurm_mem_bytes
from kvplan.errors import KvplanError

DATA = Path(__file__).resolve().parents[1] / "data" / "deploy"


def one(name: str):
    cs = read_deployments([str(DATA / name)])
    assert len(cs) == 1, cs
    return cs[0]


def test_quantities_by_hand():
    assert k8s_bytes("400Gi") == 400 * 2**30 == 429_496_729_600
    assert k8s_bytes("20G") == 20 * 10**9
    assert k8s_bytes("512Mi") == 536_870_912
    assert k8s_bytes("1e9") == 10**9
    assert docker_bytes("64m") == 64 * 2**20 and docker_bytes("32g") == 32 * 2**30 and docker_bytes("10.24gb") \
        == int(10.24 * 2**30)
    assert slurm_mem_bytes("409600") == 409_600 * 2**20  # MiB by default
    assert slurm_mem_bytes("1000G") == 1000 * 2**30
    for bad in ("lots", "-1Gi", "4 Gi"):
        with pytest.raises(KvplanError):
            k8s_bytes(bad)


def test_incident_pod():
    c = one("incident-pod.yaml")  # the Service in the same file is skipped
    assert (c.workload, c.name) == ("Deployment/sglang-kimi", "server")
    assert c.label.startswith("Deployment/sglang-kimi, container server (")
    assert c.memory_limit_bytes == 400 * 2**30 and c.memory_limit_source == "resources.limits.memory: 400Gi"
    assert c.shm_bytes == 32 * 2**30 and "emptyDir sizeLimit: 32Gi" in c.shm_source
    assert c.gpus == 8 and c.gpu_product == "NVIDIA-RTX-PRO-6000-Blackwell-Server-Edition"
    assert c.argv[:3] == ("python3", "-m", "sglang.launch_server") and "--hicache-size" in c.argv
    assert c.engine_version == "0.5.9" and is_image_of(c.image, "sglang") and not is_image_of(c.image, "vllm")


def test_vllm_offload_pod_gets_the_runtime_default_shm_and_the_image_entrypoint():
    c = one("vllm-offload-default-shm.yaml")
    assert c.argv[:2] == ("vllm", "serve")  # args only: the image's ENTRYPOINT ["vllm", "serve"]
    assert c.shm_bytes == 64 * 2**20 and not c.ipc_host
    assert c.memory_limit_bytes == 256 * 2**30 and c.gpus == 1 and c.engine_version == "0.33.0"


def test_vllm_docs_deployment_and_lws():
    c = one("vllm-mistral-docs.yaml")
    assert c.memory_limit_bytes == 20 * 10**9 and c.shm_bytes == 2 * 2**30 and c.gpus == 1
    assert c.engine_version is None  # :latest names no version
    lws = one("vllm-lws-docs.yaml")  # the worker runs only ray: one engine container, the leader's
    assert lws.workload == "LeaderWorkerSet/vllm (leader)" and lws.nodes == 2 and lws.gpus == 8
    assert lws.memory_limit_bytes == 1124 * 2**30 and lws.shm_bytes == 15 * 2**30
    assert "--pipeline_parallel_size" in lws.argv and lws.argv[lws.argv.index("--tensor-parallel-size") + 1] == "8"


def test_compose_sbatch_docker_run():
    c = one("sglang-compose.yaml")
    assert c.ipc_host and c.shm_bytes is None and c.gpus == 1 and c.memory_limit_bytes is None
    assert c.argv[:3] == ("python3", "-m", "sglang.launch_server")
    s = one("sglang-sbatch.sh")
    assert (s.nodes, s.gpus, s.gpu_product) == (2, 8, "h100") and s.memory_limit_bytes == 1000 * 2**30
    assert s.argv[s.argv.index("--nnodes") + 1] == "2"  # $SLURM_NNODES from #SBATCH --nodes=2
    d = one("vllm-docker-run.sh")
    assert d.gpus == 2 and d.shm_bytes == 64 * 2**20 and d.engine_version == "0.10.2"
    assert d.argv[:2] == ("vllm", "serve")


def test_engine_knowledge_comes_from_the_engines():
    from kvplan.engines import all_engines

    by_engine = {r: e.name for e in all_engines() for r in e.image_entrypoints}
    assert by_engine  # at least one engine image runs an entrypoint
    for repo in by_engine:
        assert entrypoint(f"docker.io/{repo}:v1.2.3") == next(e.image_entrypoints[repo] for e in all_engines()
                                                               if repo in e.image_entrypoints)
    assert entrypoint("nvidia/cuda:12.4.0-base") is None
    assert tag_version("nvidia/cuda:12.4.0-base") == "12.4.0"  # only meaningful with is_image_of
    prefixes = [p for e in all_engines() for p in e.env_prefixes]
    env = {f"{prefixes[0]}X": "1", "HF_TOKEN": "secret"}
    assert with_engine_env(["prog"], env) == [f"{prefixes[0]}X=1", "prog"]


def test_environment_and_scripts():
    text = "export VLLM_CPU_KVCACHE_SPACE=8\nMODEL=Qwen/Qwen3-8B\nvllm serve $MODEL --tensor-parallel-size ${TP:-2}\n"
    (c,) = parse_text(text, "run.sh", "run.sh")
    assert c.argv == ("VLLM_CPU_KVCACHE_SPACE=8", "vllm", "serve", "Qwen/Qwen3-8B", "--tensor-parallel-size", "2")


@pytest.mark.parametrize("text, words", [
    ("apiVersion: v1\nkind: Pod\nspec: {containers: [{name: a, image: x, args: [\n", "not valid YAML"),
    ("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n", "no SGLang or vLLM container"),
    ("apiVersion: example.com/v1\nkind: Widget\nspec: {size: 3}\n", "no SGLang or vLLM container"),
    ("apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web}\nspec:\n  template:\n    spec:\n"
     "      containers: [{name: nginx, image: 'nginx:1.27', args: [nginx, -g, 'daemon off;']}]\n",
     "no SGLang or vLLM container"),
    ("#!/bin/sh\necho hello\n", "no SGLang or vLLM launch command"),
    ("!!python/object/apply:os.system ['true']\napiVersion: v1\n", "not valid YAML"),
])
def test_bad_files_are_one_line_errors(text, words):
    with pytest.raises(KvplanError) as e:
        name = "bad.sh" if text.startswith("#!") else "bad.yaml"
        parse_text(text, name, name)
    assert words in str(e.value) and "bad." in str(e.value) and "\n" not in str(e.value)
