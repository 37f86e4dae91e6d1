"""``kvplan launch``: a guarded launch (preflight, phases from the log, a memory watchdog, a clean stop that leaves
nothing behind) and ``kvplan cleanup`` for what earlier launches left.

Modules: ``cli`` (argparse, preflight), ``supervisor`` (the loop), ``procs`` (the process tree), ``shm`` (/dev/shm
segments), ``watchdog`` (samples and abort reasons), ``phases`` (log lines -> phases), ``events`` (JSON lines),
``report`` (what people see), ``verdict`` (the diagnosis after an abort), ``state`` (state files), ``cleanup``.
Nothing heavy is imported here.
"""
