"""YAML with a budget: ``yaml.safe_load_all`` semantics (no tags that construct objects), but every node is counted
as it is composed, an alias counting the whole subtree it stands for, so a small file cannot grow into a huge tree.

Why: YAML aliases share one node, so ``a: &a [x, x, ...]``, ``b: &b [*a, *a, ...]`` nine levels deep is a 1 KB file
whose value, once turned into text (``str()`` of an ``environment`` entry or a ``mem_limit``), is 9^9 elements: 119 s
and 7.6 GiB before this budget. Here the file is refused while it is composed (before any object is built) when

* the expanded tree (aliases counted as the nodes they stand for) has more than ``MAX_NODES`` nodes,
* its scalars (aliases expanded) hold more than ``MAX_CHARS`` characters,
* it nests deeper than ``MAX_DEPTH``, or an alias refers to a node that contains it (a recursive structure),
* an integer is written with more than ``MAX_INT_CHARS`` characters (CPython refuses ``int()`` of 4,300+ digits;
  ``0x`` + 5,000 digits would be a 20,000-bit number).

The bounds are far above any deployment file (a Helm chart rendered with its CRDs is ~20-40 bytes per node: the
16 MiB file bound is ~500,000 nodes) and far below what hurts (composing costs ~5 µs a node). The events come from
libyaml when it is installed (``CParser``), else from PyYAML's pure-Python parser; composing is PyYAML's own
``Composer`` with the counting added.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import yaml
from yaml.composer import Composer
from yaml.constructor import SafeConstructor
from yaml.events import AliasEvent, ScalarEvent
from yaml.resolver import Resolver

MAX_NODES = 500_000
MAX_CHARS = 32 * 2**20
MAX_DEPTH = 100
MAX_INT_CHARS = 64


class YamlBudgetError(Exception):
    """The file is past a bound (the message says which)."""


class _Budget(Composer):
    if TYPE_CHECKING:  # the parser's (CParser or yaml.parser.Parser)
        def check_event(self, *choices: Any) -> bool: ...

        def peek_event(self) -> Any: ...

    def _budget_init(self) -> None:
        self.nodes = 0
        self.chars = 0
        self.depth = 0
        self.costs: dict[int, tuple[int, int]] = {}  # id(anchored node) -> (nodes, chars) it stands for

    def _charge(self, nodes: int, chars: int) -> None:
        self.nodes += nodes
        self.chars += chars
        if self.nodes > MAX_NODES:
            raise YamlBudgetError(f"more than {MAX_NODES:,} YAML nodes once its aliases are expanded")
        if self.chars > MAX_CHARS:
            raise YamlBudgetError(f"more than {MAX_CHARS // 2**20} MiB of YAML text once its aliases are expanded")

    def compose_node(self, parent: Any, index: Any) -> Any:
        if self.check_event(AliasEvent):
            anchor = self.peek_event().anchor
            node = super().compose_node(parent, index)
            cost = self.costs.get(id(node))
            if cost is None:  # the anchored node is still being composed: it contains its own alias
                raise YamlBudgetError(f"the YAML alias *{anchor} refers to a node that contains it")
            self._charge(*cost)
            return node
        anchor = self.peek_event().anchor
        self.depth += 1
        if self.depth > MAX_DEPTH:
            raise YamlBudgetError(f"YAML nested more than {MAX_DEPTH} levels deep")
        before = (self.nodes, self.chars)
        event = self.peek_event()
        self._charge(1, len(event.value) if isinstance(event, ScalarEvent) else 0)
        node = super().compose_node(parent, index)
        self.depth -= 1
        if anchor is not None:
            self.costs[id(node)] = (self.nodes - before[0], self.chars - before[1])
        return node


def _construct_int(loader: Any, node: Any) -> Any:
    if len(node.value) > MAX_INT_CHARS:
        raise YamlBudgetError(f"an integer of {len(node.value):,} characters (line {node.start_mark.line + 1}); no "
                              "field takes one")
    return SafeConstructor.construct_yaml_int(loader, node)


def _loader_class() -> type:
    try:
        from yaml._yaml import CParser  # libyaml: the scanner and parser in C
    except ImportError:  # pragma: no cover - PyYAML without libyaml
        from yaml.loader import SafeLoader

        class PyLoader(SafeLoader, _Budget):
            def __init__(self, stream: str):
                SafeLoader.__init__(self, stream)
                self._budget_init()

            compose_node = _Budget.compose_node

        PyLoader.add_constructor("tag:yaml.org,2002:int", _construct_int)
        return PyLoader

    class CLoader(CParser, _Budget, SafeConstructor, Resolver):
        def __init__(self, stream: str):
            CParser.__init__(self, stream)
            Composer.__init__(self)
            SafeConstructor.__init__(self)
            Resolver.__init__(self)
            self._budget_init()

        # CParser composes in C (without a budget): compose with the Python Composer over its events instead
        check_node = Composer.check_node
        get_node = Composer.get_node
        get_single_node = Composer.get_single_node
        compose_document = Composer.compose_document
        compose_node = _Budget.compose_node

    CLoader.add_constructor("tag:yaml.org,2002:int", _construct_int)
    return CLoader


_LOADER: type | None = None


def load_all(text: str) -> list[Any]:
    """The documents of *text* (``None`` documents dropped); ``yaml.YAMLError`` for malformed YAML,
    :class:`YamlBudgetError` past a bound, ``RecursionError`` never escapes deeper than ``MAX_DEPTH``."""
    global _LOADER
    if _LOADER is None:
        _LOADER = _loader_class()
    loader = _LOADER(text)
    try:
        out = []
        while loader.check_data():
            doc = loader.get_data()
            if doc is not None:
                out.append(doc)
        return out
    finally:
        loader.dispose()


__all__ = ["MAX_CHARS", "MAX_DEPTH", "MAX_NODES", "YamlBudgetError", "load_all", "yaml"]
