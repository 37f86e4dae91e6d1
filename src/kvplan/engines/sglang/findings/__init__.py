"""SGLang's finding rules, one per file (``ID``, ``check(ctx) -> list[Finding]``), with their report positions
(kvplan.findings.GENERIC holds the generic rules' positions: 20 host-oversubscribed, 25 host-near-full,
90 flag-removed, 92 flag-unknown, 94 flag-bad-value, 130 unknown-flags, 140 architecture-assumed)."""

RULES: tuple[tuple[int, str], ...] = (
    (5, "ranks_exceed_node"), (10, "kv_pool_empty"),
    (30, "host_check_blind"), (32, "host_check_race"), (40, "hicache_smaller_than_device"), (50, "gpu_headroom_low"),
    (60, "context_exceeds_pool"), (70, "hicache_prefix_only"), (80, "mla_replicated_kv"),
)
