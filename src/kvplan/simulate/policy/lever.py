"""A launch change ``kvplan tune`` tries: flags to rewrite the command with, and the group it belongs to.

Levers of one ``group`` (e.g. the static-fraction steps) are tried in order and the group stops at the first one
``kvplan check`` refuses (an error finding): a larger step would be refused as well.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Lever:
    name: str
    flags: dict[str, str | None]
    group: str
    note: str = ""
    combinable: bool = True  # may be combined with a lever of another group
    requires: tuple[str, ...] = field(default=())  # groups it must not be combined with
    replicas: int = 1  # launches of the rewritten command behind a router

    def merged(self, other: Lever) -> Lever:
        return Lever(f"{self.name} + {other.name}", {**self.flags, **other.flags}, f"{self.group}+{other.group}",
                     "; ".join(n for n in (self.note, other.note) if n), combinable=False)


def round_up(x: float, step: int) -> int:
    return max(step, int(-(-x // step) * step))
