"""The hostile inputs of issue #22, each run as a user runs it: wall seconds, CPU seconds, peak RSS, exit code and the
first stderr line, under a 3 GiB address-space cap (RLIMIT_AS) and a 60 s timeout.

    python benchmarks/hostile.py [NAME-SUBSTRING ...]

Inputs are written to a temporary folder; nothing else is read or written. The acceptance of the issue: exit 2 with one
line on stderr (or a bounded answer), within 10 s and 3 GiB, no "internal error"; 500 unknown flags under 3 s.
(The cleanup repro runs in a private PID namespace in tests/launch/test_cleanup.py, the serve repros in
tests/html/test_serve_limits.py.)
"""

from __future__ import annotations

import json
import os
import resource
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
LIMIT = 3 * 2**30
DEEP = "[" * 100_000 + "]" * 100_000


def _bomb() -> str:
    names = "abcdefghi"
    lines = ['  a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    lines += [f"  {names[i]}: &{names[i]} [" + ",".join([f"*{names[i - 1]}"] * 9) + "]" for i in range(1, 9)]
    return "x-bomb:\n" + "\n".join(lines) + "\n"


def inputs(d: Path) -> dict[str, list[str]]:
    cfg = json.loads((REPO / "tests" / "data" / "llama31_8b_config.json").read_text())
    (d / "compose-env.yaml").write_text(_bomb() + "services:\n  v:\n    image: vllm/vllm-openai:v0.8.5\n"
                                        '    command: ["--model", "Qwen/Qwen3-8B"]\n    environment:\n      B: *i\n')
    (d / "compose-mem.yaml").write_text(_bomb() + "services:\n  v:\n    image: vllm/vllm-openai:v0.8.5\n"
                                        '    command: ["--model", "Qwen/Qwen3-8B"]\n    mem_limit: *i\n')
    (d / "kube-env.yaml").write_text(_bomb() + "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  containers:\n"
                                     "    - name: s\n      image: vllm/vllm-openai:v0.8.5\n"
                                     '      args: ["--model", "Qwen/Qwen3-8B"]\n      env: [{name: B, value: *i}]\n')
    (d / "w.jsonl").write_text(DEEP + "\n")
    ck = d / "ckpt"
    ck.mkdir()
    (ck / "config.json").write_text(json.dumps(cfg))
    hdr = ('{"__metadata__": ' + DEEP + "}").encode()
    (ck / "model.safetensors").write_bytes(struct.pack("<Q", len(hdr)) + hdr)
    (d / "Dockerfile").write_text("FROM vllm/vllm-openai:v0.8.5\nCMD " + DEEP + "\n")
    big = dict(cfg, num_hidden_layers=32)
    (d / "config.json").write_text(json.dumps(big).replace('"num_hidden_layers": 32', '"num_hidden_layers": '
                                                           + "9" * 5000))
    for kind, image in (("list", '["a", "b"]'), ("map", "{a: 1}")):
        (d / f"compose-image-{kind}.yaml").write_text(f"services:\n  v:\n    image: {image}\n"
                                                      "    command: [vllm, serve, Qwen/Qwen3-8B]\n")
        (d / f"kube-image-{kind}.yaml").write_text("apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n"
                                                   f"  containers:\n    - name: s\n      image: {image}\n"
                                                   "      command: [vllm, serve, Qwen/Qwen3-8B]\n")
    (d / "run.sh").write_text("docker run --gpus all vllm/vllm-openai:v0.8.5 --model Qwen/Qwen3-8B "
                              "--served-model-name " + "a" * 1_500_000 + "\n")
    api = "import kvplan; kvplan.plan('deepseek-ai/DeepSeek-V3', gpu='h100', {})"
    k = [sys.executable, "-m", "kvplan"]
    return {
        "1 alias bomb, Compose environment": [*k, "check", "-f", str(d / "compose-env.yaml"), "--gpu", "h100"],
        "1 alias bomb, Compose mem_limit": [*k, "check", "-f", str(d / "compose-mem.yaml"), "--gpu", "h100"],
        "1 alias bomb, Kubernetes env value": [*k, "check", "-f", str(d / "kube-env.yaml"), "--gpu", "h100"],
        "3 model path of 300 bytes": [*k, "check", "--gpu", "h100", "--", "vllm", "serve", "/" + "a" * 300],
        "3 model path of 300 bytes (API)": [sys.executable, "-c", "import kvplan\ntry:\n kvplan.check(['vllm','serve',"
                                            f"'/{'a' * 300}'], gpu='h100')\nexcept kvplan.KvplanError as e:\n "
                                            "raise SystemExit('KvplanError: ' + str(e)[:80])"],
        "3 nested JSON workload": [*k, "simulate", "--gpu", "h100", "--workload", str(d / "w.jsonl"), "--", "vllm",
                                   "serve", "Qwen/Qwen3-8B"],
        "3 nested safetensors header": [*k, "check", "--gpu", "h100", "--", "vllm", "serve", str(ck)],
        "3 nested Dockerfile CMD": [*k, "check", "-f", str(d / "Dockerfile"), "--gpu", "h100"],
        "3 5,000-digit integer in config.json": [*k, "check", "--gpu", "h100", "--model-config",
                                                 str(d / "config.json"), "--", "vllm", "serve", "Qwen/Qwen3-8B"],
        **{f"3 {w} image: a {kind}": [*k, "check", "-f", str(d / f"{w.lower()}-image-{kind}.yaml"), "--gpu", "h100"]
           for w in ("Compose", "Kube") for kind in ("list", "map")},
        "4 500 repeated unknown flags": [*k, "check", "--gpu", "h100", "--host-mem-gib", "512", "--", "vllm", "serve",
                                         "Qwen/Qwen3-8B", *(["--bogus-flag"] * 500)],
        "4 one 1.5 MB token in docker run": [*k, "check", "-f", str(d / "run.sh"), "--gpu", "h100"],
        **{f"6 API {a}": [sys.executable, "-c", "import kvplan\ntry:\n " + api.format(a) + "\nexcept "
                          "kvplan.KvplanError as e:\n raise SystemExit('KvplanError: ' + str(e))"]
           for a in ("pp=[2]", "dp='vllm'", "engine=[2]")},
        "7 -pp 64 on a 36-layer model": [*k, "check", "--gpu", "h100", "--", "vllm", "serve", "Qwen/Qwen3-8B", "-pp",
                                         "64"],
        "7 argparse error": [*k, "check", "--gpu-mem-mib", "x"],
    }


def run(argv: list[str]) -> dict:
    """One child: its own wall time, CPU time and peak RSS (os.wait4 on it), exit code and last stderr line."""
    import threading

    def cap() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (LIMIT, LIMIT))

    t0 = time.monotonic()
    p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL,
                         preexec_fn=cap)
    got: dict[str, bytes] = {}
    readers = [threading.Thread(target=lambda n=n, f=f: got.__setitem__(n, f.read()), daemon=True)
               for n, f in (("out", p.stdout), ("err", p.stderr))]
    for t in readers:
        t.start()
    code: object = "timeout"
    while True:
        pid, status, ru = os.wait4(p.pid, os.WNOHANG)
        if pid:
            code = os.waitstatus_to_exitcode(status)
            break
        if time.monotonic() - t0 > 60:
            p.kill()
            _, _, ru = os.wait4(p.pid, 0)
            break
        time.sleep(0.01)
    p.returncode = code if isinstance(code, int) else -9  # reaped here: Popen must not wait for it again
    wall = time.monotonic() - t0
    for t in readers:
        t.join()
    lines = [x for x in got.get("err", b"").decode(errors="replace").splitlines() if x.strip()]
    return {"wall_s": round(wall, 2), "cpu_s": round(ru.ru_utime + ru.ru_stime, 2), "rss_mib": ru.ru_maxrss >> 10,
            "code": code, "stderr_lines": len(lines), "stderr": (lines or [""])[-1][:160]}


def main(selected: list[str]) -> None:
    with tempfile.TemporaryDirectory(prefix="kvplan-hostile-") as tmp:
        cases = inputs(Path(tmp))
        for name, argv in cases.items():
            if selected and not any(s in name for s in selected):
                continue
            r = run(argv)
            print(f"{name:40s} exit {r['code']!s:7s} {r['wall_s']:6.2f} s wall {r['cpu_s']:6.2f} s CPU "
                  f"{r['rss_mib']:5,d} MiB  stderr {r['stderr_lines']} line(s): {r['stderr']}", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
