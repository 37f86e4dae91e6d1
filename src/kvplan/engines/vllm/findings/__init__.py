"""vLLM's finding rules, one per file (``ID``, ``check(ctx) -> list[Finding]``), with their report positions
(kvplan.findings.GENERIC holds the generic rules' positions: 20 host-oversubscribed, 25 host-near-full,
90 flag-removed, 92 flag-unknown, 94 flag-bad-value, 130 unknown-flags, 140 architecture-assumed)."""

RULES: tuple[tuple[int, str], ...] = (
    (10, "kv_pool_empty"), (80, "mla_replicated_kv"), (100, "shm_too_small"),
    (110, "gpu_util_startup_fail"), (120, "max_model_len_unfit"),
)
