"""``kvplan check -f``: the exit codes and JSON a script relies on (0 ok, 1 an error finding, 2 bad input with one
line naming the file)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.conftest import run_cli

DATA = Path(__file__).resolve().parents[1] / "data" / "deploy"


def test_incident_pod_json_names_the_container():
    code, out, err = run_cli(["check", "-f", str(DATA / "incident-pod.yaml"), "--json"])
    assert code == 1, err
    d = json.loads(out)
    assert d["verdict"] == "fail" and len(d["deployments"]) == 1
    dep = d["deployments"][0]
    assert dep["name"].startswith("Deployment/sglang-kimi, container server")
    assert dep["limits"]["memory_limit_bytes"] == 400 * 2**30 and dep["limits"]["gpus_per_node"] == 8
    assert dep["check"]["per_node"]["container_limit_bytes"] == 400 * 2**30
    assert "container-memory-limit" in {f["id"] for f in dep["check"]["findings"]}


def test_repeatable_directory_and_stdin(tmp_path):
    (tmp_path / "a.yaml").write_text((DATA / "incident-fixed-pod.yaml").read_text())
    (tmp_path / "README.md").write_text("not a manifest")  # not a deployment file: not read
    code, out, err = run_cli(["check", "-f", str(tmp_path), "-f", str(DATA / "vllm-offload-default-shm.yaml"),
                              "--json"])
    d = json.loads(out)
    assert [x["workload"] for x in d["deployments"]] == ["Deployment/sglang-kimi", "Deployment/vllm-llama-offload"]
    assert code == 1  # the vLLM pod's shm-too-small
    p = subprocess.run([sys.executable, "-m", "kvplan", "check", "-f", "-", "--json"], capture_output=True,
                       text=True, timeout=600, input=(DATA / "incident-fixed-pod.yaml").read_text())
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout)["deployments"][0]["source"] == "stdin"


def test_human_output_names_each_container():
    code, out, _ = run_cli(["check", "-f", str(DATA / "incident-pod.yaml")])
    assert code == 1
    assert "Deployment/sglang-kimi, container server" in out and "container-memory-limit" in out


def test_bad_input_exit_2_one_line(tmp_path):
    cases = {
        "broken.yaml": "apiVersion: v1\nkind: Pod\nspec: {containers: [\n",
        "widget.yaml": "apiVersion: example.com/v1\nkind: Widget\nmetadata: {name: w}\nspec: {size: 3}\n",
        "web.yaml": "apiVersion: v1\nkind: Pod\nmetadata: {name: web}\nspec:\n  containers:\n"
                    "    - {name: nginx, image: 'nginx:1.27'}\n",
    }
    for name, text in cases.items():
        f = tmp_path / name
        f.write_text(text)
        code, out, err = run_cli(["check", "-f", str(f)])
        assert code == 2, (name, out, err)
        lines = err.strip().splitlines()
        assert len(lines) == 1 and name in lines[0] and "Traceback" not in err, (name, err)
    code, _, err = run_cli(["check", "-f", str(tmp_path / "missing.yaml")])
    assert code == 2 and "missing.yaml" in err
    code, _, err = run_cli(["check", "-f", str(DATA / "incident-pod.yaml"), "--", "vllm", "serve", "x"])
    assert code == 2 and "-f FILE takes no launch command" in err


def test_unplannable_container_is_exit_2_with_its_reason():
    code, out, _ = run_cli(["check", "--gpu", "h100", "-f", str(DATA / "sglang-sts-2nodes.yaml"), "--json"])
    d = json.loads(out)
    assert code == 2 and "unknown model '/llm-folder'" in d["deployments"][0]["error"]


def test_html_report_per_container(tmp_path):
    # one container: the file given; two: <stem>-<n>-<container>.html beside it, each the check report of its launch
    one = tmp_path / "one.html"
    code, _, err = run_cli(["check", "-f", str(DATA / "incident-pod.yaml"), "--html", str(one)])
    assert code == 1 and one.is_file(), err
    assert "Kimi-K2.5" in one.read_text() and "container-memory-limit" in one.read_text()
    two = tmp_path / "two.html"
    code, _, err = run_cli(["check", "-f", str(DATA / "incident-fixed-pod.yaml"), "-f",
                            str(DATA / "vllm-offload-default-shm.yaml"), "--html", str(two)])
    written = sorted(p.name for p in tmp_path.glob("two-*.html"))
    assert len(written) == 2 and not two.exists(), (written, err)
    assert written[0].startswith("two-1-Deployment-sglang-kimi") and written[1].startswith("two-2-Deployment-vllm")
    assert err.count("HTML report written") == 2
