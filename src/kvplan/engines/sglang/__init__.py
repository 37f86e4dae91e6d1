"""SGLang: flags (args.py), version table (rules.py, defaults.py), GPU pools (cell.py, memory.py),
HiCache host pools (hicache.py); engine.py assembles the Plan."""
