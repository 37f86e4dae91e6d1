"""The command line: preflight (refuse on an error finding, --force, non-engine commands), readiness URLs, the
--json / --events streams, and the diagnosis built from the plan."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from kvplan import api
from kvplan.engines import split_command
from kvplan.launch.events import EVENTS
from kvplan.launch.health import health_urls
from kvplan.launch.phases import PHASES
from kvplan.launch.verdict import Outcome, PhaseRecord, diagnose
from kvplan.launch.watchdog import Abort, Limits
from kvplan.units import GiB
from tests.conftest import INCIDENT_CMD, INCIDENT_HW
from tests.launch.helpers import KVPLAN, PIDNS, env_for, fault, launch

TINY = Path(__file__).resolve().parents[1] / "data" / "tiny" / "llama_gqa"


def test_refuses_the_incident_command_without_starting_it(tmp_path):
    log = tmp_path / "server.log"
    p = subprocess.run([*KVPLAN, "launch", "--log", str(log), *INCIDENT_HW, "--", *INCIDENT_CMD], capture_output=True,
                       text=True, timeout=600, env=env_for(tmp_path))
    assert p.returncode == 1, p.stderr
    assert "refusing to launch" in p.stderr and "--hicache-size" in p.stderr  # the suggested command
    assert "host-oversubscribed" in p.stdout  # the check's report
    assert not log.exists()


def test_force_launches_anyway_and_keeps_the_servers_exit_code(tmp_path):
    cmd = ["python3", "-m", "sglang.launch_server", *INCIDENT_CMD[3:]]  # no sglang here: it exits with 1 at once
    run = launch(tmp_path, ["--force", *INCIDENT_HW], cmd)
    assert run.code == 1 and run.event("exit")["by"] == "server", run.out + run.err
    assert "launching anyway (--force)" in run.out and "ready when: http://127.0.0.1:30000/health" in run.out
    # it died during start-up: the report shows why, from its own log, without a trip to the log file
    assert "exited before it was ready" in run.out and "No module named" in run.out, run.out


def test_unknown_commands_are_supervised_without_preflight(tmp_path):
    run = launch(tmp_path, [], ["python3", "-c", "print('hello')"])
    assert run.code == 0 and "no preflight" in run.out and "hello" in run.log


def test_health_urls_from_the_command():
    v = split_command("VLLM_CPU_KVCACHE_SPACE=1 vllm serve m --host 0.0.0.0 --port 8123")
    assert health_urls(v, "vllm", None) == ["http://127.0.0.1:8123/health", "http://127.0.0.1:8123/v1/models"]
    s = split_command("python -m sglang.launch_server --model-path m --host ::1")
    assert health_urls(s, "sglang", None)[0] == "http://[::1]:30000/health"
    assert health_urls(s, "sglang", "http://h:1/ready") == ["http://h:1/ready"]
    assert health_urls(split_command("./serve.sh"), None, None) == []


def test_json_streams_the_events(tmp_path):
    p = subprocess.run([*PIDNS, *KVPLAN, "launch", "--json", "--host-budget-gib", "0.3", "--log", str(tmp_path / "l"),
                        "--", *fault("alloc_steps.py")], capture_output=True, text=True, timeout=600,
                       env=env_for(tmp_path))
    events = [json.loads(x) for x in p.stdout.splitlines()]
    assert p.returncode == 3 and events[0] == {**events[0], "event": "phase", "phase": "start"}
    assert {e["event"] for e in events} <= set(EVENTS) and events[-1]["event"] == "exit"
    assert all(e["phase"] in PHASES for e in events if e["event"] == "phase")
    ts = [e["t"] for e in events]
    assert ts == sorted(ts)


def test_diagnosis_sizes_the_cpu_kv_cache_that_fits():
    cmd = f"VLLM_CPU_KVCACHE_SPACE=4 python -m vllm.entrypoints.openai.api_server --model {TINY} --max-model-len 512"
    res = api.check(cmd, host_mem_gib=3.0)
    out = Outcome(code=3, by="abort", abort=Abort("host-memory", "host-budget", "the launch's memory ..."),
                  abort_phase="kv_pool", abort_t=20.0, peak_tree=int(3.1 * GiB),
                  phases=[PhaseRecord("start", 0, 0, 20 * GiB), PhaseRecord("kv_pool", 18.0, int(1.4 * GiB), 18 * GiB)])
    d = diagnose(out, res, Limits(host_reserve=4 * GiB, host_budget=3 * GiB))
    text = "\n".join(f"{k} {v}" for k, v in d.rows)
    assert "kv_pool" in text and "4.00 GiB per rank" in text and "CPU platform" in text
    assert d.suggested_command.startswith("VLLM_CPU_KVCACHE_SPACE=1 ")
    # the incident: the preflight's own finding is the cause, with its fix and suggested command
    res = api.check(INCIDENT_CMD, gpu=INCIDENT_HW[1], host_mem_gib=449.0, engine_version="0.5.9")
    out.abort, out.abort_phase = Abort("stall", "log-silence", "nothing logged ..."), "host_pool"
    d = diagnose(out, res, Limits(host_reserve=22 * GiB))
    assert any("[host-oversubscribed]" in v for _k, v in d.rows) and "--hicache-size" in d.suggested_command
    assert diagnose(Outcome(code=0, by="request"), res, Limits(host_reserve=GiB)) is None


def test_log_and_events_must_be_ordinary_files(tmp_path):
    # issue #22: --log /proc/self/mem was accepted (it stats as a regular file); refused before anything runs
    import os

    os.mkfifo(tmp_path / "fifo")
    for flag, path, why in (("--log", "/proc/self/mem", "is on proc"), ("--events", "/proc/self/mem", "is on proc"),
                            ("--log", "/sys/kernel/mm/transparent_hugepage/enabled", "is on sysfs"),
                            ("--log", "/dev/null", "not a regular file"),
                            ("--log", str(tmp_path / "fifo"), "not a regular file")):
        p = subprocess.run([*PIDNS, *KVPLAN, "launch", flag, path, "--", "python3", "-c", "print('started')"],
                           capture_output=True, text=True, timeout=60, env=env_for(tmp_path))
        lines = [x for x in p.stderr.splitlines() if x.strip()]
        assert p.returncode == 2 and len(lines) == 1 and why in lines[0] and flag in lines[0], (path, p.stderr)
        assert "started" not in p.stdout and not (tmp_path / "state").exists(), p.stdout  # nothing ran
