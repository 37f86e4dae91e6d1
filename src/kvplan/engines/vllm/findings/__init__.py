"""vLLM's finding rules, one per file (``ID``, ``check(ctx) -> list[Finding]``), with their report positions
(kvplan.findings.GENERIC holds the generic rules' positions: 20 host-oversubscribed, 130 unknown-flags)."""

RULES: tuple[tuple[int, str], ...] = (
    (10, "kv_pool_empty"), (80, "mla_replicated_kv"), (90, "flag_removed"), (100, "shm_too_small"),
    (110, "gpu_util_startup_fail"), (120, "max_model_len_unfit"),
)
