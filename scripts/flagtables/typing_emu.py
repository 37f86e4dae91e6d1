"""What the interpreter needs of ``typing``, ``dataclasses`` and a few builtins to run dataclass-driven argparse
code (vLLM ``get_kwargs``, SGLang ``add_cli_args_from_dataclass``) over source instead of live classes."""

from __future__ import annotations

import ast
import re
from collections.abc import Callable
from typing import Any

from flagtables.values import (
    MISSING,
    NONETYPE,
    UNKNOWN,
    Bag,
    ClassRef,
    FieldSpec,
    FuncRef,
    Instance,
    ModRef,
    Opaque,
    TypeHint,
)

_SKIP_ANN = re.compile(r"^(typing\.)?(ClassVar|InitVar)\b|^(dataclasses\.)?KW_ONLY$")
_DATACLASS_DECORATORS = {"dataclass", "config", "dataclasses.dataclass", "pydantic.dataclasses.dataclass"}
_BUILTIN_TYPES = {"int": int, "float": float, "str": str, "bool": bool, "list": list, "dict": dict, "tuple": tuple,
                  "set": set, "frozenset": frozenset, "type": type, "NoneType": type(None), "object": object,
                  "bytes": bytes}


def _py_type(v: Any) -> type | None:
    if isinstance(v, Opaque) and v.qualname.startswith("builtins."):
        return _BUILTIN_TYPES.get(v.short)
    return None


