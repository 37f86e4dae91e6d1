"""``kvplan launch``: argparse wiring and the preflight; kvplan.launch supervises. Heavy modules load inside the
command (the CLI must start fast).

Exit codes of ``launch``: the server's own when it exits by itself (128+N for signal N), 3 when kvplan aborted it,
0 after a clean stop on request, 1 when the preflight refuses (an error finding, no ``--force``), 2 bad input,
4 when something could not be stopped (run ``kvplan cleanup``), 127 when the command cannot be started.
"""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover
    from kvplan.engines.cmdline import LaunchCommand
    from kvplan.result import CheckResult


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> argparse.ArgumentParser:
    """Register ``launch`` on kvplan's subparsers."""
    from kvplan.cli.exitcodes import LAUNCH_EXIT_CODES, HelpFormatter, exit_codes
    from kvplan.cli.options import add_plan_options, json_option

    p = sub.add_parser("launch", help="start a launch command under a watchdog: kvplan launch [options] -- <command>",
                       description="Preflight the command like `kvplan check`, start it in its own session, follow "
                       "its startup phases and memory, and stop the whole process tree (nothing left behind) before "
                       "the host runs dry. Put the command after --.", epilog=exit_codes(*LAUNCH_EXIT_CODES),
                       formatter_class=HelpFormatter)
    json_option(add_plan_options(p), "print the events (JSON lines, as --events writes them) instead of the report")
    w = p.add_argument_group("watchdog")
    w.add_argument("--host-reserve-gib", type=float,
                   help="abort before host available memory falls below this (default: 5%% of RAM, 4-32 GiB)")
    w.add_argument("--host-budget-gib", type=float,
                   help="abort when the launch's processes (private RSS + their /dev/shm) would exceed this")
    w.add_argument("--gpu-reserve-mib", type=int, default=256,
                   help="abort when a GPU of the launch has less free memory than this (NVML; default 256)")
    w.add_argument("--stall-timeout", type=float,
                   help="abort when nothing is logged for this many seconds while memory climbs (default 300, or "
                   "longer when the plan's host ledger expects pinning to take longer; 0: off)")
    w.add_argument("--ready-timeout", type=float,
                   help="abort when not ready after this many seconds (default 1800 when readiness can be asked; "
                   "0: off)")
    w.add_argument("--health-url", help="readiness URL (default http://127.0.0.1:PORT/health then /v1/models, "
                   "PORT from the command)")
    w.add_argument("--grace", type=float, default=1.0,
                   help="seconds between SIGTERM and SIGKILL when kvplan aborts (default 1)")
    w.add_argument("--stop-grace", type=float, default=10.0,
                   help="the same after Ctrl-C / SIGTERM to kvplan (default 10; a second Ctrl-C kills at once)")
    w.add_argument("--events", help="append JSON lines (phase, ready, abort, exit) to this file")
    w.add_argument("--log", help="the server's stdout+stderr (default: ~/.cache/kvplan/launches/<id>.log)")
    w.add_argument("--force", action="store_true", help="launch even when the preflight finds errors")
    w.add_argument("--plain", action="store_true", help="plain lines even on a terminal")
    return p


def _split_env(tokens: list[str]) -> tuple[dict[str, str], list[str]]:
    import re

    env: dict[str, str] = {}
    i = 0
    while i < len(tokens) and re.match(r"^[A-Za-z_][A-Za-z0-9_]*=", tokens[i]):
        k, v = tokens[i].split("=", 1)
        env[k] = v
        i += 1
    return env, tokens[i:]


def _preflight(a: argparse.Namespace, command: list[str],
               rep: Any) -> tuple[CheckResult | None, str | None, LaunchCommand, int | None]:
    """(CheckResult or None, engine name or None, the LaunchCommand, exit code if refused)."""
    from kvplan import api
    from kvplan.cli.options import plan_options
    from kvplan.engines import detect_engine, split_command
    from kvplan.errors import KvplanError

    cmd = split_command(command)
    try:
        engine = detect_engine(cmd).name
    except KvplanError:
        rep.preflight(["preflight: not a known engine launch command, so no preflight (no plan, phases read from "
                       "the log only): supervised as is"])
        return None, None, cmd, None
    opts = plan_options(a)
    if opts.get("host_mem_gib") is None and a.host_budget_gib is not None:
        opts["host_mem_gib"] = a.host_budget_gib
    opts["local_host"] = True  # the launch runs here: this machine's host is the node's (hardware.cluster)
    try:
        res = api.check(command, **opts)
    except KvplanError as e:
        if not a.force:
            print(f"kvplan: error: the preflight cannot plan this command: {e}; fix it, or pass --force to launch it "
                  "unchecked", file=sys.stderr)
            return None, engine, cmd, 2
        rep.preflight([f"preflight: cannot plan ({e}); launching unchecked (--force)"])
        return None, engine, cmd, None
    except Exception as e:  # noqa: BLE001 - a kvplan bug must not keep a forced launch from starting
        if not a.force:
            raise
        rep.preflight([f"preflight: internal error ({type(e).__name__}: {e}); launching unchecked (--force)"])
        return None, engine, cmd, None
    lines = [f"preflight (kvplan check): {res.verdict.upper()} · {res.plan.engine} {res.plan.engine_version}"]
    if res.host_ledger is not None:
        from kvplan.launch.verdict import expected_line

        lines.append(f"  {expected_line(res.host_ledger)}")
    lines += [f"  {f.severity} [{f.id}] {f.message}" for f in res.findings if f.severity in ("error", "warning")]
    if res.exit_code and not a.force:
        if not a.json:
            from kvplan.report.human import render

            render(res)
        print("kvplan: refusing to launch: the preflight found errors (above); fix the command"
              + (f" (suggested: {res.suggested_command})" if res.suggested_command else "")
              + " or pass --force", file=sys.stderr)
        return res, engine, cmd, 1
    if res.exit_code:
        lines.append("  launching anyway (--force)")
    rep.preflight(lines)
    return res, engine, cmd, None


