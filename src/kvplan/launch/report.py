"""What ``kvplan launch`` shows: a Rich live view on a terminal (phases with durations and a progress bar, the
memory curve, the last log line), plain timestamped lines otherwise, and the end summary with the diagnosis."""

from __future__ import annotations

import sys
import time
from typing import Any

from kvplan.launch import redact
from kvplan.units import GiB

SPARK = "▁▂▃▄▅▆▇█"


def g(n: float | None) -> str:
    return "n/a" if n is None else f"{n / GiB:,.2f} GiB"


def spark(values: list[int], width: int = 40) -> str:
    vals = values[-width:]
    if not vals:
        return ""
    lo, hi = min(vals), max(vals)
    span = (hi - lo) or 1
    return "".join(SPARK[min(7, int((v - lo) / span * 7.999))] for v in vals)


def durations(phases, end_t: float) -> list[tuple[str, float, float]]:
    """(phase, start s, duration s) for each phase, the last one up to *end_t*."""
    out = []
    for i, p in enumerate(phases):
        nxt = phases[i + 1].t if i + 1 < len(phases) else end_t
        out.append((p.name, p.t, max(0.0, nxt - p.t)))
    return out


class Reporter:
    """Plain lines (not a terminal, or ``--plain``). Subclasses override the live parts."""

    def __init__(self, stream=None):
        self.stream = stream or sys.stdout
        self.t0 = time.monotonic()
        self._pct_shown: dict[str, int] = {}
        self._next_mem = 10.0

    def say(self, text: str) -> None:
        print(text, file=self.stream, flush=True)

    def stamp(self, t: float | None = None) -> str:
        return f"[{(time.monotonic() - self.t0) if t is None else t:7.1f}s]"

    def preflight(self, lines: list[str]) -> None:
        for line in lines:
            self.say(line)

    def begin(self, cfg, pid: int, subreaper: bool, gpu: bool) -> None:
        from kvplan.launch.verdict import quote

        lim = cfg.limits
        self.say(f"kvplan launch {cfg.launch_id}: supervising pid {pid} ({cfg.engine or 'unknown engine'}): "
                 f"{quote(redact.argv(cfg.argv))[:200]}")
        self.say(f"  log {cfg.log_path}" + (f" · events {cfg.events_path}" if cfg.events_path else ""))
        ready = ", ".join(cfg.health_urls) if cfg.health_urls else "the engine's log line (no URL)"
        self.say(f"  watchdog every {lim.interval:g} s: host reserve {g(lim.host_reserve)} (this node)"
                 + (f", budget {g(lim.host_budget)} (this launch)" if lim.host_budget is not None else "")
                 + (f", stall {lim.stall_timeout:g} s" if lim.stall_timeout is not None else "")
                 + (f", ready-timeout {lim.ready_timeout:g} s" if lim.ready_timeout is not None else "")
                 + f"; GPU {'via NVML' if gpu else 'not watched (no NVML)'}"
                 + ("" if subreaper else "; no subreaper (orphans are found by marker only)"))
        self.say(f"  ready when: {ready}")

    def phase(self, rec) -> None:
        self.say(f"{self.stamp(rec.t)} phase {rec.name:<12} launch {g(rec.tree_bytes)}, host available "
                 f"{g(rec.host_available)}")

    def progress(self, phase: str, pct: float | None, done: int | None, total: int | None) -> None:
        step = int((pct or 0) // 25) * 25
        if step > self._pct_shown.get(phase, -1):
            self._pct_shown[phase] = step
            count = f" ({done}/{total})" if total else ""
            self.say(f"{self.stamp()} {phase} {pct:.0f}%{count}")

    def sample(self, s, tracker) -> None:
        if s.t >= self._next_mem:
            self._next_mem = s.t + 10.0
            self.say(f"{self.stamp(s.t)} memory: launch {g(s.tree_bytes)} ({s.procs} processes), host available "
                     f"{g(s.host_available)}, phase {tracker.phase}")

    def ready(self, t: float, url: str | None) -> None:
        self.say(f"{self.stamp(t)} READY" + (f": {url} answered" if url else " (the engine's log says so)"))

    def abort(self, a, phase: str, t: float) -> None:
        self.say(f"{self.stamp(t)} ABORT {a.reason} in phase {phase}: {a.message}")

    def stopping(self, by: str, n: int, grace: float) -> None:
        why = {"abort": "aborting", "request": "stop requested", "server": "the server exited; leftovers"}[by]
        self.say(f"{self.stamp()} {why}: SIGTERM to {n} process(es), SIGKILL after {grace:g} s")

    def end(self, out, diag, note: str | None = None) -> None:
        self.stop_live()
        self.say(self._exit_line(out))
        if out.phases:
            self.say("phases: " + " · ".join(f"{n} {d:.1f}s" for n, _t, d in durations(out.phases, out.duration)))
        if out.curve:
            self.say(f"memory: launch peak {g(out.peak_tree)}; curve (1/s) {spark([c[1] for c in out.curve])}")
        if note:
            self.say(note)
        if out.by == "server" and out.ready_t is None and out.last_lines and diag is None:
            # the engine died during start-up (a missing module, a bad flag, an OOM): what it said last is the why
            self.say(f"the server exited before it was ready (code {out.server_code}); the last lines of its log:")
            for line in out.last_lines[-8:]:
                self.say(f"  {'log':<12} {line[:200]}")
        if diag is not None:
            self.say(diag.headline)
            for label, text in diag.rows:
                self.say(f"  {label:<12} {text}")
            for fix in diag.fix:
                self.say(f"  {'fix':<12} {fix}")
            if diag.suggested_command:
                self.say(f"  {'suggested':<12} {diag.suggested_command}")
            for line in diag.log_tail:
                self.say(f"  {'log':<12} {line[:200]}")

    @staticmethod
    def _exit_line(out) -> str:
        how = {"server": f"the server exited by itself with code {out.server_code}", "abort": "aborted by kvplan",
               "request": "stopped on request", "error": f"could not start: {out.error}"}[out.by]
        left = "nothing left" if not out.survivors else \
            f"LEFT RUNNING: {', '.join(f'{p.pid} (state {p.state})' for p in out.survivors)} (run `kvplan cleanup`)"
        shm = f"; removed {len(out.shm_removed)} /dev/shm segment(s)" if out.shm_removed else ""
        un = f"; {len(out.shm_unattributed)} new /dev/shm segment(s) not tied to it" if out.shm_unattributed else ""
        return f"exit {out.code}: {how} after {out.duration:.1f} s; {left}{shm}{un}; log {out.log_path}"

    def stop_live(self) -> None:
        pass


class Quiet(Reporter):
    """``--json``: the events stream is the output."""

    def say(self, text: str) -> None:
        pass


class LiveReporter(Reporter):
    """A Rich live view, refreshed twice a second; lines above it keep the history."""

    def __init__(self, console):
        super().__init__(console.file)
        from rich.live import Live

        self.console = console
        self.phases: list = []
        self.pct: float | None = None
        self.mem: list[int] = []
        self.last = None
        self.phase_name = "start"
        self.line = ""
        self.live = Live(self, console=console, refresh_per_second=2, transient=True)
        self._started = False

    def say(self, text: str) -> None:
        self.console.print(text, markup=False, highlight=False)

    def begin(self, cfg, pid, subreaper, gpu) -> None:
        super().begin(cfg, pid, subreaper, gpu)
        self.live.start()
        self._started = True

    def phase(self, rec) -> None:
        self.phases.append(rec)
        self.phase_name, self.pct = rec.name, None
        super().phase(rec)

    def progress(self, phase, pct, done, total) -> None:
        self.pct = pct

    def sample(self, s, tracker) -> None:
        self.last, self.line = s, tracker.last_line
        if not self.mem or s.t >= len(self.mem) * 0.5:
            self.mem.append(s.tree_bytes)

    def stop_live(self) -> None:
        if self._started:
            self.live.stop()
            self._started = False

    def __rich__(self):
        from rich.console import Group
        from rich.progress_bar import ProgressBar
        from rich.table import Table
        from rich.text import Text

        now = time.monotonic() - self.t0
        t = Table.grid(padding=(0, 2))
        for name, start, dur in durations(self.phases, now):
            cur = name == self.phase_name
            t.add_row(Text(name, style="bold" if cur else "dim"), f"{start:6.1f}s", f"{dur:6.1f}s",
                      ProgressBar(total=100, completed=self.pct or 0, width=30) if cur and self.pct is not None
                      else Text(f"{self.pct:.0f}%" if cur and self.pct is not None else ""))
        parts: list[Any] = [t]
        s = self.last
        if s is not None:
            mem = Text(f"launch {g(s.tree_bytes)} ({s.procs} proc) {spark(self.mem)}  host available "
                       f"{g(s.host_available)}" + (f"  /dev/shm used {g(s.shm_used)}" if s.shm_used else ""))
            if s.gpus:
                mem.append("  GPU free " + " ".join(f"{x.index}:{x.free / GiB:.1f}" for x in s.gpus) + " GiB")
            parts.append(mem)
            parts.append(Text(f"log silent {s.silent_s:4.0f}s │ {self.line[-150:]}", style="dim"))
        return Group(*parts)


def make_reporter(mode: str):
    """*mode*: "json" (quiet), "plain", or "auto" (live on a terminal)."""
    if mode == "json":
        return Quiet()
    if mode == "auto" and sys.stdout.isatty():
        from rich.console import Console

        return LiveReporter(Console())
    return Reporter()
