"""A small abstract interpreter for the argparse-building code of an engine wheel, read with ``ast``.

It runs functions like ``ServerArgs.add_cli_args(parser)`` over the parsed source: literals, module constants,
class attributes, dict/list plumbing, f-strings, calls into other functions of the wheel, ``super()``. What the
source does not fix (imports from outside the wheel, runtime calls) is UNKNOWN; an ``if`` on an UNKNOWN test runs
both branches (a flag added on either path is a flag the parser can have). Nothing of the engine is imported.
"""

from __future__ import annotations

import ast
import builtins
import operator
from collections.abc import Callable
from typing import Any

from flagtables.source import WheelSource
from flagtables.typing_emu import TypingMixin
from flagtables.values import (
    MISSING,
    NONETYPE,
    UNKNOWN,
    Argument,
    Bag,
    ClassRef,
    FieldSpec,
    FuncRef,
    Instance,
    ModRef,
    Opaque,
    ParserRec,
    RaiseSignal,
    ReturnSignal,
    Special,
    SuperRef,
    TypeHint,
)

_PURE_BUILTINS = {"list", "dict", "tuple", "set", "sorted", "len", "str", "int", "float", "bool", "range",
                  "enumerate", "zip", "any", "all", "min", "max", "reversed", "frozenset", "repr", "abs", "round"}
_STR_METHODS = {"replace", "join", "lower", "upper", "split", "strip", "lstrip", "rstrip", "format", "startswith",
                "endswith", "removeprefix", "removesuffix", "title", "capitalize", "rsplit", "partition"}
_TYPING = {"Literal", "Optional", "Union", "Annotated", "List", "Dict", "Tuple", "Set", "Sequence", "Iterable",
           "Mapping", "Callable", "Type", "TypeAlias", "Any", "ClassVar", "InitVar", "Final", "Required",
           "NotRequired"}
_BINOPS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Mod: operator.mod,
           ast.FloorDiv: operator.floordiv, ast.Div: operator.truediv, ast.Pow: operator.pow}
_CMPOPS = {ast.Eq: operator.eq, ast.NotEq: operator.ne, ast.Lt: operator.lt, ast.LtE: operator.le,
           ast.Gt: operator.gt, ast.GtE: operator.ge, ast.In: lambda a, b: a in b,
           ast.NotIn: lambda a, b: a not in b, ast.Is: operator.is_, ast.IsNot: operator.is_not}
_CONCRETE = (str, int, float, bool, type(None), list, dict, tuple, set, frozenset)


_SYMBOLIC = (Opaque, ClassRef, TypeHint, ModRef)


def comparable(v: Any) -> bool:
    """Concrete, or a symbolic value whose identity the source fixes (a class, an external name, a type)."""
    if isinstance(v, (list, tuple, set, frozenset)):
        return all(comparable(x) for x in v)
    return v is not UNKNOWN and (concrete(v) or isinstance(v, _SYMBOLIC))


def sym_copy(v: Any) -> Any:
    """copy.deepcopy for the interpreter: containers are copied, symbolic values shared."""
    if isinstance(v, dict):
        return {k: sym_copy(x) for k, x in v.items()}
    if isinstance(v, list):
        return [sym_copy(x) for x in v]
    if isinstance(v, set):
        return set(v)
    return v


def concrete(v: Any) -> bool:
    if isinstance(v, (list, tuple, set, frozenset)):
        return all(concrete(x) for x in v)
    if isinstance(v, dict):
        return all(concrete(k) and concrete(x) for k, x in v.items())
    return isinstance(v, _CONCRETE)


def union(*members: Any) -> TypeHint:
    """typing.Union flattened, None as NoneType (what get_args returns)."""
    out: list[Any] = []
    for m in members:
        m = NONETYPE if m is None else m
        for x in (m.args if isinstance(m, TypeHint) and m.kind == "union" else (m,)):
            if x not in out:
                out.append(x)
    return TypeHint("union", tuple(out))


class LoopSignal(Exception):
    def __init__(self, kind: str):
        self.kind = kind  # "break" | "continue"


class StopRun(BaseException):  # noqa: N818 - a control signal, not an error
    """parse_args was reached: the parser is complete."""


class Frame:
    def __init__(self, module: str, local: dict[str, Any] | None = None, owner: ClassRef | None = None,
                 bound: Any = None):
        self.module = module
        self.local = local if local is not None else {}
        self.owner = owner
        self.bound = bound


