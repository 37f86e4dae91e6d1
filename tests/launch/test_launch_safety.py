"""``kvplan launch`` keeps no secret and nothing readable by others, refuses non-regular --log / --events files,
and marks its state file finished on every exit path, an internal error included (issue #9, item 11). Launches
run in private PID namespaces with private state and shm directories (tests/launch/helpers.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

from tests.launch.helpers import KVPLAN, PIDNS, env_for


def test_fifo_log_and_events_are_refused_without_starting(tmp_path):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    for flag in ("--log", "--events"):  # an open() of the FIFO would block for ever: the run's timeout catches it
        p = subprocess.run([*PIDNS, *KVPLAN, "launch", flag, str(fifo), "--", "touch", str(tmp_path / "started")],
                           capture_output=True, text=True, timeout=600, env=env_for(tmp_path))
        assert p.returncode == 2 and "not a regular file" in p.stderr, (flag, p.stderr)
        assert not (tmp_path / "started").exists()
    for args in (["explain", str(fifo)], ["diagnose", "--log", str(fifo)]):
        p = subprocess.run([sys.executable, "-m", "kvplan", *args], capture_output=True, text=True, timeout=600)
        assert p.returncode == 2 and "not a regular file" in p.stderr, (args, p.stderr)


def test_state_log_and_events_hold_no_secret_and_are_private(tmp_path):
    env = env_for(tmp_path)
    env["NSINIT_REPORT"] = str(tmp_path / "nsinit.json")
    # the server runs until the test has read the running launch's state file (it creates "go"), at most 120 s
    go = tmp_path / "go"
    code = ("import os, sys, time\nend = time.monotonic() + 120\n"
            "while not os.path.exists(sys.argv[1]) and time.monotonic() < end:\n    time.sleep(0.05)")
    cmd = ["HF_TOKEN=hf_secret_1", "python3", "-c", code, str(go), "--api-key", "sk-secret-2"]
    p = subprocess.Popen([*PIDNS, *KVPLAN, "launch", "--plain", "--events", str(tmp_path / "ev.jsonl"), "--", *cmd],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    states, seen = tmp_path / "state", None
    end = time.monotonic() + 120
    while time.monotonic() < end and seen is None and p.poll() is None:
        for f in states.glob("*.json") if states.exists() else []:
            try:
                data = json.loads(f.read_text())
            except ValueError:
                continue
            if data.get("status") == "running":
                seen = (f, data, os.stat(f).st_mode & 0o777, os.stat(states).st_mode & 0o777)
        time.sleep(0.05)
    go.touch()
    out, err = p.communicate(timeout=600)
    assert p.returncode == 0, (out, err)
    assert seen, "no state file of the running launch was seen"
    f, data, file_mode, dir_mode = seen
    text = json.dumps(data)
    assert "sk-secret-2" not in text and "hf_secret_1" not in text and "<redacted>" in text, text
    assert file_mode == 0o600 and dir_mode == 0o700
    log = states / f"{data['id']}.log"  # the kept server log (no --log given)
    assert log.exists() and os.stat(log).st_mode & 0o777 == 0o600
    assert not f.exists()  # finished with nothing left: the state file is gone
    for blob in (out, err, (tmp_path / "ev.jsonl").read_text()):
        assert "sk-secret-2" not in blob and "hf_secret_1" not in blob


SCRIPT = """
import sys
from kvplan.launch import watchdog
calls = []
def evaluate(self, *a, **k):
    calls.append(1)
    if len(calls) > 3:
        raise RuntimeError("a bug in the watchdog")
    return None
watchdog.Watchdog.evaluate = evaluate
from kvplan.cli.main import main
sys.exit(main(sys.argv[1:]))
"""


def test_internal_error_stops_the_tree_and_finishes_the_state(tmp_path):
    env = env_for(tmp_path)
    env["NSINIT_REPORT"] = str(tmp_path / "nsinit.json")
    p = subprocess.run([*PIDNS, sys.executable, "-c", SCRIPT, "launch", "--plain", "--log", str(tmp_path / "l"),
                        "--", sys.executable, "-c", "import os, time; os.fork(); time.sleep(60)"],
                       capture_output=True, text=True, timeout=600, env=env)
    assert p.returncode != 0 and "a bug in the watchdog" in p.stderr, (p.stdout, p.stderr)
    left = json.loads((tmp_path / "nsinit.json").read_text())["left"]
    assert left == [], left  # both processes were stopped before the error went up
    running = [json.loads(f.read_text()) for f in (tmp_path / "state").glob("*.json")]
    assert not [s for s in running if s.get("status") == "running"], running


def test_force_starts_the_command_whatever_the_numbers(tmp_path):
    """Numbers the plan refuses (NaN, inf, 1e400) make the preflight fail; --force still starts the command (no
    sglang here: the started interpreter exits with 1, which kvplan reports as the server's own code)."""
    env = env_for(tmp_path)
    for bad in (["--mem-fraction-static", "nan"], ["--hicache-size", "inf"], ["--context-length", "1e400"]):
        cmd = ["python3", "-m", "sglang.launch_server", "--model-path", "Qwen/Qwen3-8B", *bad]
        p = subprocess.run([*PIDNS, *KVPLAN, "launch", "--force", "--plain", "--gpu", "h100", "--host-mem-gib", "64",
                            "--ready-timeout", "600", "--", *cmd], capture_output=True, text=True, timeout=300, env=env)
        # refused by kvplan's validation ("launching unchecked"), or a flag-bad-value error finding where SGLang's
        # own argparse refuses the value too (type=int for --hicache-size inf): either way the preflight fails
        refused = "launching unchecked (--force)" in p.stdout or "preflight (kvplan check): FAIL" in p.stdout
        assert refused and bad[0] in p.stdout, (bad, p.stdout, p.stderr)
        # ended by the server's own exit, not by the 600 s ready timeout
        assert p.returncode == 1 and "exited by itself with code 1" in p.stdout, (bad, p.stdout, p.stderr)
