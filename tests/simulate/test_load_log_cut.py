"""The fidelity harness's calibration log: the warm-up's and the probes' serving lines cut out at line ends."""

from __future__ import annotations

from tests.simulate.vllm_load import Config, RealRun


def test_load_log_keeps_startup_and_load_lines_only(tmp_path):
    log = tmp_path / "A.log"
    parts = [b"start-up 1\nstart-up 2\n", b"probe stats 1\nprobe stats 2\n", b"load stats 1\nload stats 2\n",
             b"probe stats 3\n"]
    log.write_bytes(b"".join(parts))
    c0 = len(parts[0])
    c1 = c0 + len(parts[1])
    c2 = c1 + len(parts[2])
    run = RealRun(Config("A", 32, 16, 4), [], log, cuts=(c0, c1, c2))
    assert run.load_log(tmp_path / "cut.log").read_bytes() == b"start-up 1\nstart-up 2\nload stats 1\nload stats 2\n"
    # cuts inside a line: the head ends at its last whole line, the load starts at its first whole line
    run = RealRun(Config("A", 32, 16, 4), [], log, cuts=(c0 + 3, c1 + 3, c2))
    assert run.load_log(tmp_path / "cut2.log").read_bytes() == b"start-up 1\nstart-up 2\nload stats 2\n"
    # ... and ends at its last whole line
    run = RealRun(Config("A", 32, 16, 4), [], log, cuts=(c0, c1, c2 - 3))
    assert run.load_log(tmp_path / "cut3.log").read_bytes() == b"start-up 1\nstart-up 2\nload stats 1\n"
    # no cuts recorded (an older run): the whole log
    run = RealRun(Config("A", 32, 16, 4), [], log)
    assert run.load_log(tmp_path / "all.log").read_bytes() == log.read_bytes()