class Interp(TypingMixin):
    """Evaluate a wheel's code symbolically. ``overrides`` maps a function's qualname to a Python stand-in."""

    def __init__(self, src: WheelSource, overrides: dict[str, Callable[..., Any]] | None = None):
        self.src = src
        self.overrides = overrides or {}
        self.warnings: list[str] = []
        self._index: dict[str, dict[str, list[tuple[ast.stmt, bool]]]] = {}
        self._globals: dict[tuple[str, str], Any] = {}
        self._class_attr: dict[tuple[int, str], Any] = {}
        self._busy: set[Any] = set()
        self.depth = 0
        self.parsers: list[ParserRec] = []  # every ArgumentParser the code built
        self.stop_at_parse = True

    # ---------------------------------------------------------------- module-level names
    def _module_index(self, module: str) -> dict[str, list[tuple[ast.stmt, bool]]]:
        if module in self._index:
            return self._index[module]
        idx: dict[str, list[tuple[ast.stmt, bool]]] = {}
        tree = self.src.tree(module)

        def visit(stmts: list[ast.stmt], cond: bool) -> None:
            for s in stmts:
                names: list[str] = []
                if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                    names = [s.name]
                elif isinstance(s, ast.Assign):
                    names = [t.id for t in s.targets if isinstance(t, ast.Name)]
                elif isinstance(s, ast.AnnAssign) and isinstance(s.target, ast.Name) and s.value is not None:
                    names = [s.target.id]
                elif isinstance(s, ast.Import | ast.ImportFrom):
                    names = [(a.asname or a.name).split(".")[0] for a in s.names if a.name != "*"]
                elif getattr(ast, "TypeAlias", None) and isinstance(s, ast.TypeAlias):  # py3.12 `type X = ...`
                    names = [s.name.id]
                elif isinstance(s, ast.If):
                    visit(s.body, True)
                    visit(s.orelse, True)
                elif isinstance(s, ast.Try):
                    visit(s.body, cond)
                    for h in s.handlers:
                        visit(h.body, True)
                    visit(s.orelse, cond)
                for n in names:
                    idx.setdefault(n, []).append((s, cond))

        if tree is not None:
            visit(tree.body, False)
        self._index[module] = idx
        return idx

    def global_(self, module: str, name: str) -> Any:
        key = (module, name)
        if key in self._globals:
            return self._globals[key]
        if key in self._busy:
            return UNKNOWN
        self._busy.add(key)
        try:
            val = self._resolve_global(module, name)
        finally:
            self._busy.discard(key)
        self._globals[key] = val
        return val

    def _resolve_global(self, module: str, name: str) -> Any:
        defs = self._module_index(module).get(name)
        if not defs:
            if self.src.has_module(f"{module}.{name}"):
                return ModRef(f"{module}.{name}")
            if hasattr(builtins, name):
                return Opaque(f"builtins.{name}")
            return UNKNOWN
        plain = [d for d, cond in defs if not cond]
        stmt = plain[-1] if plain else defs[0][0]
        if isinstance(stmt, ast.Assign) and any(isinstance(d, ast.ClassDef) for d, _ in defs):
            val = self.eval(stmt.value, Frame(module))
            if val is UNKNOWN or isinstance(val, Instance):  # a class re-made at run time: read the class body
                return ClassRef(module, next(d for d, _ in defs if isinstance(d, ast.ClassDef)))
            return val
        if isinstance(stmt, ast.ClassDef):
            return ClassRef(module, stmt)
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
            return FuncRef(module, stmt)
        if isinstance(stmt, ast.Assign | ast.AnnAssign):
            return self.eval(stmt.value, Frame(module))
        if getattr(ast, "TypeAlias", None) and isinstance(stmt, ast.TypeAlias):
            return self.eval(stmt.value, Frame(module))
        if isinstance(stmt, ast.ImportFrom):
            base = self._import_base(module, stmt)
            for a in stmt.names:
                if (a.asname or a.name) == name:
                    return self.import_name(base, a.name)
        if isinstance(stmt, ast.Import):
            for a in stmt.names:
                if a.asname == name:
                    return self.module_ref(a.name)
                if a.asname is None and a.name.split(".")[0] == name:
                    return self.module_ref(name)
        return UNKNOWN

    def _import_base(self, module: str, stmt: ast.ImportFrom) -> str:
        if not stmt.level:
            return stmt.module or ""
        parts = module.split(".")
        pkg = parts if self.src.is_package(module) else parts[:-1]
        pkg = pkg[: len(pkg) - (stmt.level - 1)]
        return ".".join(pkg + ([stmt.module] if stmt.module else []))

    def module_ref(self, name: str) -> Any:
        return ModRef(name) if self.src.has_module(name) else Opaque(name)

    def import_name(self, base: str, name: str) -> Any:
        if self.src.has_module(f"{base}.{name}"):
            return ModRef(f"{base}.{name}")
        if self.src.has_module(base):
            return self.global_(base, name)
        return Opaque(f"{base}.{name}")

    def run_main(self, module: str) -> None:
        """Run the ``if __name__ == "__main__":`` block of ``module`` up to its first parse_args."""
        tree = self.src.tree(module)
        if tree is None:
            return
        for s in tree.body:
            if isinstance(s, ast.If) and "__main__" in ast.unparse(s.test):
                try:
                    self.exec_block(s.body, Frame(module))
                except (StopRun, RaiseSignal, ReturnSignal):
                    pass

    def run_call(self, fn: Any, *args: Any) -> Any:
        try:
            return self.call(fn, list(args), {})
        except StopRun:
            return None

    # ---------------------------------------------------------------- classes
    def bases(self, cls: ClassRef) -> list[Any]:
        return [self.eval(b, Frame(cls.module)) for b in cls.node.bases]

    def mro(self, cls: ClassRef) -> list[ClassRef]:
        out: list[ClassRef] = []
        seen: set[int] = set()

        def walk(c: ClassRef) -> None:
            if id(c.node) in seen:
                return
            seen.add(id(c.node))
            out.append(c)
            for b in self.bases(c):
                if isinstance(b, ClassRef):
                    walk(b)

        walk(cls)
        return out

    def class_attr(self, cls: ClassRef, name: str, start_after: ClassRef | None = None) -> Any:
        chain = self.mro(cls)
        if start_after is not None:
            ids = [id(c.node) for c in chain]
            chain = chain[ids.index(id(start_after.node)) + 1:] if id(start_after.node) in ids else []
        for c in chain:
            for s in c.node.body:
                if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef)) and s.name == name:
                    return FuncRef(c.module, s, owner=c)
                if isinstance(s, ast.ClassDef) and s.name == name:
                    return ClassRef(c.module, s)
                target = None
                if isinstance(s, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name for t in s.targets):
                    target = s.value
                elif isinstance(s, ast.AnnAssign) and isinstance(s.target, ast.Name) and s.target.id == name:
                    if s.value is None:
                        continue
                    target = s.value
                if target is not None:
                    key = (id(target), name)
                    if key not in self._class_attr:
                        self._class_attr[key] = UNKNOWN
                        val = self.eval(target, Frame(c.module, owner=c))
                        if isinstance(val, FieldSpec):
                            val = val.default
                        self._class_attr[key] = val
                    return self._class_attr[key]
        return UNKNOWN

    def is_subclass_named(self, cls: ClassRef, names: set[str]) -> bool:
        for c in self.mro(cls):
            if c.name in names:
                return True
            for b in self.bases(c):
                if isinstance(b, Opaque) and b.short in names:
                    return True
        return False

    # ---------------------------------------------------------------- statements
    def run_function(self, fn: FuncRef, args: list[Any], kwargs: dict[str, Any]) -> Any:
        if fn.qualname in self.overrides:
            return self.overrides[fn.qualname](self, *args, **kwargs)
        if self.depth > 25 or isinstance(fn.node, ast.Lambda):
            return UNKNOWN
        if {"lru_cache", "cache"} & set(fn.decorators()) and not kwargs:  # functools caches: run once per args
            try:
                key = (fn.qualname, id(fn.bound), tuple(args))
                hash(key)
            except TypeError:
                key = None
            if key is not None:
                memo = self.__dict__.setdefault("_memo", {})
                if key not in memo:
                    memo[key] = self._run_function(fn, args, kwargs)
                return sym_copy(memo[key])
        return self._run_function(fn, args, kwargs)

    def _run_function(self, fn: FuncRef, args: list[Any], kwargs: dict[str, Any]) -> Any:
        frame = Frame(fn.module, dict(fn.closure or {}), owner=fn.owner, bound=fn.bound)
        a = fn.node.args
        params = [p.arg for p in a.posonlyargs + a.args]
        pos = list(args)
        if fn.bound is not None:
            pos = [fn.bound, *pos]
        defaults = [self.eval(d, Frame(fn.module)) for d in a.defaults]
        for i, p in enumerate(params):
            if i < len(pos):
                frame.local[p] = pos[i]
            elif p in kwargs:
                frame.local[p] = kwargs.pop(p)
            else:
                j = i - (len(params) - len(defaults))
                frame.local[p] = defaults[j] if j >= 0 else UNKNOWN
        if a.vararg:
            frame.local[a.vararg.arg] = list(pos[len(params):])
        for p, d in zip(a.kwonlyargs, a.kw_defaults, strict=False):
            frame.local[p.arg] = kwargs.pop(p.arg) if p.arg in kwargs else (
                self.eval(d, Frame(fn.module)) if d is not None else UNKNOWN)
        if a.kwarg:
            frame.local[a.kwarg.arg] = dict(kwargs)
        self.depth += 1
        try:
            self.exec_block(fn.node.body, frame)
        except ReturnSignal as r:
            return r.value
        except (RaiseSignal, LoopSignal):
            return UNKNOWN
        finally:
            self.depth -= 1
        return None

    def exec_block(self, stmts: list[ast.stmt], f: Frame) -> None:
        for s in stmts:
            self.exec_stmt(s, f)

    def exec_stmt(self, s: ast.stmt, f: Frame) -> None:
        if isinstance(s, ast.Expr):
            self.eval(s.value, f)
        elif isinstance(s, ast.Assign):
            v = self.eval(s.value, f)
            for t in s.targets:
                self.assign(t, v, f)
        elif isinstance(s, ast.AnnAssign):
            if s.value is not None:
                self.assign(s.target, self.eval(s.value, f), f)
        elif isinstance(s, ast.AugAssign):
            cur, v = self.eval(s.target, f), self.eval(s.value, f)
            op = _BINOPS.get(type(s.op))
            new = UNKNOWN
            if op and cur is not UNKNOWN and concrete(cur) and concrete(v):
                try:
                    if isinstance(cur, list) and isinstance(s.op, ast.Add):
                        cur.extend(v)
                        new = cur
                    else:
                        new = op(cur, v)
                except Exception:  # noqa: BLE001 - a symbolic run: anything odd is UNKNOWN
                    new = UNKNOWN
            self.assign(s.target, new, f)
        elif isinstance(s, ast.Return):
            raise ReturnSignal(self.eval(s.value, f) if s.value is not None else None)
        elif isinstance(s, ast.If):
            t = self.truth(self.eval(s.test, f))
            if t is True:
                self.exec_block(s.body, f)
            elif t is False:
                self.exec_block(s.orelse, f)
            else:
                for branch in (s.body, s.orelse):
                    try:
                        self.exec_block(branch, f)
                    except (RaiseSignal, ReturnSignal, LoopSignal):
                        pass
        elif isinstance(s, ast.For):
            it = self.eval(s.iter, f)
            if it is UNKNOWN or not isinstance(it, (list, tuple, dict, set, frozenset, str, range)):
                if any(isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
                       and n.func.attr == "add_argument" for n in ast.walk(s)):
                    self.warnings.append(f"{f.module}:{s.lineno}: loop over an unknown iterable adds arguments")
                return
            for i, item in enumerate(list(it)):
                if i > 5000:
                    break
                self.assign(s.target, item, f)
                try:
                    self.exec_block(s.body, f)
                except LoopSignal as sig:
                    if sig.kind == "break":
                        break
        elif isinstance(s, (ast.With, ast.AsyncWith)):
            self.exec_block(s.body, f)
        elif isinstance(s, ast.Try):
            try:
                self.exec_block(s.body, f)
                self.exec_block(s.orelse, f)
            except RaiseSignal:
                pass
            self.exec_block(s.finalbody, f)
        elif isinstance(s, ast.Raise):
            raise RaiseSignal()
        elif isinstance(s, ast.Continue):
            raise LoopSignal("continue")
        elif isinstance(s, ast.Break):
            raise LoopSignal("break")
        elif isinstance(s, ast.Delete):
            for t in s.targets:
                if isinstance(t, ast.Subscript):
                    obj, key = self.eval(t.value, f), self.eval(t.slice, f)
                    if isinstance(obj, (dict, list)) and concrete(key):
                        try:
                            del obj[key]
                        except (KeyError, IndexError, TypeError):
                            pass
                elif isinstance(t, ast.Name):
                    f.local.pop(t.id, None)
        elif isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef)):
            f.local[s.name] = FuncRef(f.module, s, owner=None, closure=f.local)
        elif isinstance(s, ast.ClassDef):
            f.local[s.name] = ClassRef(f.module, s)
        elif isinstance(s, (ast.Import, ast.ImportFrom)):
            for a in s.names:
                if isinstance(s, ast.ImportFrom):
                    f.local[a.asname or a.name] = self.import_name(self._import_base(f.module, s), a.name)
                else:
                    f.local[a.asname or a.name.split(".")[0]] = self.module_ref(a.asname and a.name or
                                                                                a.name.split(".")[0])
        # pass, assert, global, nonlocal, while, break, continue: nothing to record

    def truth(self, v: Any) -> bool | None:
        if v is UNKNOWN:
            return None
        if isinstance(v, (Opaque, ClassRef, FuncRef, ModRef, TypeHint, Instance, ParserRec, Bag)):
            return True  # objects are truthy
        if isinstance(v, (list, tuple, dict, set, frozenset)):
            return bool(v)
        if not concrete(v):
            return None
        return bool(v)

    def assign(self, target: ast.expr, v: Any, f: Frame) -> None:
        if isinstance(target, ast.Name):
            f.local[target.id] = v
        elif isinstance(target, (ast.Tuple, ast.List)):
            items = list(v) if isinstance(v, (list, tuple)) and len(v) == len(target.elts) else None
            for i, t in enumerate(target.elts):
                self.assign(t, items[i] if items is not None else UNKNOWN, f)
        elif isinstance(target, ast.Subscript):
            obj, key = self.eval(target.value, f), self.eval(target.slice, f)
            if isinstance(obj, dict) and concrete(key) and not isinstance(key, (list, dict, set)):
                obj[key] = v
            elif isinstance(obj, list) and isinstance(key, int) and -len(obj) <= key < len(obj):
                obj[key] = v
        elif isinstance(target, ast.Attribute):
            obj = self.eval(target.value, f)
            if isinstance(obj, Instance):
                obj.attrs[target.attr] = v

    # ---------------------------------------------------------------- expressions
    def eval(self, e: ast.expr | None, f: Frame) -> Any:
        try:
            return self._eval(e, f)
        except (ReturnSignal, RaiseSignal):
            raise
        except RecursionError:
            return UNKNOWN
        except Exception:  # noqa: BLE001 - a symbolic run: anything the source does not fix is UNKNOWN
            return UNKNOWN

    def _eval(self, e: ast.expr | None, f: Frame) -> Any:  # noqa: C901 - one dispatch over node types
        if e is None:
            return None
        if isinstance(e, ast.Constant):
            return e.value
        if isinstance(e, ast.Name):
            if e.id in f.local:
                return f.local[e.id]
            return self.global_(f.module, e.id)
        if isinstance(e, (ast.List, ast.Tuple, ast.Set)):
            out: list[Any] = []
            for x in e.elts:
                if isinstance(x, ast.Starred):
                    v = self.eval(x.value, f)
                    if not isinstance(v, (list, tuple, set, dict)):
                        return UNKNOWN
                    out.extend(v)
                else:
                    out.append(self.eval(x, f))
            if isinstance(e, ast.Tuple):
                return tuple(out)
            if isinstance(e, ast.Set):
                return set(out) if comparable(out) else UNKNOWN
            return out
        if isinstance(e, ast.Dict):
            d: dict[Any, Any] = {}
            for k, v in zip(e.keys, e.values, strict=True):
                if k is None:
                    sub = self.eval(v, f)
                    if not isinstance(sub, dict):
                        return UNKNOWN
                    d.update(sub)
                else:
                    kk = self.eval(k, f)
                    if not concrete(kk) or isinstance(kk, (list, dict, set)):
                        return UNKNOWN
                    d[kk] = self.eval(v, f)
            return d
        if isinstance(e, ast.JoinedStr):
            parts = []
            for v in e.values:
                if isinstance(v, ast.Constant):
                    parts.append(str(v.value))
                else:
                    x = self.eval(v.value, f)  # type: ignore[attr-defined]
                    if not concrete(x):
                        return UNKNOWN
                    conv = getattr(v, "conversion", -1)
                    x = repr(x) if conv == ord("r") else str(x)
                    parts.append(x)
            return "".join(parts)
        if isinstance(e, ast.Attribute):
            return self.getattr_(self.eval(e.value, f), e.attr)
        if isinstance(e, ast.Subscript):
            return self.subscript(self.eval(e.value, f), e.slice, f)
        if isinstance(e, ast.Call):
            return self.call_expr(e, f)
        if isinstance(e, ast.BinOp):
            a, b = self.eval(e.left, f), self.eval(e.right, f)
            if isinstance(e.op, ast.BitOr) and not (isinstance(a, (int, set)) and isinstance(b, (int, set))):
                if isinstance(a, dict) and isinstance(b, dict):
                    return {**a, **b}
                return union(a, b)
            op = _BINOPS.get(type(e.op))
            if op and concrete(a) and concrete(b) and a is not UNKNOWN and b is not UNKNOWN:
                return op(a, b)
            return UNKNOWN
        if isinstance(e, ast.UnaryOp):
            v = self.eval(e.operand, f)
            if v is UNKNOWN or not concrete(v):
                return UNKNOWN
            return {ast.Not: operator.not_, ast.USub: operator.neg, ast.UAdd: operator.pos,
                    ast.Invert: operator.invert}[type(e.op)](v)
        if isinstance(e, ast.BoolOp):
            vals = [self.eval(x, f) for x in e.values]
            result = vals[0]
            for v in vals:
                t = self.truth(v)
                if t is None:
                    return UNKNOWN
                result = v
                if isinstance(e.op, ast.And) and not t:
                    return v
                if isinstance(e.op, ast.Or) and t:
                    return v
            return result
        if isinstance(e, ast.Compare):
            left = self.eval(e.left, f)
            for op, right_e in zip(e.ops, e.comparators, strict=True):
                right = self.eval(right_e, f)
                if not comparable(left) or not comparable(right):
                    return UNKNOWN
                if isinstance(op, (ast.Is, ast.IsNot)) and not (left is None or right is None):
                    ok = (left == right) if isinstance(op, ast.Is) else (left != right)
                else:
                    try:
                        ok = _CMPOPS[type(op)](left, right)
                    except TypeError:
                        return UNKNOWN
                if not ok:
                    return False
                left = right
            return True
        if isinstance(e, ast.IfExp):
            t = self.truth(self.eval(e.test, f))
            if t is None:
                return UNKNOWN
            return self.eval(e.body if t else e.orelse, f)
        if isinstance(e, ast.Lambda):
            return FuncRef(f.module, e)
        if isinstance(e, (ast.ListComp, ast.SetComp, ast.GeneratorExp, ast.DictComp)):
            return self.comprehension(e, f)
        if isinstance(e, ast.Starred):
            return self.eval(e.value, f)
        if isinstance(e, ast.NamedExpr):
            v = self.eval(e.value, f)
            self.assign(e.target, v, f)
            return v
        return UNKNOWN

    def comprehension(self, e: Any, f: Frame) -> Any:
        inner = Frame(f.module, dict(f.local), f.owner, f.bound)
        results: list[Any] = []

        def loop(i: int) -> bool:
            if i == len(e.generators):
                if isinstance(e, ast.DictComp):
                    results.append((self.eval(e.key, inner), self.eval(e.value, inner)))
                else:
                    results.append(self.eval(e.elt, inner))
                return True
            g = e.generators[i]
            it = self.eval(g.iter, inner)
            if not isinstance(it, (list, tuple, dict, set, frozenset, str, range)):
                return False
            for item in list(it):
                self.assign(g.target, item, inner)
                conds = [self.truth(self.eval(c, inner)) for c in g.ifs]
                if any(c is None for c in conds):
                    return False
                if all(conds) and not loop(i + 1):
                    return False
            return True

        if not loop(0):
            return UNKNOWN
        if isinstance(e, ast.DictComp):
            return dict(results) if all(concrete(k) for k, _ in results) else UNKNOWN
        if isinstance(e, ast.SetComp):
            return set(results) if comparable(results) else UNKNOWN
        return results

    def getattr_(self, obj: Any, name: str) -> Any:
        if obj is UNKNOWN:
            return UNKNOWN
        if isinstance(obj, ModRef):
            if self.src.has_module(f"{obj.name}.{name}"):
                return ModRef(f"{obj.name}.{name}")
            return self.global_(obj.name, name)
        if isinstance(obj, Opaque):
            return Opaque(f"{obj.qualname}.{name}")
        if isinstance(obj, ClassRef):
            v = self.class_attr(obj, name)
            if isinstance(v, FuncRef) and "classmethod" in v.decorators():
                return FuncRef(v.module, v.node, v.owner, bound=obj)
            return v
        if isinstance(obj, Instance):
            if name in obj.attrs:
                return obj.attrs[name]
            v = self.class_attr(obj.cls, name)
            if isinstance(v, FuncRef):
                decs = v.decorators()
                if "staticmethod" in decs:
                    return v
                return FuncRef(v.module, v.node, v.owner, bound=obj.cls if "classmethod" in decs else obj)
            return v
        if isinstance(obj, SuperRef):
            cls = obj.bound if isinstance(obj.bound, ClassRef) else getattr(obj.bound, "cls", None)
            if cls is None:
                return UNKNOWN
            v = self.class_attr(cls, name, start_after=obj.start_after)
            if isinstance(v, FuncRef):
                decs = v.decorators()
                if "staticmethod" in decs:
                    return v
                return FuncRef(v.module, v.node, v.owner, bound=obj.bound)
            return v
        if isinstance(obj, Bag):
            return obj.attrs.get(name, UNKNOWN)
        if isinstance(obj, ParserRec):
            return ("parser", obj, name)
        if isinstance(obj, tuple) and obj and obj[0] == "subparsers":
            return obj if name == "add_parser" else UNKNOWN
        if isinstance(obj, TypeHint) and name == "__args__":
            return obj.args
        if isinstance(obj, (str, list, dict, tuple, set, frozenset)):
            if isinstance(obj, str) and name not in _STR_METHODS:
                return UNKNOWN
            return ("method", obj, name)
        return UNKNOWN

    def subscript(self, obj: Any, sl: ast.expr, f: Frame) -> Any:
        if isinstance(obj, Opaque) and obj.short in _TYPING | {"list", "dict", "tuple", "set", "type"}:
            items = sl.elts if isinstance(sl, ast.Tuple) else [sl]
            vals = [self.eval(x, f) for x in items]
            kind = obj.short
            if kind == "Literal":
                flat: list[Any] = []
                for v in vals:
                    flat.extend(v.args if isinstance(v, TypeHint) and v.kind == "literal" else [v])
                return TypeHint("literal", tuple(flat))
            if kind == "Optional":
                return union(vals[0], None)
            if kind == "Union":
                return union(*vals)
            if kind == "Annotated":
                return TypeHint("annotated", tuple(vals))
            if kind in ("ClassVar", "Final", "InitVar", "Required", "NotRequired"):
                return TypeHint(kind.lower(), (vals[0],))
            origin = {"List": "list", "Dict": "dict", "Tuple": "tuple", "Set": "set", "Sequence": "list",
                      "Iterable": "list", "Mapping": "dict", "Type": "type"}.get(kind, kind)
            return TypeHint("generic", tuple(vals), origin=origin)
        if isinstance(obj, ClassRef):
            return TypeHint("generic", (self.eval(sl, f),), origin=obj)
        if obj is UNKNOWN:
            return UNKNOWN
        if isinstance(sl, ast.Slice):
            parts = [self.eval(x, f) if x is not None else None for x in (sl.lower, sl.upper, sl.step)]
            if isinstance(obj, (list, tuple, str)) and all(p is None or isinstance(p, int) for p in parts):
                return obj[slice(*parts)]
            return UNKNOWN
        key = self.eval(sl, f)
        if isinstance(obj, (dict, list, tuple, str)) and comparable(key):
            return obj[key]
        return UNKNOWN

    # ---------------------------------------------------------------- calls
    def call_expr(self, e: ast.Call, f: Frame) -> Any:
        fn = self.eval(e.func, f)
        args: list[Any] = []
        for a in e.args:
            if isinstance(a, ast.Starred):
                v = self.eval(a.value, f)
                if not isinstance(v, (list, tuple)):
                    return self._unknown_call(fn, e, f)
                args.extend(v)
            else:
                args.append(self.eval(a, f))
        kwargs: dict[str, Any] = {}
        for k in e.keywords:
            v = self.eval(k.value, f)
            if k.arg is None:
                if not isinstance(v, dict):
                    kwargs["**"] = UNKNOWN  # an unknown **mapping: the spec is unknown
                    continue
                kwargs.update(v)
            else:
                kwargs[k.arg] = v
        if isinstance(fn, Opaque) and fn.qualname == "builtins.super":
            if f.owner is None:
                return UNKNOWN
            return SuperRef(f.owner, f.bound)
        return self.call(fn, args, kwargs, where=f"{f.module}")

    def _unknown_call(self, fn: Any, e: ast.Call, f: Frame) -> Any:
        if isinstance(fn, tuple) and fn[0] == "parser" and fn[2] == "add_argument":
            self.warnings.append(f"{f.module}:{e.lineno}: add_argument with unknown *args")
        return UNKNOWN

    def call(self, fn: Any, args: list[Any], kwargs: dict[str, Any], where: str = "") -> Any:
        if isinstance(fn, FuncRef):
            return self.run_function(fn, args, dict(kwargs))
        if isinstance(fn, tuple) and fn and fn[0] == "parser":
            return self.parser_method(fn[1], fn[2], args, kwargs, where)
        if isinstance(fn, tuple) and fn and fn[0] == "subparsers":
            return self.new_parser(kwargs, fn[1].ctor.get("class", "?"), sub=args[0] if args else "?")
        if isinstance(fn, tuple) and fn and fn[0] == "method":
            return self.value_method(fn[1], fn[2], args, kwargs)
        if isinstance(fn, ClassRef):
            if self.is_subclass_named(fn, {"ArgumentParser"}):
                return self.new_parser(kwargs, fn.name)
            ov = self.overrides.get(fn.qualname)
            if ov is not None:
                return ov(self, *args, **kwargs)
            return self.instantiate(fn, args, kwargs)
        if isinstance(fn, Opaque):
            return self.opaque_call(fn, args, kwargs)
        if isinstance(fn, Special):
            return UNKNOWN
        return UNKNOWN

    def opaque_call(self, fn: Opaque, args: list[Any], kwargs: dict[str, Any]) -> Any:
        q, short = fn.qualname, fn.short
        if q.startswith("builtins.") and short in _PURE_BUILTINS:
            if all(concrete(a) and a is not UNKNOWN for a in args) and all(concrete(v) for v in kwargs.values()):
                return getattr(builtins, short)(*args, **kwargs)
            if short == "dict" and (not args or isinstance(args[0], dict)):
                return {**(args[0] if args else {}), **kwargs}
            if short in ("list", "tuple", "set") and len(args) == 1 and isinstance(args[0], (list, tuple, set, dict)):
                items = list(args[0])
                return tuple(items) if short == "tuple" else set(items) if short == "set" else items
            if short == "len" and len(args) == 1 and isinstance(args[0], (list, tuple, set, dict)):
                return len(args[0])
            return UNKNOWN
        if short == "ArgumentParser" or q.endswith("argparse.ArgumentParser"):
            return self.new_parser(kwargs, q)
        if short in ("field", "Field"):
            default = kwargs.get("default", args[0] if args and short == "Field" else MISSING)
            return FieldSpec(default=default, factory=kwargs.get("default_factory"),
                             init=kwargs.get("init", True) is not False)
        if short in ("deepcopy", "copy") and q.startswith("copy.") and args:
            return sym_copy(args[0])
        if short == "cast" and len(args) == 2:
            return args[1]
        return self.typing_call(q, short, args, kwargs)

    def new_parser(self, kwargs: dict[str, Any], cls: str, sub: str | None = None) -> ParserRec:
        p = ParserRec(ctor={**kwargs, "class": cls, "subcommand": sub})
        self.parsers.append(p)
        return p

    def value_method(self, obj: Any, name: str, args: list[Any], kwargs: dict[str, Any]) -> Any:
        if isinstance(obj, dict):
            if name == "items":
                return list(obj.items())
            if name in ("keys", "values", "copy"):
                return list(getattr(obj, name)()) if name != "copy" else dict(obj)
            if name in ("get", "pop", "setdefault"):
                key = args[0] if args else UNKNOWN
                if not concrete(key):
                    return UNKNOWN
                return getattr(obj, name)(*args)
            if name == "update":
                for a in args:
                    if isinstance(a, dict):
                        obj.update(a)
                obj.update(kwargs)
                return None
            return UNKNOWN
        if isinstance(obj, list):
            if name in ("append", "extend", "insert", "remove", "copy", "index", "count", "pop"):
                try:
                    return getattr(obj, name)(*args)
                except Exception:  # noqa: BLE001
                    return UNKNOWN
            return UNKNOWN
        if isinstance(obj, set):
            if name in ("add", "update", "discard", "union", "copy", "issubset"):
                try:
                    return getattr(obj, name)(*args)
                except TypeError:
                    return UNKNOWN
            return UNKNOWN
        if isinstance(obj, str) and name in _STR_METHODS:
            if all(concrete(a) for a in args) and all(concrete(v) for v in kwargs.values()):
                return getattr(obj, name)(*args, **kwargs)
        return UNKNOWN

    def parser_method(self, p: Any, name: str, args: list[Any], kwargs: dict[str, Any], where: str) -> Any:
        if name == "add_argument":
            if not all(isinstance(a, str) for a in args):
                self.warnings.append(f"{where}: add_argument with non-literal names {args!r}")
                return UNKNOWN
            p.args.append(Argument(list(args), dict(kwargs), where))
            return UNKNOWN
        if name in ("add_argument_group", "add_mutually_exclusive_group"):
            return p.group()
        if name == "add_subparsers":
            return ("subparsers", p)
        if name in ("parse_args", "parse_known_args") and self.stop_at_parse:
            raise StopRun()
        return UNKNOWN
