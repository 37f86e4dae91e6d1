"""Values of the small interpreter in interp.py: concrete Python values where the source fixes them, symbolic
stand-ins (modules, classes, functions, external names, type hints, argparse parsers) otherwise."""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from typing import Any


class _Unknown:
    """A value the source does not fix statically (an import from outside the wheel, a runtime call, ...)."""

    def __repr__(self) -> str:
        return "UNKNOWN"

    def __bool__(self) -> bool:  # pragma: no cover - guarded: callers test ``is UNKNOWN`` first
        raise TypeError("UNKNOWN has no truth value")


UNKNOWN: Any = _Unknown()


@dataclass(frozen=True)
class Opaque:
    """A name from outside the wheel (``json.loads``, ``argparse.BooleanOptionalAction``, ``builtins.int``)."""

    qualname: str

    @property
    def short(self) -> str:
        return self.qualname.rsplit(".", 1)[-1]


@dataclass(frozen=True)
class ModRef:
    name: str


@dataclass(eq=False)
class ClassRef:
    module: str
    node: ast.ClassDef

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ClassRef) and other.module == self.module and other.node is self.node

    def __hash__(self) -> int:
        return hash((self.module, id(self.node)))

    @property
    def name(self) -> str:
        return self.node.name

    @property
    def qualname(self) -> str:
        return f"{self.module}.{self.node.name}"

    def __repr__(self) -> str:
        return f"<class {self.qualname}>"


@dataclass(eq=False)
class FuncRef:
    module: str
    node: ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda
    owner: ClassRef | None = None  # defining class (for super())
    bound: Any = None  # self / cls bound as the first parameter
    closure: dict[str, Any] | None = None

    @property
    def name(self) -> str:
        return getattr(self.node, "name", "<lambda>")

    @property
    def qualname(self) -> str:
        return f"{self.module}.{self.owner.name + '.' if self.owner else ''}{self.name}"

    def decorators(self) -> list[str]:
        out = []
        for d in getattr(self.node, "decorator_list", []):
            n = d.func if isinstance(d, ast.Call) else d
            out.append(ast.unparse(n).rsplit(".", 1)[-1])
        return out


@dataclass(eq=False)
class Instance:
    cls: ClassRef
    attrs: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class SuperRef:
    start_after: ClassRef
    bound: Any


@dataclass(frozen=True)
class TypeHint:
    """A type annotation: kind "literal" (args = values), "union", "annotated", "generic" (origin + args)."""

    kind: str
    args: tuple[Any, ...] = ()
    origin: Any = None


MISSING = Opaque("dataclasses.MISSING")
NONETYPE = Opaque("builtins.NoneType")


@dataclass(frozen=True)
class FieldSpec:
    """``dataclasses.field(...)`` / ``pydantic.Field(...)`` as written in a class body."""

    default: Any = MISSING
    factory: Any = None
    init: bool = True


@dataclass(eq=False)
class Bag:
    """An object with plain attributes (a dataclass ``Field`` as ``dataclasses.fields`` returns it)."""

    attrs: dict[str, Any]


@dataclass(frozen=True)
class Special:
    """A callable the extractor gives meaning to (e.g. vLLM's ``human_readable_int``, a dataclass JSON parser)."""

    name: str
    payload: Any = None


@dataclass
class Argument:
    """One ``add_argument`` call as recorded."""

    option_strings: list[str]
    kwargs: dict[str, Any]
    where: str  # module.function that called add_argument


@dataclass(eq=False)
class ParserRec:
    """An argparse parser (or group): every add_argument lands in the shared ``args`` list."""

    args: list[Argument] = field(default_factory=list)
    ctor: dict[str, Any] = field(default_factory=dict)  # ArgumentParser(...) keywords (allow_abbrev, ...)
    is_group: bool = False

    def group(self) -> ParserRec:
        return ParserRec(self.args, self.ctor, True)


class RaiseSignal(Exception):
    pass


class ReturnSignal(Exception):
    def __init__(self, value: Any):
        self.value = value
