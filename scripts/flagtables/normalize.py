"""One recorded ``add_argument`` call -> a JSON spec: option strings, action, nargs, value type, choices, default."""

from __future__ import annotations

import ast
import json
import re
from typing import Any

from flagtables.values import UNKNOWN, FuncRef, Opaque, Special

_ACTIONS = {"store", "store_true", "store_false", "store_const", "append", "append_const", "count", "help",
            "version", "extend"}
# value-parsing helpers of the engines, by function name -> (type, "None" accepted)
_TYPE_FUNCS = {"nullable_str": ("str", True), "nullable_kvs": ("kvs", True), "human_readable_int": ("human_int", False),
               "human_readable_int_or_auto": ("human_int_or_auto", False), "optional_str": ("str", True),
               "optional_int": ("int", True), "optional_float": ("float", True), "loads": ("json", False),
               "union_dict_and_str": ("json_or_str", True), "parse_type": ("json", False),
               "str2bool": ("bool", False), "strtobool": ("bool", False), "parse_dataclass": ("json", False)}


def _type_of(t: Any) -> tuple[str | None, bool]:
    """(type name, "None" accepted) of an argparse ``type=`` value; ("custom:NAME", False) when opaque."""
    if t is None:
        return None, False
    if isinstance(t, Special):
        return t.name, bool(t.payload)
    if isinstance(t, Opaque):
        if t.qualname in ("builtins.int", "builtins.float", "builtins.str"):
            return t.short, False
        if t.qualname in ("json.loads",):
            return "json", False
        if t.short in _TYPE_FUNCS:
            return _TYPE_FUNCS[t.short]
        return f"custom:{t.short}", False
    if isinstance(t, FuncRef):
        closure = t.closure or {}
        if t.name.lstrip("_") in ("optional_type",) and "return_type" in closure:
            inner, _ = _type_of(closure["return_type"])  # vllm/utils optional_type(T): "None"/"" -> None, else T
            return inner, True
        if t.name.lstrip("_") == "parse_type" and "return_type" in closure:
            return _type_of(closure["return_type"])
        if t.name in _TYPE_FUNCS:
            return _TYPE_FUNCS[t.name]
        return f"custom:{t.name}", False
    return "custom:?", False


def _literal(v: Any) -> Any:
    try:
        json.dumps(v)
        return v
    except (TypeError, ValueError):
        return UNKNOWN


def normalize(option_strings: list[str], kwargs: dict[str, Any]) -> dict[str, Any]:
    """The table's spec of one argument (keys left out when the source does not fix them)."""
    spec: dict[str, Any] = {"opts": list(option_strings)}
    if "**" in kwargs:
        spec["unknown_spec"] = True  # added with an unknown **kwargs mapping: only the names are sure
    action = kwargs.get("action", "store")
    if isinstance(action, str) and action in _ACTIONS:
        spec["action"] = action
    elif isinstance(action, Opaque) and action.short == "BooleanOptionalAction":
        spec["action"] = "bool_opt"
        extra = ["--no-" + o[2:] for o in option_strings if o.startswith("--")]
        spec["opts"] = list(option_strings) + [o for o in extra if o not in option_strings]
    elif action is UNKNOWN:
        spec["action"] = "?"
    else:
        name = getattr(action, "name", None) or getattr(action, "short", None) or "?"
        spec["action"] = f"custom:{name}"
        node = getattr(action, "node", None)
        if node is not None and kwargs.get("nargs") is None:
            text = ast.unparse(node)
            bases = " ".join(ast.unparse(b) for b in node.bases)
            if "nargs=0" in text.replace(" ", "") or re.search(r"Store(True|False|Const)Action", bases):
                spec["nargs"] = 0  # a flag without a value (the Action subclass says nargs=0)
    nargs = kwargs.get("nargs")
    if nargs is not None:
        spec["nargs"] = nargs if isinstance(nargs, (int, str)) else "?unknown"
    if spec["action"] in ("store", "append", "extend") or spec["action"].startswith("custom"):
        tname, none_ok = _type_of(kwargs.get("type"))
        if "type" in kwargs and kwargs["type"] is UNKNOWN:
            tname = "custom:?"
        if tname and tname not in ("str", "custom:str"):
            spec["type"] = tname
        if none_ok:
            spec["none_ok"] = True
    ch = kwargs.get("choices")
    if ch is not None:
        if isinstance(ch, (list, tuple, set, dict)) and ch and all(isinstance(c, (str, int, float)) or c is None
                                                                   for c in ch):
            spec["choices"] = sorted({c for c in ch}, key=lambda c: (str(type(c)), str(c)))
        else:  # computed at run time (a registry filled by decorators, an Enum): not checked
            spec["choices"] = "?"
    d = _literal(kwargs.get("default", None))
    if d is not UNKNOWN and d is not None and spec.get("action") not in ("store_true", "store_false", "bool_opt"):
        spec["default"] = d
    if "const" in kwargs and _literal(kwargs["const"]) is not UNKNOWN:
        spec["const"] = kwargs["const"]
    if kwargs.get("required") is True:
        spec["required"] = True
    dep = deprecation(kwargs)
    if dep:
        spec["deprecated"] = dep
    return spec


_DEP = re.compile(r"deprecat", re.I)
_FLAG = re.compile(r"(--[a-z0-9][a-z0-9_-]*[a-z0-9])")


def deprecation(kwargs: dict[str, Any]) -> str | None:
    """The help text's deprecation sentence (it often names the replacement), or "deprecated" for deprecated=True."""
    h = kwargs.get("help")
    if isinstance(h, str) and _DEP.search(h):
        return " ".join(h.split())[:300]
    if kwargs.get("deprecated") is True:
        return "deprecated"
    return None


def replacement_in(text: str, own: list[str]) -> list[str]:
    """Flags a deprecation text names other than the flag itself (candidates for "use X instead")."""
    return [m for m in _FLAG.findall(text) if m not in own]
