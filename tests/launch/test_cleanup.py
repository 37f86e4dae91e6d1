"""``kvplan cleanup`` touches only what a launch of this user provably left (issue #9): each reproduction of the
issue as a scenario that runs as PID 1 of a private PID namespace with private state and shm directories
(tests/launch/ns_scenarios.py), so nothing on the machine can be signalled or removed; plus unit tests of the
state-file trust checks, the proof of ownership, redaction and the permission-error report."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from kvplan.launch import cleanup, ownership, procs, redact, state

REPO = Path(__file__).resolve().parents[2]


def run_scenario(name: str, tmp: Path) -> dict:
    p = subprocess.run(["unshare", "-pf", "--mount-proc", sys.executable, "-m", "tests.launch.ns_scenarios", name,
                        str(tmp)], capture_output=True, text=True, timeout=300, cwd=REPO,
                       env={k: v for k, v in os.environ.items() if not k.startswith("KVPLAN_")})
    assert p.returncode == 0, (p.stdout[-2000:], p.stderr[-4000:])
    return json.loads(p.stdout.strip().splitlines()[-1])


def test_crashed_launch_is_removed_and_nothing_else(tmp_path):
    o = run_scenario("crashed", tmp_path)
    assert len(o["launched"]) == 3
    assert o["dry"]["code"] == 0 and "its kvplan is gone" in o["dry"]["out"] and "dry run" in o["dry"]["out"]
    assert all(o["alive_after_dry"]), o["dry"]
    assert o["noyes"]["code"] == 1 and "pass --yes" in o["noyes"]["out"] and all(o["alive_after_noyes"])
    out = o["yes"]["out"]
    assert o["yes"]["code"] == 0 and "stopped 3 process(es), removed 1 segment(s)" in out, out
    assert not any(o["alive_after_yes"])
    # the bystanders: all children of this namespace's PID 1, like a container launcher's
    assert o["bystanders_alive"] == {"plain": True, "vllm_title": True, "sglang_title_nobody": True,
                                     "forged_token": True}, out
    assert set(o["bystander_ppids"].values()) == {1}
    assert "engine rank" in out and "not touched" in out  # the look-alike ranks are reported, never killed
    assert "psm_not_recorded" in out and "no kvplan launch recorded it" in out
    assert o["shm_left"] == ["notes.txt", "psm_not_recorded"]  # only the launch's own segment went
    assert o["state_left"] == []
    assert "its kvplan is gone" not in o["again"]["out"]


def test_pid_reuse_never_selects_the_new_process(tmp_path):
    o = run_scenario("pid_reuse", tmp_path)
    assert list(o["reused"].values()) == o["wanted"], o  # the new processes really got the recorded pids
    assert o["victim_is_session_leader"]  # the old "same session, started after the root" rule matched it
    assert o["yes"]["code"] == 0, o["yes"]
    assert o["victims_alive"] == {"root_pid_reused": True, "kvplan_pid_reused": True}, o["yes"]
    assert "stopped 0 process(es)" in o["yes"]["out"] and o["state_left"] == []  # the stale file goes, alone


def test_live_launch_in_a_child_namespace_is_left_alone(tmp_path):
    o = run_scenario("launch_in_child_namespace", tmp_path)
    assert o["started"] and o["state_ns_differs"] and len(o["marked_before"]) == 2, o
    assert o["yes_live"]["code"] == 0 and "is running" in o["yes_live"]["out"], o["yes_live"]
    assert o["marked_after_live"] == o["marked_before"]
    assert any(n.startswith("psm_kvtest_") for n in o["shm_after_live"])
    # its kvplan killed: the processes are found in the child namespace by their proof, and stopped
    assert o["inner_kvplan_found"]
    assert o["yes_dead"]["code"] == 0 and "stopped 2 process(es), removed 1 segment(s)" in o["yes_dead"]["out"], o
    assert o["marked_after_dead"] == [] and o["shm_after_dead"] == []


def test_cleanup_in_a_child_namespace_cannot_see_the_launch(tmp_path):
    o = run_scenario("cleanup_in_child_namespace", tmp_path)
    assert len(o["marked_before"]) == 1
    for k in ("child_live", "child_dead"):
        assert o[k]["code"] == 0 and "cannot see" in o[k]["out"] and "left alone" in o[k]["out"], o[k]
    assert o["marked_after"] == o["marked_before"] and len(o["shm_after"]) == 1
    assert "stopped 1 process(es), removed 1 segment(s)" in o["here_dead"]["out"], o["here_dead"]
    assert o["marked_after_here"] == [] and o["shm_after_here"] == []


def test_other_users_processes_are_never_touched(tmp_path):
    o = run_scenario("other_uid", tmp_path)
    assert sorted(o["uids"].values()) == [0, 65534], o
    assert o["as_nobody"]["code"] == 0 and "ignored" in o["as_nobody"]["out"], o["as_nobody"]
    assert len(o["marked_after_nobody"]) == 2  # nobody's cleanup touched nothing of root's launch
    assert o["yes"]["code"] == 0 and "does not carry its secret" in o["yes"]["out"], o["yes"]
    assert o["alive_by_uid"] == {"0": False, "65534": True}


def test_hostile_state_files_remove_nothing_but_the_proven_segment(tmp_path):
    o = run_scenario("hostile_state_files", tmp_path)
    out = o["yes"]["out"]
    assert o["yes"]["code"] == 0 and o["yes"]["s"] < 20, o["yes"]
    assert o["victims"] == ["abs_victim", "dd_victim", "link_target", "linked.json", "other_dir_victim"], out
    assert o["sub"] == ["x"]
    assert o["shm"] == ["ab", "psm_link", "psm_mapped", "psm_nobody", "psm_replaced", "sub"], out  # psm_ok went
    for name in ("bad-json", "a-list", "deep", "binary", "empty", "shm-string", "abs-path", "dotdot", "slash", "dot",
                 "old-format", "wrong-types", "no-kvplan", "id-mismatch", "linked", "fifo", "world-writable",
                 "nobody-owned", "huge"):
        assert f"state file {tmp_path}/state/{name}.json ignored" in out, (name, out)
    assert "not in" in out and "other-shm-dir" in out  # segments recorded in another directory: not touched
    for why in ("other inode", "still mapped or open by pid", "owned by uid 65534", "not a regular file"):
        assert why in out, (why, out)
    assert "removed 1 segment(s) and 4 stale state file(s)" in out
    assert "mapped-elsewhere.json" in o["state_left"]  # its segment is in use: the record stays for later
    assert o["mapper_alive"]
    for k, why in (("dir_symlink", "symlink"), ("dir_777", "writable by group or others"),
                   ("dir_nobody", "owned by uid 65534")):
        assert o[k]["code"] == 0 and "ignored" in o[k]["out"] and why in o[k]["out"], (k, o[k])
    assert o["shm_final"] == o["shm"]


# ---------------------------------------------------------------------------------------------------- units
def test_permission_error_is_reported_as_such(monkeypatch):
    me = procs.read_stat(os.getpid())

    def refuse(pid, sig):
        raise PermissionError(1, "Operation not permitted")

    monkeypatch.setattr(os, "kill", refuse)
    survivors, refused = cleanup.stop_processes([me], grace=0.05, kill_wait=0.05)
    assert survivors == [] and [p.pid for p in refused] == [os.getpid()]


def test_proof_needs_the_same_uid(monkeypatch):
    monkeypatch.setattr(ownership, "uids", lambda pid: (65534, 65534))
    assert ownership.marker(os.getpid()) is None
    monkeypatch.setattr(ownership, "uids", lambda pid: (os.getuid(), 65534))  # a setuid program
    assert not ownership.same_uid(os.getpid())


def test_proof_needs_the_token_not_just_the_id():
    token = ownership.new_token()
    env = {**os.environ, ownership.MARKER: "20250101-000000-abcdef01", ownership.TOKEN: token}
    # the child says it is up once it runs its own program: before its exec, /proc shows the forked copy of this
    # process's environment (no marker; a loaded run read it there)
    p = subprocess.Popen([sys.executable, "-c", "import time; print('up', flush=True); time.sleep(30)"], env=env,
                         stdout=subprocess.PIPE, text=True)
    try:
        assert p.stdout is not None and p.stdout.readline().strip() == "up"
        assert ownership.carries(p.pid, "20250101-000000-abcdef01", ownership.token_hash(token))
        assert not ownership.carries(p.pid, "20250101-000000-abcdef01", ownership.token_hash(token + "0"))
        assert not ownership.carries(p.pid, "20250101-000000-abcdef02", ownership.token_hash(token))
    finally:
        p.kill()
        p.wait()


def test_malformed_state_data_is_a_value_error(tmp_path):
    good = {"schema": 2, "id": "a", "uid": os.getuid(), "token_sha256": "0" * 64,
            "kvplan": {"pid": 5, "start": 1, "ns": 7}, "processes": [[5, 1]], "shm_dir": "/dev/shm",
            "shm": [{"name": "psm_x", "ino": 3, "dev": 4}], "status": "running", "log": None}
    assert state.parse(good, tmp_path / "a.json", 1).shm[0].name == "psm_x"
    bad = [[], "x", {**good, "schema": 1}, {**good, "uid": os.getuid() + 1}, {**good, "token_sha256": "zz"},
           {**good, "processes": "ab"}, {**good, "processes": [[1, 2, 3]]}, {**good, "processes": [[True, 1]]},
           {**good, "shm": "ab"}, {**good, "shm": [{"name": "/etc/passwd", "ino": 1, "dev": 1}]},
           {**good, "shm": [{"name": "../x", "ino": 1, "dev": 1}]}, {**good, "shm": [{"name": "..", "ino": 1,
                                                                                       "dev": 1}]},
           {**good, "shm": [{"name": "a", "ino": "1", "dev": 1}]}, {**good, "kvplan": None},
           {**good, "kvplan": {"pid": -1, "start": 1}}, {**good, "shm_dir": 3}, {**good, "id": "../a"}]
    for b in bad:
        with pytest.raises(ValueError):
            state.parse(b, tmp_path / "a.json", 1)


def test_state_dir_and_files_are_private(tmp_path, monkeypatch):
    monkeypatch.setenv("KVPLAN_STATE_DIR", str(tmp_path / "st"))
    s = state.LaunchState("20250101-000000-abcdef01", {"argv": redact.argv(["vllm", "--api-key", "sk-123"])})
    s.write()
    assert os.stat(tmp_path / "st").st_mode & 0o777 == 0o700
    assert os.stat(s.path).st_mode & 0o777 == 0o600
    assert "sk-123" not in s.path.read_text()
    os.chmod(tmp_path / "st", 0o755)  # an older kvplan's directory is tightened on the next launch
    state.ensure_dir()
    assert os.stat(tmp_path / "st").st_mode & 0o777 == 0o700


def test_redaction():
    assert redact.argv(["vllm", "serve", "m", "--api-key", "sk-1", "--hf-token=hf_2", "--max-num-batched-tokens",
                        "8192", "--tokenizer", "t"]) == ["vllm", "serve", "m", "--api-key", "<redacted>",
                                                         "--hf-token=<redacted>", "--max-num-batched-tokens", "8192",
                                                         "--tokenizer", "t"]
    assert redact.argv(["HF_TOKEN=hf_3", "VLLM_CPU_KVCACHE_SPACE=4", "vllm"]) == ["HF_TOKEN=<redacted>",
                                                                                 "VLLM_CPU_KVCACHE_SPACE=4", "vllm"]
    assert redact.env({"OPENAI_API_KEY": "x", "CUDA_VISIBLE_DEVICES": "0"}) == {"OPENAI_API_KEY": "<redacted>",
                                                                               "CUDA_VISIBLE_DEVICES": "0"}
    assert "sk-9" not in redact.text("started: vllm serve m --api-key sk-9 --port 1")
    assert redact.obj({"m": ["--api-key=sk-8"]}) == {"m": ["--api-key=<redacted>"]}


def test_bad_state_file_does_not_stop_cleanup_or_lose_a_live_process(tmp_path):
    o = run_scenario("bad_state_file", tmp_path)
    for k in ("dry_unbound", "dry_bound"):
        assert o[k]["code"] == 0 and "Traceback" not in o[k]["out"] and "internal error" not in o[k]["out"], o[k]
        note = next(ln for ln in o[k]["out"].splitlines() if "does not carry its secret" in ln)
        assert f"process {o['live']} " in note and "sleep 600" in note and "sleep 601" not in note, note
    assert o["yes"]["code"] in (0, 1) and "internal error" not in o["yes"]["out"], o["yes"]
    assert o["alive_after_yes"] == {"recorded": True, "marked": True}, o["yes"]  # neither is provably the launch's
    # the record of the live process stays (a later cleanup still knows it); hard links are never unlinked
    assert o["state_left"] == ["gone-live.json", "hardlinked.json"], o["yes"]["out"]
    assert "still runs" in o["yes"]["out"] and "hard link" in o["yes"]["out"], o["yes"]["out"]
    assert o["victims"] == ["keep.json", "psm_linked_too"] and o["shm"] == ["psm_linked"]
    assert "psm_linked (recorded by launch stale-seg): it has 2 hard links" in o["yes"]["out"]
    r = o["raising"]
    assert r["code"] == 1 and "gone-live" in r["out"] and "simulated fault" in r["out"], r
    assert o["state_left_after_raising"] == ["gone-live.json", "hardlinked.json"], r  # stale-two went
    assert o["alive_after_raising"]
