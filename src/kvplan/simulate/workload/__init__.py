"""Workloads: generated (generate.py), files (files.py: request JSONL, SGLang/vLLM benchmark results)."""

from kvplan.simulate.workload.spec import Item, Workload

__all__ = ["Item", "Workload"]
