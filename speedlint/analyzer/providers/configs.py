"""Values that come from config files, for any rule that asks (`ctx.config_values`).

The whole program (`speedlint.analyzer.configs.flow`) says which names, parameters and `self`
attributes of this file hold a config object, and which file (with its layers) each one reads.
Here an expression is read as an access into one: `cfg.train.num_workers`,
`cfg["training"].get("workers", 4)`, `getattr(cfg, "workers", 4)`, `parser.getint("data",
"workers")`, `args.workers` for an `args` filled from the file. The answer is a `Value` of kind
`"config"` whose `config` names the line of each config file that holds it (a finding goes
there), or, when the file was found and lacks the key, the code's default (kind
`"config-default"`). When the file is not known or not understood, the lookup says nothing and
the ordinary value tracing applies (a `.get(..., default)` default still counts).

Rules see config values through `ctx.config_values` (a `ValueTracer` that asks this module);
`ctx.values` stays the plain tracer.
"""

from __future__ import annotations

import configparser
import os
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Dict, List, Optional, Tuple

import libcst as cst

from speedlint.analyzer.providers.names import dotted

if TYPE_CHECKING:  # pragma: no cover
    from speedlint.analyzer.providers.training import TorchFacts
    from speedlint.analyzer.providers.values import Value, ValueTracer

#: configparser accessors: name -> conversion of the string value
_PARSER_GETTERS: Dict[str, Callable[[str], Any]] = {
    "get": str,
    "getint": int,
    "getfloat": float,
    "getboolean": lambda v: configparser.ConfigParser.BOOLEAN_STATES[v.lower()],
}


@dataclass(frozen=True)
class ConfigSite:
    """Where a config value is written."""

    path: str  # absolute path of the config file
    line: int
    col: int  # 0-based
    end_col: int
    raw: str  # the value as written
    style: str  # plain | single | double | json | toml | ini | block | empty
    shared: bool  # a YAML alias or merge: editing it changes other places too
    keys: Tuple[Any, ...]  # its key path in that file (not where the code mounts the file)
    value: Any
    kind: str  # yaml | json | toml | ini
    name: str = ""  # how the code names it (`data.num_workers`, with the layer's mount point)
    #: the same value written in other files the code may read instead (the candidates of a
    #: required config option, `configs.candidates`): one finding each (`Rule.report`)
    others: Tuple["ConfigSite", ...] = ()

    @property
    def editable(self) -> bool:
        return not self.shared and self.line > 0 and self.style not in ("block", "empty")


@dataclass(frozen=True)
class _Access:
    refs: List[Tuple[int, Tuple[Any, ...], bool]]
    keys: Tuple[Any, ...]
    default: Optional[cst.BaseExpression]  # `.get(key, default)` / `getattr(x, key, default)`
    has_default: bool
    convert: Optional[Callable[[Any], Any]] = None


