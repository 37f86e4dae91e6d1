"""The foreground supervision loop of ``kvplan launch``: start, follow the log, sample, decide, stop, clean up.

One thread does everything every ``INTERVAL_S`` (a second thread only polls the readiness URL). Signals (Ctrl-C,
SIGTERM, SIGHUP, SIGCHLD) wake the loop through ``signal.set_wakeup_fd``, so a stop request or a child's death is
handled at once, not at the next tick. A second Ctrl-C / SIGTERM during the stop skips the grace period.
"""

from __future__ import annotations

import os
import select
import signal
import time
from dataclasses import dataclass, field
from typing import IO, Any

from kvplan.launch import ownership, procs, redact, shm, watchdog
from kvplan.launch.events import EventLog
from kvplan.launch.health import HealthPoller
from kvplan.launch.phases import PhaseTracker, split_lines
from kvplan.launch.state import LaunchState
from kvplan.launch.verdict import Outcome, PhaseRecord

CHUNK = 1 << 20  # log bytes read per tick at most
CURVE_POINTS = 240


@dataclass
class LaunchConfig:
    argv: list[str]
    env: dict[str, str]
    engine: str | None
    health_urls: list[str]  # [] when readiness cannot be asked; else polled in order, all must answer 2xx
    limits: watchdog.Limits
    log_path: str
    events_path: str | None = None
    grace: float = 1.0  # SIGTERM -> SIGKILL after an abort, or for leftovers after the server exited
    stop_grace: float = 10.0  # ... after a stop on request (Ctrl-C / SIGTERM to kvplan)
    launch_id: str = field(default_factory=procs.new_launch_id)
    token: str = field(default_factory=ownership.new_token, repr=False)  # the launch's secret (launch.ownership)


