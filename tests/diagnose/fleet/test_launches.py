"""Each replica's real launch from -f files: matched by pod name (the longest workload name that is the pod's
prefix), else by port, never by guess; the manifest fills in the plan's inputs as check -f does."""

from __future__ import annotations

import pytest

from kvplan.diagnose.fleet.discover import Replica
from kvplan.diagnose.fleet.launches import read
from kvplan.diagnose.fleet.run import diagnose_fleet
from tests.diagnose.fleet.fake_api import FakeProm, Target, serve
from tests.diagnose.fleet.pages import KV_CC, vllm_page

T0 = 1_800_000_000.0
K8S = """
apiVersion: apps/v1
kind: Deployment
metadata: {name: vllm-kv}
spec:
  replicas: 2
  template:
    spec:
      nodeSelector: {nvidia.com/gpu.product: NVIDIA-H100-80GB-HBM3}
      containers:
      - name: server
        image: vllm/vllm-openai:v0.11.0
        command: ["vllm", "serve", "Qwen/Qwen3-8B", "--gpu-memory-utilization", "0.85", "--port", "8000"]
        resources: {limits: {nvidia.com/gpu: 1}}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: vllm-kv-long}
spec:
  template:
    spec:
      containers:
      - name: server
        image: vllm/vllm-openai:v0.11.0
        command: ["vllm", "serve", "Qwen/Qwen3-8B", "--max-model-len", "32768"]
---
apiVersion: apps/v1
kind: StatefulSet
metadata: {name: sglang-llama}
spec:
  template:
    spec:
      containers:
      - name: sglang
        image: lmsysorg/sglang:v0.5.9
        command: ["python", "-m", "sglang.launch_server", "--model-path", "meta-llama/Meta-Llama-3.1-8B-Instruct"]
"""


@pytest.fixture
def k8s(tmp_path):
    p = tmp_path / "fleet.yaml"
    p.write_text(K8S)
    return str(p)


def _rep(engine: str, **labels: str) -> Replica:
    r = Replica(tuple(labels.get(k, "") for k in ("job", "namespace", "pod", "instance")))
    r.engines[engine] = 1
    return r


def test_matched_by_pod_name_longest_first(k8s):
    ls = read([k8s])
    a = ls.match(_rep("vllm", pod="vllm-kv-6d4f9b7c8-x2x7q", instance="10.1.2.3:8000"), {})
    b = ls.match(_rep("vllm", pod="vllm-kv-long-5f6d-abcde", instance="10.1.2.4:8000"), {})
    c = ls.match(_rep("sglang", pod="sglang-llama-0", instance="10.1.2.5:30000"), {})
    assert a is not None and "--gpu-memory-utilization" in a.argv and a.source.startswith("Deployment/vllm-kv, ")
    assert "matched by pod vllm-kv-6d4f9b7c8-x2x7q" in a.source
    assert a.options["gpu"] == "NVIDIA H100 80GB HBM3" and a.options["engine_version"] == "0.11.0"
    assert b is not None and "--max-model-len" in b.argv
    assert c is not None and c.argv[:3] == ("python", "-m", "sglang.launch_server")
    assert ls.match(_rep("sglang", pod="vllm-kv-1"), {}) is None  # another engine's workload: no match
    assert ls.match(_rep("vllm", pod="other-0"), {}) is None


def test_pod_names_match_within_their_namespace(tmp_path):
    # the same Deployment name in two namespaces, each with its own launch; and one manifest without a namespace
    two = """
apiVersion: apps/v1
kind: Deployment
metadata: {name: vllm, namespace: team-a}
spec:
  template:
    spec:
      containers:
      - {name: server, command: ["vllm", "serve", "Qwen/Qwen3-8B", "--max-num-seqs", "32"]}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: vllm, namespace: team-b}
spec:
  template:
    spec:
      containers:
      - {name: server, command: ["vllm", "serve", "Qwen/Qwen3-8B", "--max-num-seqs", "64"]}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: sglang}
spec:
  template:
    spec:
      containers:
      - {name: server, command: ["python", "-m", "sglang.launch_server", "--model-path", "Qwen/Qwen3-8B"]}
"""
    p = tmp_path / "two.yaml"
    p.write_text(two)
    ls = read([str(p)])
    a = ls.match(_rep("vllm", pod="vllm-7c9d-abcde", namespace="team-a"), {})
    b = ls.match(_rep("vllm", pod="vllm-7c9d-fghij", namespace="team-b"), {})
    assert a is not None and "32" in a.argv and "in namespace team-a" in a.source
    assert b is not None and "64" in b.argv and "in namespace team-b" in b.source
    assert ls.match(_rep("vllm", pod="vllm-7c9d-klmno", namespace="team-c"), {}) is None  # neither namespace
    # a manifest that names no namespace (kubectl apply -n ...) matches a pod in any
    assert ls.match(_rep("sglang", pod="sglang-0", namespace="team-c"), {}) is not None


def test_matched_by_port_only_when_one_launch_serves_it(k8s, tmp_path):
    script = tmp_path / "serve.sh"
    script.write_text("vllm serve Qwen/Qwen3-8B --port 8001 --max-num-seqs 64\n")
    ls = read([str(script), k8s])
    m = ls.match(_rep("vllm", instance="127.0.0.1:8001"), {"gpu": "h100"})
    assert m is not None and "--max-num-seqs" in m.argv and "matched by port 8001" in m.source
    assert m.options["gpu"] == "h100"
    assert ls.match(_rep("vllm", instance="127.0.0.1:8000"), {}) is None  # vllm-kv and vllm-kv-long both: 8000
    assert any("2 launches serve port 8000" in n for n in ls.notes)


def test_replicas_are_priced_on_their_manifest_launch(k8s):
    page = vllm_page("Qwen/Qwen3-8B", 4, 20, 0.97, 60.0, 30.0, KV_CC, t0=T0)
    fake = FakeProm([Target({"job": "vllm", "instance": "10.1.2.3:8000", "pod": "vllm-kv-6d4f9b7c8-x2x7q"}, page,
                            T0, T0 + 60),
                     Target({"job": "vllm", "instance": "10.1.2.9:8000", "pod": "unknown-0"}, page, T0, T0 + 60)])
    with serve(fake) as url:
        d = diagnose_fleet(url, window_s=20, files=[k8s], now=lambda: T0 + 60, env={}, gpu="h100").to_dict()
    by = {r["instance"]: r for r in d["replicas"]}
    kv = by["10.1.2.3:8000"]
    assert kv["launch_source"].startswith("Deployment/vllm-kv, container server") and kv["engine_version"] == "0.11.0"
    assert kv["command"].startswith("vllm serve Qwen/Qwen3-8B --gpu-memory-utilization 0.85")
    assert kv["levers"][0]["name"] == "current" and all(lv["command"] for lv in kv["levers"][1:])
    other = by["10.1.2.9:8000"]
    assert other["launch_source"].startswith("the metrics") and all(lv["command"] is None for lv in other["levers"])