class TypingMixin:
    """Mixed into Interp: dataclass fields from class bodies and the typing introspection functions."""

    field_sources: Callable[[ClassRef], list[ClassRef]] | None = None  # extra field-declaring classes

    def annotation(self, node: ast.expr, frame: Any) -> Any:
        v = self.eval(node, frame)  # type: ignore[attr-defined]
        if isinstance(v, str):  # a string annotation
            try:
                return self.eval(ast.parse(v, mode="eval").body, frame)  # type: ignore[attr-defined]
            except SyntaxError:
                return UNKNOWN
        return v

    def fields_of(self, cls: ClassRef) -> list[Bag]:
        from flagtables.interp import Frame

        cache = self.__dict__.setdefault("_fields_cache", {})
        if cls in cache:
            return cache[cls]
        out: dict[str, Bag] = {}
        classes = list(reversed(self.mro(cls)))  # type: ignore[attr-defined]
        if self.field_sources is not None:
            classes = [*self.field_sources(cls), *classes]
        for c in classes:
            for s in c.node.body:
                if not (isinstance(s, ast.AnnAssign) and isinstance(s.target, ast.Name)):
                    continue
                if _SKIP_ANN.match(ast.unparse(s.annotation).strip("'\"")):
                    continue
                frame = Frame(c.module, owner=c)
                default, factory = MISSING, MISSING
                if s.value is not None:
                    v = self.eval(s.value, frame)  # type: ignore[attr-defined]
                    if isinstance(v, FieldSpec):
                        default, factory = v.default, (v.factory if v.factory is not None else MISSING)
                    else:
                        default = v
                name = s.target.id
                out[name] = Bag({"name": name, "type": self.annotation(s.annotation, frame), "default": default,
                                 "default_factory": factory, "owner": c})
        cache[cls] = list(out.values())
        return cache[cls]

    def is_dataclass(self, cls: Any) -> bool:
        if isinstance(cls, Instance):
            cls = cls.cls
        if not isinstance(cls, ClassRef):
            return False
        for c in self.mro(cls):  # type: ignore[attr-defined]
            for d in c.node.decorator_list:
                n = d.func if isinstance(d, ast.Call) else d
                if ast.unparse(n) in _DATACLASS_DECORATORS:
                    return True
        return False

    def instantiate(self, cls: ClassRef, args: list[Any], kwargs: dict[str, Any]) -> Instance:
        names = [str(f.attrs["name"]) for f in self.fields_of(cls)]
        attrs = dict(zip(names, args, strict=False))
        attrs.update(kwargs)
        return Instance(cls, attrs)

    def _isinstance(self, obj: Any, kind: Any) -> Any:
        if isinstance(kind, (tuple, list)):
            rs = [self._isinstance(obj, k) for k in kind]
            return True if any(r is True for r in rs) else (UNKNOWN if any(r is UNKNOWN for r in rs) else False)
        pt = _py_type(kind)
        if pt is not None:
            if pt is type:
                return isinstance(obj, (ClassRef,)) or _py_type(obj) is not None
            if isinstance(obj, (ClassRef, FuncRef, ModRef, TypeHint, Opaque, Instance, Bag)):
                return False
            return UNKNOWN if obj is UNKNOWN else isinstance(obj, pt)
        if isinstance(kind, ClassRef):
            if isinstance(obj, Instance):
                return kind in self.mro(obj.cls)  # type: ignore[attr-defined]
            return False if obj is not UNKNOWN else UNKNOWN
        if isinstance(kind, Opaque):
            if isinstance(obj, Instance):
                return self.is_subclass_named(obj.cls, {kind.short})  # type: ignore[attr-defined]
            if obj is UNKNOWN or isinstance(obj, Opaque):
                return UNKNOWN
            return False
        return UNKNOWN

    def typing_call(self, q: str, short: str, args: list[Any], kwargs: dict[str, Any]) -> Any:  # noqa: C901
        a0 = args[0] if args else UNKNOWN
        if short == "get_origin":
            if not isinstance(a0, TypeHint):
                return None
            if a0.kind == "generic":
                o = a0.origin
                return o if isinstance(o, ClassRef) else Opaque(
                    f"builtins.{o}" if o in _BUILTIN_TYPES else f"collections.abc.{o}")
            return {"annotated": Opaque("typing.Annotated"), "union": Opaque("typing.Union"),
                    "literal": Opaque("typing.Literal")}.get(a0.kind)
        if short == "get_args":
            return tuple(a0.args) if isinstance(a0, TypeHint) else ()
        if short == "get_type_hints" and isinstance(a0, ClassRef):
            keep = kwargs.get("include_extras") is True
            out = {}
            for f in self.fields_of(a0):
                t = f.attrs["type"]
                if not keep and isinstance(t, TypeHint) and t.kind == "annotated":
                    t = t.args[0]
                out[f.attrs["name"]] = t
            return out
        if short == "fields" and (q.startswith("dataclasses.") or q.startswith("msgspec.")):
            if isinstance(a0, Instance):
                a0 = a0.cls
            return list(self.fields_of(a0)) if isinstance(a0, ClassRef) else UNKNOWN
        if short == "is_dataclass":
            return self.is_dataclass(a0)
        if short == "is_typeddict":
            return self.is_subclass_named(a0, {"TypedDict"}) if isinstance(a0, ClassRef) else False  # type: ignore
        if not q.startswith("builtins."):
            return UNKNOWN
        if short == "isinstance" and len(args) == 2:
            return self._isinstance(args[0], args[1])
        if short == "issubclass" and len(args) == 2:
            if isinstance(a0, ClassRef):
                kinds = args[1] if isinstance(args[1], (tuple, list)) else (args[1],)
                mro = self.mro(a0)  # type: ignore[attr-defined]
                return any((k in mro) if isinstance(k, ClassRef) else
                           self.is_subclass_named(a0, {getattr(k, "short", "?")}) for k in kinds)  # type: ignore
            pa, pb = _py_type(a0), _py_type(args[1])
            if pa is not None and pb is not None:
                return issubclass(pa, pb)
            return False if isinstance(a0, TypeHint) else UNKNOWN
        if short == "type" and len(args) == 1:
            if isinstance(a0, Instance):
                return a0.cls
            if a0 is None:
                return NONETYPE
            if isinstance(a0, (str, int, float, bool, list, dict, tuple, set)):
                return Opaque(f"builtins.{type(a0).__name__}")
            return UNKNOWN
        if short == "hasattr" and len(args) == 2:
            if isinstance(a0, (Opaque, ModRef)):
                return True
            if isinstance(a0, (ClassRef, Instance)):
                return self.getattr_(a0, args[1]) is not UNKNOWN  # type: ignore[attr-defined]
            return UNKNOWN
        if short == "getattr" and len(args) >= 2:
            v = self.getattr_(a0, args[1])  # type: ignore[attr-defined]
            if v is UNKNOWN and len(args) == 3 and isinstance(a0, (ClassRef, Instance)):
                return args[2]
            return v
        if short == "next" and args:
            it = a0
            if isinstance(it, (list, tuple)):
                return it[0] if it else (args[1] if len(args) > 1 else UNKNOWN)
            return UNKNOWN
        if short == "callable":
            return isinstance(a0, (FuncRef, ClassRef, Opaque))
        return UNKNOWN