class ConfigLookup:
    """Config objects of one file (from its seeds) and lookups in the files they read."""

    def __init__(self, facts: "TorchFacts") -> None:
        self.facts = facts
        seeds = facts.seeds
        data = seeds.project.get("configs") if seeds is not None else None
        self.names: Dict[str, Dict[str, List[List[Any]]]] = (data or {}).get("names", {})
        self.attrs: Dict[str, Dict[str, List[List[Any]]]] = (data or {}).get("attrs", {})
        self.layers: Dict[str, List[List[Any]]] = (data or {}).get("sources", {})
        self._views: Dict[str, Any] = {}
        self.problems: List[Tuple[str, str]] = []  # (config path, message)

    @property
    def active(self) -> bool:
        return bool(self.names or self.attrs)

    # -- roots -----------------------------------------------------------------------------
    def filled(self, root: cst.BaseExpression) -> bool:
        """`root` (a name, or `self.<attr>`) holds a config object read from a file (also an
        argparse namespace the file's keys are copied into)."""
        return bool(self._refs(root))

    def _refs(self, root: cst.BaseExpression) -> List[Tuple[int, Tuple[Any, ...], bool]]:
        if isinstance(root, cst.Name):
            ordinals = self.facts._function_ordinal
            fn = self.facts.enclosing_function(root)
            while fn is not None:
                scope = self.names.get(str(ordinals.get(fn, -2)))
                if scope is not None and root.value in scope:
                    return _decode(scope[root.value])
                fn = self.facts.enclosing_function(fn)
            scope = self.names.get("-1")
            if scope is not None and root.value in scope:
                return _decode(scope[root.value])
            return []
        if isinstance(root, cst.Attribute) and dotted(root.value) == "self":
            cls = self.facts.enclosing_class(root)
            if cls is None:
                return []
            attrs = self.attrs.get(cls.name.value, {})
            return _decode(attrs.get(root.attr.value, []))
        return []

    def _access(self, expr: cst.BaseExpression) -> Optional[_Access]:
        """`expr` as (references of its root, key path, default, conversion)."""
        default: Optional[cst.BaseExpression] = None
        has_default = False
        convert = None
        keys: List[Any] = []
        node: cst.BaseExpression = expr
        if isinstance(node, cst.Call):
            func = node.func
            args = [a for a in node.args if not a.star]
            name = func.attr.value if isinstance(func, cst.Attribute) else dotted(func) or ""
            literals = [literal(a.value) for a in args]
            if name == "getattr" and len(args) in (2, 3) and isinstance(literals[1], str):
                keys.append(literals[1])
                if len(args) == 3:
                    default, has_default = args[2].value, True
                node = args[0].value
            elif isinstance(func, cst.Attribute) and name in _PARSER_GETTERS and len(args) >= 2 and all(isinstance(x, str) for x in literals[:2]) and args[1].keyword is None:
                keys += [literals[1], literals[0]]  # parser.getint("section", "option")
                convert = _PARSER_GETTERS[name]
                fallback = next((a.value for a in args if a.keyword is not None and a.keyword.value == "fallback"), None)
                if fallback is not None:
                    default, has_default = fallback, True
                node = func.value
            elif isinstance(func, cst.Attribute) and name in _PARSER_GETTERS and args and isinstance(literals[0], str):
                keys.append(literals[0])  # cfg.get("key", default), section.getint("key")
                if name != "get":
                    convert = _PARSER_GETTERS[name]
                if len(args) >= 2:
                    default, has_default = args[1].value, True
                elif name == "get":
                    has_default = True  # dict.get without a default: None
                node = func.value
            else:
                return None
        for _ in range(16):
            if isinstance(node, cst.Attribute):
                if dotted(node.value) == "self":
                    break
                keys.append(node.attr.value)
                node = node.value
            elif isinstance(node, cst.Subscript) and len(node.slice) == 1 and isinstance(node.slice[0].slice, cst.Index):
                key = literal(node.slice[0].slice.value)
                if key is None:
                    return None
                keys.append(key)
                node = node.value
            elif isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute) and node.func.attr.value == "get":
                args = [a for a in node.args if not a.star]
                key = literal(args[0].value) if args else None
                if not isinstance(key, str):
                    return None
                keys.append(key)
                node = node.func.value
            else:
                break
        refs = self._refs(node)
        if not refs:
            return None
        return _Access(refs, tuple(reversed(keys)), default, has_default, convert)

    # -- lookups ---------------------------------------------------------------------------
    def _view(self, sid: str) -> Any:
        view = self._views.get(sid)
        if view is None:
            from speedlint.analyzer.configs.sources import ConfigView, load

            layers = [(path, tuple(mount), digest) for path, mount, digest in self.layers.get(sid, [])]
            for path, _, _ in layers:
                doc, _ = load(path)
                if doc is not None and doc.broken:
                    self.problems.append((path, f"cannot read this config file ({doc.problem}); its values are not checked"))
            view = self._views[sid] = ConfigView(layers)
        return view

    def resolve(self, expr: cst.BaseExpression, tracer: "ValueTracer", depth: int) -> Optional["Value"]:
        """The value of a config access (None: not one, or not known)."""
        from speedlint.analyzer.providers.values import Value

        access = self._access(expr)
        if access is None:
            return None
        found_values: List[Any] = []
        sites: List[ConfigSite] = []
        missing, unknown, overlay_only = False, False, True
        for sid, prefix, overlay in access.refs:
            overlay_only = overlay_only and overlay
            found = self._view(str(sid)).lookup(prefix + access.keys)
            if found.status == "value":
                value = found.value
                if access.convert is not None:
                    try:
                        value = access.convert(value)
                    except (ValueError, KeyError, TypeError, AttributeError):
                        self.problems.append((found.path, f"`{'.'.join(map(str, prefix + access.keys))}` is `{found.scalar.raw}`, which the code cannot convert"))
                        return None
                scalar = found.scalar
                assert scalar is not None
                doc_kind = _kind(found.path)
                name = ".".join(map(str, prefix + access.keys))
                sites.append(ConfigSite(found.path, scalar.line, scalar.col, scalar.end_col, scalar.raw, scalar.style, scalar.shared, found.keys, value, doc_kind, name))
                if not any(type(v) is type(value) and v == value for v in found_values):
                    found_values.append(value)
            elif found.status == "missing":
                missing = True
            elif found.status == "unknown":
                unknown = True
            # "node": a mapping or list: not a scalar value
        if found_values and missing:
            return None  # set in some of the files the code may read, not in the others
        if found_values:
            return Value(tuple(found_values), expr, "config", True, tuple(sites))
        if unknown or not missing:
            return None
        if access.has_default:  # the file is known and lacks the key: the code's default applies
            if access.default is None:
                return Value((None,), expr, "config-default", True)
            default = tracer.resolve(access.default, depth)
            if default is None:
                return None
            return Value(default.options, default.origin, "config-default", True)
        return None  # an attribute the file lacks (an overlay: the object's own value)

    def entries(self, expr: cst.BaseExpression) -> Optional[Tuple[Dict[str, "ConfigSite"], bool]]:
        """`**cfg.loader`: the scalar entries of a config mapping (and whether it is complete)."""
        access = self._access(expr)
        if access is None or access.convert is not None or access.has_default or len(access.refs) != 1:
            return None
        sid, prefix, _ = access.refs[0]
        found = self._view(str(sid)).lookup(prefix + access.keys)
        from speedlint.analyzer.configs.reader import Mapping, Scalar

        if found.status != "node" or not isinstance(found.node, Mapping):
            return None
        out: Dict[str, ConfigSite] = {}
        complete = True
        for key, entry in found.node.entries.items():
            node = entry.node
            if isinstance(node, Scalar):
                name = ".".join(map(str, prefix + access.keys + (key,)))
                out[key] = ConfigSite(found.path, node.line, node.col, node.end_col, node.raw, node.style, node.shared, found.keys + (key,), node.value, _kind(found.path), name)
            else:
                complete = False
        return out, complete


def _kind(path: str) -> str:
    from speedlint.analyzer.configs.reader import kind_of

    return kind_of(path) or "yaml"


def _decode(refs: List[List[Any]]) -> List[Tuple[int, Tuple[Any, ...], bool]]:
    return [(int(sid), tuple(keys), bool(overlay)) for sid, keys, overlay in refs]


def literal(node: cst.BaseExpression) -> Any:
    """The value of a string or integer literal (None for anything else)."""
    if isinstance(node, (cst.SimpleString, cst.Integer)):
        import ast

        try:
            value = ast.literal_eval(node.value)
        except Exception:
            return None
        return value if isinstance(value, (str, int)) else None
    return None


def display_path(path: str) -> str:
    """How a config file's path is shown (relative to the working folder, like checked files)."""
    try:
        return os.path.relpath(path)
    except ValueError:  # another drive on Windows
        return path