class Supervisor:
    def __init__(self, cfg: LaunchConfig, reporter, events: EventLog):
        self.cfg, self.rep, self.ev = cfg, reporter, events
        self.tracker = PhaseTracker(cfg.engine)
        self.stop_requests = 0
        self.out = Outcome(code=0, by="server", log_path=cfg.log_path, launch_id=cfg.launch_id)
        self.host = watchdog.Cgroup()
        self.tail: list[str] = []
        self._rest = ""
        self._pos = 0
        self._log_t = 0.0
        self._logf: IO[bytes] | None = None

    # ---------------------------------------------------------------- signals
    def _on_signal(self, signum, frame) -> None:  # noqa: ARG002
        if signum != signal.SIGCHLD:
            self.stop_requests += 1

    def _install(self, wake_w: int) -> dict:
        old: dict[Any, Any] = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP,
                                                                 signal.SIGCHLD)}
        for s in old:
            signal.signal(s, self._on_signal)
        old["wakeup"] = signal.set_wakeup_fd(wake_w, warn_on_full_buffer=False)
        return old

    @staticmethod
    def _restore(old: dict) -> None:
        signal.set_wakeup_fd(old.pop("wakeup"))
        for s, h in old.items():
            signal.signal(s, h)

    # ---------------------------------------------------------------- sampling
    def host_available(self) -> tuple[int, int, int | None]:
        total, avail = watchdog.meminfo()
        cg = self.host.available()
        return total, (min(avail, cg) if cg is not None else avail), cg

    def _read_log(self, now: float) -> None:
        try:
            if self._logf is None:
                self._logf = os.fdopen(procs.open_log(self.cfg.log_path, write=False), "rb")
            self._logf.seek(self._pos)
            data = self._logf.read(CHUNK)
            mtime = os.fstat(self._logf.fileno()).st_mtime
        except OSError:
            return
        if not data:
            return
        self._pos += len(data)
        self._log_t = max(self._log_t, now - max(0.0, time.time() - mtime))  # when it was written, not read
        lines, self._rest = split_lines(self._rest + data.decode(errors="replace"))
        self._rest = self._rest[-65536:]
        for line in lines:
            if not line.strip():
                continue
            self.tail = (self.tail + [line])[-8:]
            for ch in self.tracker.feed(line):
                if ch.kind == "phase":
                    self._phase(ch.phase, now)
                else:
                    self.rep.progress(ch.phase, ch.percent, ch.done, ch.total)
            if not self.cfg.health_urls and self.out.ready_t is None and self.tracker.says_ready(line):
                self._ready(now, None, "log")

    def _phase(self, name: str, now: float) -> None:
        tree = self._last.tree_bytes if self._last else 0
        avail = self._last.host_available if self._last else self.host_available()[1]
        rec = PhaseRecord(name, now - self.t0, tree, avail)
        self.out.phases.append(rec)
        self.ev.emit("phase", phase=name, tree_bytes=tree, host_available_bytes=avail)
        self.rep.phase(rec)

    def _ready(self, now: float, url: str | None, via: str) -> None:
        self.out.ready_t, self.out.ready_url = now - self.t0, url
        self.tracker.enter("ready")
        self._phase("ready", now)
        self.ev.emit("ready", url=url, via=via)
        self.rep.ready(self.out.ready_t, url)

    # ---------------------------------------------------------------- main loop
    def run(self) -> Outcome:
        cfg, out = self.cfg, self.out
        self._last: watchdog.Sample | None = None
        try:
            self._pos = os.path.getsize(cfg.log_path)
        except OSError:
            self._pos = 0
        wake_r, wake_w = os.pipe()
        os.set_blocking(wake_r, False)
        os.set_blocking(wake_w, False)
        old = self._install(wake_w)
        reaper = procs.set_subreaper(True)
        gpu = watchdog.GpuProbe()
        tracker_shm = shm.ShmTracker()
        self.t0 = self.ev.t0 = time.monotonic()
        state: LaunchState | None = None
        try:
            # the state file exists before the command starts: a kvplan killed at any point leaves its record
            state = LaunchState(cfg.launch_id, {
                "token_sha256": ownership.token_hash(cfg.token),
                "kvplan": {"pid": os.getpid(), "start": procs.own_start(), "ns": ownership.pid_ns()},
                "processes": [], "shm_dir": tracker_shm.dir, "shm": [], "argv": redact.argv(cfg.argv),
                "env": redact.env(cfg.env), "log": cfg.log_path, "status": "starting", "started_at": time.time()})
            state.write()
            try:
                root = procs.start(cfg.argv, cfg.env, cfg.log_path, cfg.launch_id, cfg.token)
            except OSError as e:
                out.code, out.by, out.error = 127, "error", f"cannot start {cfg.argv[0]!r}: {e.strerror or e}"
                self.ev.emit("exit", code=127, by="error", server_code=None, left=[], shm_removed=[], killed=0,
                             error=out.error)
                state.remove()
                return out
            tree = procs.ProcessTree(cfg.launch_id, root, cfg.token)
            tree.scan(full=True)
            state.data["status"] = "running"
            self._record(state, tree, tracker_shm, force=True)
            wd = watchdog.Watchdog(cfg.limits)
            health = HealthPoller(cfg.health_urls, wake_w) if cfg.health_urls else None
            if health:
                health.start()
            self.rep.t0 = self.t0
            self.rep.begin(cfg, root.pid, reaper, gpu.ok)
            self._phase("start", self.t0)
            self._log_t = self.t0
            next_tick, next_curve = self.t0, self.t0
            abort = None
            while True:
                now = time.monotonic()
                self._read_log(now)
                tree.reap()
                tree.scan(now)
                rss = tree.measure()
                tracker_shm.poll(list(tree.members), now)
                self._record(state, tree, tracker_shm)
                shm_b = tracker_shm.owned_bytes() if tracker_shm.owned else 0
                total, avail, cg = self.host_available()
                gs = gpu.sample() if gpu.ok else None
                s = watchdog.Sample(now - self.t0, total, avail, cg, shm.used_bytes(tracker_shm.dir), rss + shm_b,
                                    shm_b, len(tree.alive()), now - self._log_t, gs)
                self._last = s
                out.peak_tree = max(out.peak_tree, s.tree_bytes)
                if now >= next_curve:
                    out.curve = (out.curve + [(round(s.t, 2), s.tree_bytes, avail)])[-CURVE_POINTS:]
                    next_curve = now + 1.0
                if root.poll() is not None:
                    out.by, out.server_code = "server", tree.exit_code()
                    break
                if self.stop_requests:
                    out.by = "request"
                    break
                if health and health.ready_at and out.ready_t is None:
                    self._ready(now, cfg.health_urls[0], "http")
                found = wd.evaluate(s, out.ready_t is not None, set(tree.members))
                dead = watchdog.rank_death(tree, True, now)
                abort = found if found and found.reason in ("host-memory", "gpu-memory") else dead or found
                if abort:
                    out.by, out.abort, out.abort_phase, out.abort_t = "abort", abort, self.tracker.phase, s.t
                    self.ev.emit("abort", reason=abort.reason, signal=abort.signal, phase=self.tracker.phase,
                                 message=abort.message, numbers=abort.numbers)
                    self.rep.abort(abort, self.tracker.phase, s.t)
                    break
                self.rep.sample(s, self.tracker)
                next_tick += cfg.limits.interval
                now = time.monotonic()
                if next_tick < now:
                    next_tick = now + cfg.limits.interval
                wake = [next_tick]
                if out.ready_t is None:  # wake exactly at a timeout, not up to one tick later
                    if cfg.limits.ready_timeout:
                        wake.append(self.t0 + cfg.limits.ready_timeout + 1e-3)
                    if cfg.limits.stall_timeout:
                        wake.append(self._log_t + cfg.limits.stall_timeout + 1e-3)
                _wait(wake_r, min(w for w in wake if w > now) - now)
            if health:
                health.stop.set()
            out.code = self._stop(tree, tracker_shm, state)
            return out
        except BaseException as e:  # a bug in kvplan (or a KeyboardInterrupt outside the handlers): nothing left
            left: list = []
            if "tree" in locals():
                try:
                    left = tree.terminate(0.5)
                finally:
                    self._finish(state, left, f"{type(e).__name__}: {e}"[:300])
            else:
                self._finish(state, [], f"{type(e).__name__}: {e}"[:300])
            raise
        finally:
            if reaper:
                procs.set_subreaper(False)
            gpu.close()
            self._restore(old)
            os.close(wake_r)
            os.close(wake_w)
            if self._logf is not None:
                self._logf.close()

    @staticmethod
    def _record(state: LaunchState, tree: procs.ProcessTree, tracker_shm: shm.ShmTracker, force: bool = False
                ) -> None:
        """Keep the state file's processes and segments current (what cleanup may stop or remove later)."""
        seen = [[p, st] for p, st in sorted(tree.seen.items())][:65_536]
        segs = tracker_shm.records()
        if force or seen != state.data["processes"] or segs != state.data["shm"]:
            try:
                state.write(processes=seen, shm=segs)
            except OSError:
                pass  # a full disk must not stop the supervision; the previous record stays

    @staticmethod
    def _finish(state: LaunchState | None, survivors: list, error: str | None = None) -> None:
        """Mark the state file finished: removed when nothing is left, else status left / error."""
        if state is None or state.removed:
            return
        try:
            if survivors:
                state.write(status="error" if error else "left", survivors=[p.pid for p in survivors],
                            **({"error": error} if error else {}))
            else:
                state.remove()
        except OSError:
            pass

    def _stop(self, tree: procs.ProcessTree, tracker_shm: shm.ShmTracker, state: LaunchState) -> int:
        out, cfg = self.out, self.cfg
        t_stop = time.monotonic()
        grace = cfg.stop_grace if out.by == "request" else cfg.grace
        tree.scan(t_stop, full=True)
        out.killed = len(tree.alive())
        if out.killed:
            self.rep.stopping(out.by, out.killed, grace)
        tracker_shm.poll(list(tree.members), t_stop + shm.CHECK_EVERY_S)  # tie segments before their users die
        requests = self.stop_requests
        reserve = cfg.limits.host_reserve

        def escalate() -> bool:
            if self.stop_requests > requests:
                return True  # a second Ctrl-C / SIGTERM
            return out.by == "abort" and watchdog.meminfo()[1] < reserve / 2

        out.survivors = tree.terminate(grace, escalate)
        out.stop_s = time.monotonic() - t_stop
        if out.by == "server" and out.server_code is None:
            out.server_code = tree.exit_code()
        self._read_log(time.monotonic())
        out.last_lines = list(self.tail)
        out.shm_removed, out.shm_failed = tracker_shm.remove_owned()
        out.shm_unattributed = tracker_shm.unattributed()
        out.duration = time.monotonic() - self.t0
        code = {"server": out.server_code or 0, "abort": 3, "request": 0}[out.by]
        if out.survivors:
            code = 4
        self._record(state, tree, tracker_shm)
        self._finish(state, out.survivors)
        seen = sorted(tree.seen.items())
        self.ev.emit("exit", code=code, by=out.by, server_code=out.server_code, left=[p.pid for p in out.survivors],
                     shm_removed=out.shm_removed, killed=out.killed, stop_s=round(out.stop_s, 3),
                     processes=[list(x) for x in seen])
        return code


def _wait(fd: int, timeout: float) -> None:
    if timeout > 0:
        try:
            select.select([fd], [], [], timeout)
        except InterruptedError:
            pass
    try:
        while os.read(fd, 512):
            pass
    except (BlockingIOError, OSError):
        pass
