"""toyllm's own finding rules, with their report positions."""

RULES: tuple[tuple[int, str], ...] = ((15, "pool_below_context"),)