def _check_options(a: argparse.Namespace) -> None:
    """The watchdog's numbers through kvplan.validate (finite, in range)."""
    from kvplan import validate

    for name in ("host_reserve_gib", "host_budget_gib"):
        if getattr(a, name) is not None:
            setattr(a, name, validate.gib("--" + name.replace("_", "-"), getattr(a, name)))
    a.gpu_reserve_mib = validate.count("--gpu-reserve-mib", a.gpu_reserve_mib, 0, (validate.MAX_BYTES >> 20) - 1)
    for name in ("stall_timeout", "ready_timeout", "grace", "stop_grace"):
        if getattr(a, name) is not None:
            setattr(a, name, validate.seconds("--" + name.replace("_", "-"), getattr(a, name)))


def _stall_timeout(given: float | None, res: CheckResult | None, rep: Any) -> float | None:
    """--stall-timeout as given (0: off); by default 300 s, or the slowest pin time the plan's host ledger expects
    (hostmem.PIN_RATE's low end) when that is longer: pinning a host pool logs nothing while memory climbs."""
    import math

    from kvplan.launch.watchdog import DEFAULT_STALL_S

    if given is not None:
        return given or None
    led = res.host_ledger if res is not None else None
    if led is None or led.pin_seconds()[2] <= DEFAULT_STALL_S:
        return DEFAULT_STALL_S
    slow = float(math.ceil(led.pin_seconds()[2]))
    rep.preflight([f"  stall timeout {slow:,.0f} s (default {DEFAULT_STALL_S:.0f} s): pinning "
                   f"{led.pinned_bytes / 1e9:,.0f} GB may take that long at the slowest rate the plan assumes"])
    return slow


def _check_output(path: str, flag: str) -> None:
    """--log / --events: a regular file (created 0600 when new); a FIFO or a device would hang or lie."""
    import os
    import stat

    from kvplan import validate
    from kvplan.errors import KvplanError
    from kvplan.launch.state import open_private

    validate.output_file(flag, path, hint=f"give {flag} a writable regular file")
    try:
        if not stat.S_ISREG(os.stat(path).st_mode):
            raise KvplanError(f"{flag} {path} is not a regular file", f"give {flag} a regular file")
    except FileNotFoundError:
        pass
    except OSError as e:
        raise KvplanError(f"cannot write {path}: {e.strerror}", f"give {flag} a writable regular file") from None
    try:
        fd = open_private(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NONBLOCK, follow=True)
    except OSError as e:
        raise KvplanError(f"cannot write {path}: {e.strerror}", f"give {flag} a writable regular file") from None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise KvplanError(f"{flag} {path} is not a regular file", f"give {flag} a regular file")
    finally:
        os.close(fd)


def run(a: argparse.Namespace, command: list[str], parser: argparse.ArgumentParser | None = None) -> int:
    from kvplan.engines.cmdline import tokenize
    from kvplan.errors import KvplanError
    from kvplan.launch import procs, report, state, watchdog
    from kvplan.launch.events import EventLog
    from kvplan.launch.health import health_urls
    from kvplan.launch.supervisor import LaunchConfig, Supervisor
    from kvplan.launch.verdict import diagnose
    from kvplan.units import GiB

    if not command:
        raise KvplanError("give the launch command after --", "e.g. kvplan launch -- vllm serve MODEL --port 8000")
    _check_options(a)
    from kvplan import validate

    for path, flag in ((a.log, "--log"), (a.events, "--events")):  # before anything runs (nothing created yet)
        if path:
            validate.output_file(flag, path, hint=f"give {flag} a writable regular file")
    tokens = tokenize(command)
    env, argv = _split_env(tokens)
    if not argv:
        raise KvplanError("the launch command has only environment variables", "add the command")
    rep = report.make_reporter("json" if a.json else "plain" if a.plain else "auto")
    res, engine, cmd, refused = _preflight(a, tokens, rep)
    if refused is not None:
        return refused
    total, _ = watchdog.meminfo()
    cg = watchdog.Cgroup().dirs
    ram = min([total] + [d[1] for d in cg])
    limits = watchdog.Limits(
        host_reserve=int(a.host_reserve_gib * GiB) if a.host_reserve_gib is not None
        else watchdog.default_host_reserve(ram),
        host_budget=int(a.host_budget_gib * GiB) if a.host_budget_gib is not None else None,
        stall_timeout=_stall_timeout(a.stall_timeout, res, rep), gpu_reserve=a.gpu_reserve_mib << 20)
    urls = health_urls(cmd, engine, a.health_url)
    if a.ready_timeout is not None:
        limits.ready_timeout = a.ready_timeout or None
    elif urls:
        limits.ready_timeout = watchdog.DEFAULT_READY_S
    launch_id = procs.new_launch_id()
    log = a.log or str(state.ensure_dir() / f"{launch_id}.log")
    for path, flag in ((log, "--log"), (a.events, "--events")):
        if path:
            _check_output(path, flag)
    cfg = LaunchConfig(argv=argv, env=env, engine=engine, health_urls=urls, limits=limits, log_path=log,
                       events_path=a.events, grace=a.grace, stop_grace=a.stop_grace, launch_id=launch_id)
    events = EventLog(a.events, stream=sys.stdout if a.json else None)
    try:
        out = Supervisor(cfg, rep, events).run()
    finally:
        events.close()
    rep.end(out, diagnose(out, res, limits))
    return out.code
