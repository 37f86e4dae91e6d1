"""vLLM (V0/V1) and LMCache: flags and env (args.py), version table (rules.py), per-rank budget and layer
specs (memory.py), blocks/tokens/concurrency (kvcache.py), host tiers (host.py); engine.py assembles the Plan."""
