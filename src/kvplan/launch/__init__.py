"""``kvplan launch``: a guarded launch, and ``kvplan cleanup`` for what earlier launches left (issue 5).

    kvplan launch [check options] [watchdog options] -- <launch command>
    kvplan cleanup [--yes] [--dry-run] [--min-age S]

A launch runs the preflight of ``kvplan check`` (refusing on an error finding unless ``--force``), starts the
command in its own session with a log file, reads its startup phases from the log, asks the readiness URL, samples
memory every 0.25 s, and stops the whole process tree (SIGTERM, grace, SIGKILL, verified in /proc, /dev/shm segments
removed) when the host would run dry, a rank dies, the log stalls while memory climbs, or readiness times out. After
an abort it prints a diagnosis: phase, signal, numbers, the plan's likely cause and the fix.

Modules (nothing heavy is imported here; the command lines and the preflight are kvplan.cli.launch / .cleanup):
  supervisor  the foreground loop: start, follow, sample, decide, stop, clean up
  procs       the process tree: session, KVPLAN_LAUNCH / KVPLAN_LAUNCH_TOKEN marker, subreaper; terminate and verify
  shm         /dev/shm segments tied to a launch (by inode), stale ones
  watchdog    probes (meminfo, cgroup, NVML) and the abort reasons
  phases      log lines -> stable phase names and tqdm percentages
  health      readiness URLs and the poller thread
  events      ``--events`` JSON lines
  report      Rich live view / plain lines / end summary
  verdict     the outcome of a launch and the diagnosis after an abort
  state       state files under ~/.cache/kvplan/launches (or $KVPLAN_STATE_DIR), schema 2, trusted only when safe
  ownership   the per-launch secret token: proof that a process belongs to a launch, across PID namespaces
  redact      secret values out of commands, events and reports
  cleanup     ``kvplan cleanup`` (proof of ownership only)
"""
