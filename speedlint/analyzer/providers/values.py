"""Value tracing: what value reaches an argument, as far as one module shows.

Resolves literals, module constants, function defaults (and same-file call sites that override
them), argparse `add_argument(..., default=...)` reached through `args.x`/`opt.x`/`self.args.x`,
class attributes of config classes, `self.x = ...` attributes, literal dicts and `dict(...)`
(with later `d["k"] = v` / `d.update(...)` in the same function) passed as `**kwargs` or read
as `cfg["k"]`, `cfg.get("k", default)` (the default, marked uncertain, when the dict itself is
unknown), conditionals (both branches), and same-file helpers returning a constant.

`None` means "cannot be known statically": rules stay silent on it.
"""

from __future__ import annotations

import ast
import operator
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Optional, Tuple, Union, cast

import libcst as cst

from speedlint.analyzer.providers.names import dotted
from speedlint.analyzer.providers.hparams import hparam
from speedlint.analyzer.providers.training import TorchFacts
from speedlint.analyzer.providers.walk import visit as fast_visit

_MAX_DEPTH = 12
Scope = Optional[cst.CSTNode]  # a FunctionDef, a ClassDef (class body), or None (module)


def _reads_options(base: str) -> bool:
    """`args.x`, `self.args.x`, `opt.x`, `self.opt.x`, `cfg.args.x`: a namespace of parsed options."""
    return base.rsplit(".", 1)[-1] in ("args", "opt", "opts", "options", "hparams", "flags", "FLAGS", "config", "cfg")


def _config_default(defaults: Dict[str, Any], path: str) -> Optional[Any]:
    """The values of the config key that `path` reads (`config.DATA.NUM_WORKERS`,
    `self.cfg.DATA.NUM_WORKERS`: key `DATA.NUM_WORKERS`); a key of one part only through a name
    that says it holds options (`cfg.WORKERS`)."""
    parts = path.split(".")
    for i in range(1, len(parts)):
        key = ".".join(parts[i:])
        if key in defaults and ("." in key or _reads_options(".".join(parts[:i]))):
            return defaults[key]
    return None


#: Functions that build an instance of the dataclass they are given from the command line or a
#: mapping (`tyro.cli(Args)`, `simple_parsing.parse(Args)`, `OmegaConf.structured(Args)`).
_DATACLASS_PARSERS = frozenset({"cli", "parse", "structured", "from_dict"})


@dataclass(frozen=True)
class Value:
    """The possible values of an expression (several when it goes through a conditional)."""

    options: Tuple[Any, ...]
    origin: Optional[cst.CSTNode] = None  # where the value is written (literal, default=..., dict entry)
    kind: str = "literal"  # literal | constant | default | argparse | dict | config | config-default | config-python | hparams-config | helper | attribute
    certain: bool = True
    #: where a config file holds it (`providers.configs.ConfigSite`s; empty: not from a config file)
    config: Tuple[Any, ...] = ()
    #: a framework knob's place (`frameworks.Knob`) when the value comes through one (`self.hparams`)
    knob: Any = None

    def all(self, pred: Callable[[Any], bool]) -> bool:
        return all(_safe(pred, o) for o in self.options)

    def any(self, pred: Callable[[Any], bool]) -> bool:
        return any(_safe(pred, o) for o in self.options)

    @property
    def single(self) -> Any:
        return self.options[0] if len(self.options) == 1 else None


def _safe(pred: Callable[[Any], bool], value: Any) -> bool:
    try:
        return bool(pred(value))
    except Exception:
        return False


@dataclass(frozen=True)
class KwArg:
    """What reaches keyword `name` of a call."""

    status: str  # "missing" | "value" | "unknown"
    value: Optional[Value] = None
    node: Optional[cst.CSTNode] = None  # the Arg / DictElement that sets it
    via: Optional[cst.BaseExpression] = None  # the `**splat` expression it came through
    #: through a dict built in several ways (`{...} if c else {}`): a fix cannot edit one place
    conditional: bool = False

    @property
    def missing(self) -> bool:
        return self.status == "missing"

    @property
    def unknown(self) -> bool:
        return self.status == "unknown"


_UNKNOWN = object()  # an assignment we cannot follow (augmented, loop target, import ...)
#: `kwarg(default=...)` not given: a keyword that may be left out is unknown.
NO_DEFAULT = _UNKNOWN
#: One way a dict may be built: key -> (value expression, node that sets it), and whether it is complete.
#: (A scalar of a config file reached through `**cfg.loader` is a `ConfigEntry`, set by no node.)
Entries = Tuple[Dict[str, Tuple[Union[cst.BaseExpression, "ConfigEntry"], Optional[cst.CSTNode]]], bool]
#: Dicts built in more ways than this are not followed.
_MAX_ALTERNATIVES = 8


class _Index(cst.CSTVisitor):
    """Every binding of a name, per scope, plus argparse options and subscript/update writes."""

    def __init__(self, facts: TorchFacts) -> None:
        super().__init__()
        self.facts = facts
        self.binds: Dict[Tuple[Scope, str], List[Any]] = {}
        #: `d["k"] = v`: (scope, dict name) -> (key, value written: an expression or a marker, as in `binds`)
        self.item_writes: Dict[Tuple[Scope, str], List[Tuple[str, Any]]] = {}
        self.updates: Dict[Tuple[Scope, str], List[cst.Call]] = {}
        self.argparse: Dict[str, List[cst.Call]] = {}
        self.self_attrs: Dict[Tuple[Optional[cst.ClassDef], str], List[cst.BaseExpression]] = {}
        #: `args.x = ...` / `self.args.x = ...`: (where, the namespace as written, attribute) -> values
        #: written; where: the class for `self.<...>`, else the function (None: the module)
        self.attr_writes: Dict[Tuple[Optional[cst.CSTNode], str, str], List[Any]] = {}
        self.returns: Dict[cst.FunctionDef, List[Optional[cst.BaseExpression]]] = {}

    def _scope(self, node: cst.CSTNode) -> Scope:
        for a in self.facts.ancestors(node):
            if isinstance(a, (cst.FunctionDef, cst.ClassDef)):
                return a
        return None

    def _bind(self, target: cst.BaseExpression, value: Any, at: cst.CSTNode) -> None:
        scope = self._scope(at)
        if isinstance(target, cst.Name):
            self.binds.setdefault((scope, target.value), []).append(value)
        elif isinstance(target, (cst.Tuple, cst.List)):
            values: List[Any] = [_UNKNOWN] * len(target.elements)
            if (
                isinstance(value, (cst.Tuple, cst.List))
                and len(value.elements) == len(target.elements)
                and not any(isinstance(e, cst.StarredElement) for e in (*value.elements, *target.elements))
            ):
                values = [e.value for e in value.elements]  # `self.a, self.b = a, b`: pairwise
            elif isinstance(value, cst.Call) and not any(isinstance(e, cst.StarredElement) for e in target.elements):
                values = [("unpack", value, i) for i in range(len(target.elements))]  # `a, b = f()`: the i-th of its result
            for el, v in zip(target.elements, values):
                self._bind(el.value, v, at)
        elif isinstance(target, cst.Subscript) and isinstance(target.value, cst.Name):
            key = _subscript_key(target)
            if key is not None and value is not _UNKNOWN:
                self.item_writes.setdefault((scope, target.value.value), []).append((key, value))
        elif isinstance(target, cst.Attribute) and dotted(target.value) == "self":
            cls = self.facts.enclosing_class(at)
            self.self_attrs.setdefault((cls, target.attr.value), []).append(value)
        elif isinstance(target, cst.Attribute):
            base = dotted(target.value)
            if base is not None:
                self.attr_writes.setdefault((self._owner(base, at), base, target.attr.value), []).append(value)

    def _owner(self, base: str, at: cst.CSTNode) -> Optional[cst.CSTNode]:
        """Where a namespace lives: the class for `self.args`, else the function (None: the module)."""
        return self.facts.enclosing_class(at) if base.startswith("self.") else self.facts.enclosing_function(at)

    def visit_Assign(self, node: cst.Assign) -> None:
        for t in node.targets:
            self._bind(t.target, node.value, node)

    def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
        self._bind(node.target, node.value if node.value is not None else _UNKNOWN, node)

    def visit_AugAssign(self, node: cst.AugAssign) -> None:
        self._bind(node.target, _UNKNOWN, node)

    def visit_NamedExpr(self, node: cst.NamedExpr) -> None:
        self._bind(node.target, node.value, node)

    def visit_For(self, node: cst.For) -> None:
        self._bind(node.target, _UNKNOWN, node)

    def visit_WithItem(self, node: cst.WithItem) -> None:
        if node.asname is not None:
            self._bind(node.asname.name, _UNKNOWN, node)

    def visit_Param(self, node: cst.Param) -> None:
        fn = self.facts.enclosing_function(node)
        if fn is not None:
            self.binds.setdefault((fn, node.name.value), []).append(("param", fn, node))

    def visit_Return(self, node: cst.Return) -> None:
        fn = self.facts.enclosing_function(node)
        if fn is not None:
            self.returns.setdefault(fn, []).append(node.value)

    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        if not isinstance(func, cst.Attribute):
            return
        if func.attr.value == "add_argument":
            dest = _argparse_dest(node)
            if dest:
                self.argparse.setdefault(dest, []).append(node)
        elif func.attr.value == "update" and isinstance(func.value, cst.Name):
            self.updates.setdefault((self._scope(node), func.value.value), []).append(node)


def _written_at(value: Any) -> cst.CSTNode:
    """Where a value written into a dict item is written: the expression, or for
    `d["a"], d["b"] = f()` (the marker `("unpack", call, i)`) the call."""
    return value[1] if value.__class__ is tuple else value


def _subscript_key(node: cst.Subscript) -> Optional[str]:
    if len(node.slice) != 1 or not isinstance(node.slice[0].slice, cst.Index):
        return None
    key = node.slice[0].slice.value
    return _literal_str(key)


def _literal_str(node: cst.BaseExpression) -> Optional[str]:
    if isinstance(node, cst.SimpleString):
        try:
            value = ast.literal_eval(node.value)
        except Exception:
            return None
        return value if isinstance(value, str) else None
    return None


def _argparse_dest(call: cst.Call) -> Optional[str]:
    flags = []
    for arg in call.args:
        if arg.keyword is not None:
            if arg.keyword.value == "dest":
                return _literal_str(arg.value)
            continue
        s = _literal_str(arg.value)
        if s:
            flags.append(s)
    longs = [f for f in flags if f.startswith("--")]
    chosen = longs[0] if longs else (flags[0] if flags else None)
    if chosen is None:
        return None
    return chosen.lstrip("-").replace("-", "_")


def _kw(call: cst.Call, name: str) -> Optional[cst.Arg]:
    for arg in call.args:
        if arg.keyword is not None and arg.keyword.value == name:
            return arg
    return None


_BINOPS = {
    cst.Add: operator.add,
    cst.Subtract: operator.sub,
    cst.Multiply: operator.mul,
    cst.FloorDivide: operator.floordiv,
    cst.Divide: operator.truediv,
}


class ConfigEntry:
    """A scalar of a config mapping that reaches a call through `**cfg.loader` (not a CST node)."""

    def __init__(self, site: Any) -> None:
        self.site = site


class ValueTracer:
    def __init__(self, facts: TorchFacts, configs: Any = None) -> None:
        self.facts = facts
        self._index: Optional[_Index] = None
        self._params: Dict[cst.Param, Optional[Value]] = {}  # `_resolve_param`, once per parameter
        #: `providers.configs.ConfigLookup`: values read from config files (None: not asked)
        self.configs = configs

    @property
    def index(self) -> _Index:
        if self._index is None:
            self._index = _Index(self.facts)
            fast_visit(self.facts.module, self._index)
        return self._index

    # -- public API ------------------------------------------------------------------------
    def resolve(self, expr: Union[cst.BaseExpression, ConfigEntry, None], depth: int = 0) -> Optional[Value]:
        if expr is None or depth > _MAX_DEPTH:
            return None
        try:
            return self._resolve(expr, depth + 1)
        except RecursionError:  # pragma: no cover - pathological input
            return None

    def kwarg(self, call: cst.Call, name: str, position: Optional[int] = None, default: Any = NO_DEFAULT) -> KwArg:
        """What reaches keyword `name` (or positional `position`) of `call`.

        Through `**kwargs` built conditionally (`{...} if c else {}`, a dict updated under an
        `if`), the keyword may be there or not: with a `default` (what the callee uses when it is
        left out), it counts among the options; without one, the keyword is unknown."""
        positional = [a for a in call.args if a.keyword is None and not a.star]
        for arg in call.args:
            if arg.keyword is not None and arg.keyword.value == name:
                value = self.resolve(arg.value)
                return KwArg("value" if value else "unknown", value, arg)
        if position is not None and len(positional) > position:
            arg = positional[position]
            value = self.resolve(arg.value)
            return KwArg("value" if value else "unknown", value, arg)
        for arg in call.args:
            if arg.star == "*" and position is not None:
                return KwArg("unknown", None, arg, arg.value)
            if arg.star != "**":
                continue
            alternatives = self.dict_alternatives(arg.value)
            if alternatives is None:
                return KwArg("unknown", None, arg, arg.value)
            options: Tuple[Any, ...] = ()
            origin: Optional[cst.CSTNode] = None
            element: Optional[cst.CSTNode] = None
            certain, missing = True, False
            config: Tuple[Any, ...] = ()
            for items, complete in alternatives:
                if name not in items:
                    if not complete:
                        return KwArg("unknown", None, arg, arg.value)
                    missing = True
                    continue
                value_expr, node = items[name]
                value = self.resolve(value_expr)
                if value is None:
                    return KwArg("unknown", None, node, arg.value)
                options = _merge(options, value.options)
                origin = origin or value.origin
                element = element or node or arg
                certain = certain and value.certain
                config += value.config
            if element is None:
                continue  # not in this dict: the next `**` may have it
            if missing:
                if default is NO_DEFAULT:
                    return KwArg("unknown", None, element, arg.value)
                options = _merge(options, (default,))
            conditional = len(alternatives) > 1
            kind = "config" if config and not missing else "dict"
            return KwArg("value", Value(options, origin, kind, certain, config), element, arg.value, conditional)
        return KwArg("missing")

    def dict_entries(self, expr: cst.BaseExpression, depth: int = 0) -> Optional[Entries]:
        """Key -> (value expression, node that sets it) for a dict known in this module (one
        definition only: see `dict_alternatives` for dicts built in several ways).

        The bool says whether the dict is complete (no unresolvable `**` merges or updates).
        """
        alternatives = self.dict_alternatives(expr, depth)
        if alternatives is None or len(alternatives) != 1:
            return None
        return alternatives[0]

    def dict_alternatives(self, expr: cst.BaseExpression, depth: int = 0) -> Optional[List[Entries]]:
        """The dicts `expr` may be, one per way it is built (a conditional expression, several
        assignments, updates or item writes under an `if`): each as key -> (value expression,
        node that sets it), and whether it is complete (no unresolvable `**` merges or updates).
        None when it is not a dict known in this module, or may be too many."""
        if depth > _MAX_DEPTH:
            return None
        if isinstance(expr, cst.Dict):
            alternatives: List[Entries] = [({}, True)]
            for el in expr.elements:
                if isinstance(el, cst.DictElement):
                    key = _literal_str(el.key)
                    if key is None:
                        alternatives = [(items, False) for items, _ in alternatives]
                    else:
                        for items, _ in alternatives:
                            items[key] = (el.value, el)
                else:  # StarredDictElement
                    merged = self._merge_entries(el.value, alternatives, depth)
                    if merged is None:
                        return None
                    alternatives = merged
            return alternatives
        if isinstance(expr, cst.Call) and dotted(expr.func) == "dict":
            return self._merge_call_args(expr, [({}, True)], depth)
        if self.configs is not None and isinstance(expr, (cst.Attribute, cst.Subscript, cst.Call)):
            got = self.configs.entries(expr)  # `**cfg.loader`: a mapping of a config file
            if got is not None:
                sites, complete = got
                return [({k: (ConfigEntry(site), None) for k, site in sites.items()}, complete)]
        if isinstance(expr, cst.IfExp):
            body, orelse = self.dict_alternatives(expr.body, depth + 1), self.dict_alternatives(expr.orelse, depth + 1)
            if body is None or orelse is None:
                return None
            return _capped(body + orelse)
        if isinstance(expr, cst.Name):
            scope, bound = self._bindings(expr)
            if not bound or any(b is _UNKNOWN or isinstance(b, tuple) for b in bound):
                return None
            alternatives = []
            for b in bound:
                got = self.dict_alternatives(b, depth + 1)
                if got is None:
                    return None
                alternatives += [(dict(items), complete) for items, complete in got]
            if len(alternatives) > _MAX_ALTERNATIVES:
                return None
            written = (scope, expr.value)
            # (`...`: the lambdas below keep their loop values as defaults)
            changes: List[Tuple[cst.CSTNode, Callable[..., Optional[List[Entries]]]]] = []
            for target, value in self.index.item_writes.get(written, []):
                at = _written_at(value)
                changes.append((at, lambda alts, k=target, v=value, n=at: [({**items, k: (v, n)}, c) for items, c in alts]))
            for call in self.index.updates.get(written, []):
                changes.append((call, lambda alts, c=call: self._merge_call_args(c, alts, depth)))
            for at, change in sorted(changes, key=lambda c: self.facts.order.get(c[0], 0)):
                changed = change([(dict(items), c) for items, c in alternatives])
                if changed is None:
                    return None
                if self._conditional(at, bound):
                    capped = _capped(alternatives + changed)  # it may or may not happen
                    if capped is None:
                        return None
                    alternatives = capped
                else:
                    alternatives = changed
            return alternatives
        return None

    def _conditional(self, node: cst.CSTNode, bindings: List[Any]) -> bool:
        """`node` runs only under a condition (an `if`, a loop, a handler) the bindings are not under."""
        for a in self.facts.ancestors(node):
            if isinstance(a, (cst.FunctionDef, cst.Module)):
                return False
            if isinstance(a, (cst.If, cst.For, cst.While, cst.ExceptHandler, cst.IfExp)) and not all(
                isinstance(b, cst.CSTNode) and any(x is a for x in self.facts.ancestors(b)) for b in bindings
            ):
                return True
        return False

    def _merge_call_args(self, call: cst.Call, alternatives: List[Entries], depth: int) -> Optional[List[Entries]]:
        """`alternatives` with the entries of `dict(...)` / `d.update(...)` arguments added."""
        for arg in call.args:
            if arg.keyword is not None:
                for items, _ in alternatives:
                    items[arg.keyword.value] = (arg.value, arg)
                continue
            got = self._merge_entries(arg.value, alternatives, depth)
            if got is None:
                return None
            alternatives = got
        return alternatives

    def _merge_entries(self, expr: cst.BaseExpression, alternatives: List[Entries], depth: int) -> Optional[List[Entries]]:
        """`alternatives` with the entries of the dict `expr` evaluates to (`**expr`,
        `dict(expr)`) added; an unknown dict makes them incomplete."""
        inner = self.dict_alternatives(expr, depth + 1)
        if inner is None:
            return [(items, False) for items, _ in alternatives]
        out = [({**items, **more}, complete and more_complete) for items, complete in alternatives for more, more_complete in inner]
        return _capped(out) if len(out) <= _MAX_ALTERNATIVES else None

    # -- resolution ------------------------------------------------------------------------
    def _resolve(self, expr: Union[cst.BaseExpression, ConfigEntry], depth: int) -> Optional[Value]:
        if isinstance(expr, ConfigEntry):
            site = expr.site
            return Value((site.value,), None, "config", True, (site,))
        if self.configs is not None and isinstance(expr, (cst.Attribute, cst.Subscript, cst.Call)):
            got = self.configs.resolve(expr, self, depth)
            if got is not None:
                return got
        if isinstance(expr, cst.BooleanOperation):
            return self._resolve_boolean(expr, depth)
        if isinstance(expr, (cst.Integer, cst.Float, cst.SimpleString, cst.ConcatenatedString)):
            try:
                return Value((ast.literal_eval(_code(expr)),), expr)
            except Exception:
                return None
        if isinstance(expr, cst.Name):
            if expr.value in ("True", "False", "None"):
                return Value(({"True": True, "False": False, "None": None}[expr.value],), expr)
            return self._resolve_name(expr, depth)
        if isinstance(expr, cst.UnaryOperation):
            inner = self.resolve(expr.expression, depth)
            if inner is None:
                return None
            if isinstance(expr.operator, cst.Minus):
                return _map(inner, operator.neg)
            if isinstance(expr.operator, cst.Not):
                return _map(inner, operator.not_)
            return inner
        if isinstance(expr, cst.BinaryOperation) and type(expr.operator) in _BINOPS:
            left, right = self.resolve(expr.left, depth), self.resolve(expr.right, depth)
            if left is None or right is None or len(left.options) * len(right.options) > 16:
                return None
            op = _BINOPS[type(expr.operator)]
            try:
                options = tuple(op(a, b) for a in left.options for b in right.options)
            except Exception:
                return None
            return Value(options, left.origin, left.kind, left.certain and right.certain, left.config + right.config)
        if isinstance(expr, cst.IfExp):
            body, orelse = self.resolve(expr.body, depth), self.resolve(expr.orelse, depth)
            if body is None or orelse is None:
                return None
            return Value(_merge(body.options, orelse.options), expr, "conditional", body.certain and orelse.certain, body.config + orelse.config)
        if isinstance(expr, cst.Attribute):
            return self._resolve_attribute(expr, depth)
        if isinstance(expr, cst.Subscript):
            key = _subscript_key(expr)
            if key is None:
                return None
            value = self._entry_value(expr.value, key, None, depth)
            return Value(value.options, value.origin, "dict", value.certain) if value else None
        if isinstance(expr, cst.Call):
            return self._resolve_call(expr, depth)
        return None

    def _resolve_boolean(self, expr: cst.BooleanOperation, depth: int) -> Optional[Value]:
        """`a or b` / `a and b`: the options each side may give."""
        left = self.resolve(expr.left, depth)
        if left is None:
            return None
        is_or = isinstance(expr.operator, cst.Or)
        passed = tuple(o for o in left.options if bool(o) == is_or)
        if len(passed) == len(left.options):
            return left
        right = self.resolve(expr.right, depth)
        if right is None:
            return None
        options = _merge(passed, right.options)
        config = left.config if passed else ()
        return Value(options, left.origin if passed else right.origin, left.kind if passed else right.kind, left.certain and right.certain, config + right.config)

    def _entry_value(self, mapping: cst.BaseExpression, key: str, default: Optional[Value], depth: int) -> Optional[Value]:
        """`mapping[key]` (no `default`: a dict without the key raises, it adds nothing) or
        `mapping.get(key, default)`, over every way the dict may be built."""
        alternatives = self.dict_alternatives(mapping)
        if alternatives is None:
            return None
        values: List[Value] = []
        for items, complete in alternatives:
            if key in items:
                value = self.resolve(items[key][0], depth)
            elif not complete:
                return None
            else:
                value = default
                if value is None:
                    continue
            if value is None:
                return None
            if value not in values:
                values.append(value)
        if len(values) <= 1:
            return values[0] if values else None
        options: Tuple[Any, ...] = ()
        for value in values:
            options = _merge(options, value.options)
        return Value(options, values[0].origin, "dict", all(v.certain for v in values), tuple(c for v in values for c in v.config))

    def bindings(self, name: cst.Name) -> Tuple[Scope, List[Any]]:
        """The scope that binds `name` at this point and its bindings there (expressions, or
        markers for bindings that cannot be followed)."""
        return self._bindings(name)

    def _bindings(self, name: cst.Name) -> Tuple[Scope, List[Any]]:
        """The scope that binds `name` at this point and its bindings there."""
        index = self.index
        node: cst.CSTNode = name
        for a in self.facts.ancestors(node):
            if isinstance(a, cst.FunctionDef):
                bound = index.binds.get((a, name.value))
                if bound:
                    return a, bound
        return None, index.binds.get((None, name.value), [])

    def _resolve_name(self, name: cst.Name, depth: int) -> Optional[Value]:
        scope, bound = self._bindings(name)
        if not bound:
            return None
        options: Tuple[Any, ...] = ()
        origin = None
        kind = "constant" if scope is None else "local"
        certain = True
        config: Tuple[Any, ...] = ()
        for b in bound:
            if b is _UNKNOWN:
                return None
            if isinstance(b, tuple) and b and b[0] == "param":
                value = self._resolve_param(b[1], b[2])
                kind = "default"
            else:
                value = self.resolve(b, depth)
                if value is not None and value.kind not in ("literal", "local", "constant"):
                    kind = value.kind
            if value is None:
                return None
            options = _merge(options, value.options)
            origin = origin or value.origin
            certain = certain and value.certain
            config += value.config
        return Value(options, origin, kind, certain, config)

    def _resolve_param(self, fn: cst.FunctionDef, param: cst.Param) -> Optional[Value]:
        """What a parameter may hold: its default, constants passed from other modules, and what
        each same-file call site passes. Computed once per parameter: through chains of helpers
        that pass a value on (`f(x)` calls `g(x)` calls `h(x)`, each from several places) the
        call sites would otherwise be resolved again at every level, exponentially."""
        if param.star:  # *args / **kwargs
            return None
        memo = self._params
        if param in memo:
            return memo[param]  # None while it is being resolved: a cycle gives "unknown"
        memo[param] = None
        got = memo[param] = self._resolve_param_uncached(fn, param)  # the same whoever asks
        return got

    def _resolve_param_uncached(self, fn: cst.FunctionDef, param: cst.Param) -> Optional[Value]:
        options: Tuple[Any, ...] = ()
        origin: Optional[cst.CSTNode] = None
        passed_elsewhere = self.facts.passed_constants(fn, param.name.value)
        if passed_elsewhere is not None:  # called from other modules only (the whole program)
            if not passed_elsewhere[0]:
                return None  # some call site passes something that is not a constant
            options = _merge(options, tuple(passed_elsewhere[1]))
            origin = param
            if not passed_elsewhere[2]:  # every call site passes it: the default never applies
                return Value(options, origin, "default")
        if param.default is not None:
            default = self.resolve(param.default)
            if default is None:
                return None
            options, origin = default.options, default.origin
        # same-file call sites that pass the parameter override the default
        params = [p for p in fn.params.posonly_params] + [p for p in fn.params.params]
        position = next((i for i, p in enumerate(params) if p is param), None)
        if position is not None and self.facts.function_class.get(fn) is not None and fn.decorators == ():
            position -= 1  # `self`
        for call in self.facts.calls:
            if fn not in self.facts.resolve_call(call):
                continue
            passed = self.kwarg(call, param.name.value, position if position is not None and position >= 0 else None)
            if passed.missing:
                if param.default is None:
                    return None
                continue
            if passed.value is None:
                return None
            options = _merge(options, passed.value.options)
            origin = origin or passed.value.origin
        if not options:
            return None
        return Value(options, origin, "default")

    def _resolve_attribute(self, expr: cst.Attribute, depth: int) -> Optional[Value]:
        """An attribute's value; a namespace field the code also assigns (`args = tyro.cli(Args)`
        then `args.deterministic = False`) may hold what is written as well as its default."""
        got = self._attribute_default(expr, depth)
        base = dotted(expr.value)
        if got is None or base is None or base == "self":
            return got
        index = self.index
        owner = index._owner(base, expr)
        writes = [*index.attr_writes.get((owner, base, expr.attr.value), ())]
        if owner is not None and not base.startswith("self."):
            writes += index.attr_writes.get((None, base, expr.attr.value), ())
        if not writes:
            return got
        written = self._combine(writes, depth, got.kind)
        if written is None:
            return None
        return Value(_merge(got.options, written.options), got.origin, got.kind, got.certain and written.certain, got.config + written.config)

    def _attribute_default(self, expr: cst.Attribute, depth: int) -> Optional[Value]:
        attr = expr.attr.value
        base = dotted(expr.value)
        if base is None:
            return None
        index = self.index
        if base == "self.hparams":  # [frameworks] Lightning's saved hyper-parameters
            got = hparam(self.facts, expr)
            if got is not None:
                how, what = got
                if how == "param":
                    return self._resolve_param(*what)
                if how == "option":
                    return Value(tuple(what), None, "argparse")
                return Value((what.value,), None, "hparams-config", True, knob=what)
        if base == "self":
            cls = self.facts.enclosing_class(expr)
            writes = index.self_attrs.get((cls, attr))
            if writes:
                return self._combine(writes, depth, "attribute")
            return self._class_attribute(cls, attr, depth) if cls is not None else None
        # argparse: args.x, opt.x, self.args.x, config.args.x ...
        if attr in index.argparse:
            return self._argparse_default(index.argparse[attr], depth)
        # an option another module of the program declares (`main.py` parses, the trainer reads)
        seeds = self.facts.seeds
        project = seeds.project.get("options") if seeds is not None else None
        if project and isinstance(project.get(attr), bool) and _reads_options(base):
            # (on/off flags only: a number's meaning depends on code this file cannot see)
            return Value((project[attr],), None, "argparse")
        # a yacs-style config's key (`config.DATA.NUM_WORKERS`, `_C.DATA.NUM_WORKERS = 8`)
        defaults = seeds.project.get("config_defaults") if seeds is not None and attr.isupper() else None
        if defaults:
            found = _config_default(defaults, f"{base}.{attr}")
            if found is not None:
                return Value(tuple(found), None, "config-python")
        # config classes: Config.x, or cfg = Config(); cfg.x
        cls = self._class_of(expr.value)
        if cls is not None:
            return self._class_attribute(cls, attr, depth)
        return None

    def _class_of(self, expr: cst.BaseExpression) -> Optional[cst.ClassDef]:
        name = dotted(expr)
        if name in self.facts.class_defs and len(self.facts.class_defs[name]) == 1:
            return self.facts.class_defs[name][0]
        if isinstance(expr, cst.Name):
            _, bound = self._bindings(expr)
            parsed = self._parsed_record(bound[0]) if len(bound) == 1 else None
            if parsed is not None:
                return parsed
            if len(bound) == 1 and isinstance(bound[0], cst.Call):
                call = bound[0]
                callee = dotted(call.func)
                if callee in self.facts.class_defs and len(self.facts.class_defs[callee]) == 1 and not call.args:
                    return self.facts.class_defs[callee][0]
                # `args = tyro.cli(Args)`: an `Args` with its defaults unless the command line says otherwise
                first = call.args[0].value if call.args and call.args[0].keyword is None else None
                if (
                    (callee or "").rsplit(".", 1)[-1] in _DATACLASS_PARSERS
                    and isinstance(first, cst.Name)
                    and len(self.facts.class_defs.get(first.value, ())) == 1
                ):
                    return self.facts.class_defs[first.value][0]
        return None

    def _parsed_record(self, bound: Any) -> Optional[cst.ClassDef]:
        """`model_args, train_args = HfArgumentParser((ModelArgs, TrainArgs)).parse_args_into_dataclasses()`
        (also through a `parser` name, or `[i]` of the result): the i-th dataclass, filled from
        the command line over its defaults."""
        if isinstance(bound, tuple) and len(bound) == 3 and bound[0] == "unpack":
            call, index = bound[1], bound[2]
        elif isinstance(bound, cst.Subscript) and isinstance(bound.value, cst.Call) and len(bound.slice) == 1:
            key = bound.slice[0].slice
            if not (isinstance(key, cst.Index) and isinstance(key.value, cst.Integer)):
                return None
            call, index = bound.value, int(key.value.value)
        else:
            return None
        func = call.func
        if not (isinstance(func, cst.Attribute) and func.attr.value == "parse_args_into_dataclasses"):
            return None
        parser: object = func.value  # (or what a name is bound to: an expression, or a marker)
        if isinstance(parser, cst.Name):
            _, made = self._bindings(parser)
            parser = made[0] if len(made) == 1 else None
        if not (isinstance(parser, cst.Call) and (dotted(parser.func) or "").endswith("HfArgumentParser") and parser.args):
            return None
        first = parser.args[0].value
        classes = [e.value for e in first.elements] if isinstance(first, (cst.Tuple, cst.List)) else [first]
        if index >= len(classes) or not isinstance(classes[index], cst.Name):
            return None
        found = self.facts.class_defs.get(cast(cst.Name, classes[index]).value, ())
        return found[0] if len(found) == 1 else None

    def _class_attribute(self, cls: cst.ClassDef, attr: str, depth: int) -> Optional[Value]:
        bound = self.index.binds.get((cls, attr))
        if not bound:
            return None
        return self._combine(bound, depth, "constant")

    def _combine(self, exprs: List[Any], depth: int, kind: str) -> Optional[Value]:
        options: Tuple[Any, ...] = ()
        origin = None
        certain = True
        config: Tuple[Any, ...] = ()
        for e in exprs:
            if e is _UNKNOWN or isinstance(e, tuple):
                return None
            value = self.resolve(e, depth)
            if value is None:
                return None
            options = _merge(options, value.options)
            origin = origin or value.origin
            certain = certain and value.certain
            config += value.config
            if value.kind in ("argparse", "default", "dict", "config", "config-default"):
                kind = value.kind
        return Value(options, origin, kind, certain, config) if options else None

    def option_default(self, dest: str) -> Optional[Value]:
        """The default of this file's command-line option `dest` (None: not declared here, or
        also assigned in code: `args.use_amp = True`)."""
        index = self.index
        if dest not in index.argparse or any(k[2] == dest for k in index.attr_writes):
            return None
        return self._argparse_default(index.argparse[dest], 0)

    def _argparse_default(self, calls: List[cst.Call], depth: int) -> Optional[Value]:
        options: Tuple[Any, ...] = ()
        origin: Optional[cst.CSTNode] = None
        for call in calls:
            default = _kw(call, "default")
            if default is not None:
                value = self.resolve(default.value, depth)
                if value is None:
                    return None
                options = _merge(options, value.options)
                origin = origin or default
                continue
            action = _kw(call, "action")
            action_value = _literal_str(action.value) if action else None
            implied = {"store_true": False, "store_false": True}.get(action_value or "", None)
            options = _merge(options, (implied,))
            origin = origin or call
        return Value(options, origin, "argparse") if options else None

    def _resolve_call(self, call: cst.Call, depth: int) -> Optional[Value]:
        func = call.func
        name = dotted(func)
        if isinstance(func, cst.Attribute) and func.attr.value == "get" and call.args:
            key = _literal_str(call.args[0].value)
            if key is None:
                return None
            default = self.resolve(call.args[1].value, depth) if len(call.args) > 1 else Value((None,), call)
            if self.dict_alternatives(func.value) is not None:
                return self._entry_value(func.value, key, default, depth)
            if default is None:
                return None
            return Value(default.options, default.origin, "config-default", certain=False)
        if name is not None and name.rsplit(".", 1)[-1] in ("field", "Field") and isinstance(self.facts.parent(call), cst.AnnAssign):
            default_arg = _kw(call, "default")  # a dataclass / pydantic field: `x: bool = field(default=False)`
            value = self.resolve(default_arg.value, depth) if default_arg is not None else None
            return Value(value.options, call, value.kind, value.certain, value.config) if value is not None else None
        if name in ("int", "bool", "float", "str") and len(call.args) == 1:
            inner = self.resolve(call.args[0].value, depth)
            if inner is None:
                return None
            conv = {"int": int, "bool": bool, "float": float, "str": str}[name]
            try:
                return Value(tuple(conv(o) for o in inner.options), inner.origin, inner.kind, inner.certain, inner.config)
            except Exception:
                return None
        if name in ("min", "max") and len(call.args) >= 2 and all(a.star == "" for a in call.args):
            values = [self.resolve(a.value, depth) for a in call.args]
            if any(v is None or len(v.options) != 1 for v in values):
                return None
            try:
                result = (min if name == "min" else max)(v.options[0] for v in values)  # type: ignore[union-attr]
            except Exception:
                return None
            return Value((result,), values[0].origin, "helper")  # type: ignore[union-attr]
        if isinstance(func, cst.Name):
            fns = self.facts.functions.get(func.value, [])
            if len(fns) == 1:
                returns = self.index.returns.get(fns[0], [])
                if returns and all(r is not None for r in returns):
                    value = self._combine(list(returns), depth, "helper")
                    if value is not None:
                        return Value(value.options, value.origin, "helper", value.certain)
        return None


def _capped(alternatives: List[Entries]) -> Optional[List[Entries]]:
    return alternatives if len(alternatives) <= _MAX_ALTERNATIVES else None


def _map(value: Value, fn: Callable[[Any], Any]) -> Optional[Value]:
    try:
        return Value(tuple(fn(o) for o in value.options), value.origin, value.kind, value.certain, value.config)
    except Exception:
        return None


def _merge(a: Tuple[Any, ...], b: Tuple[Any, ...]) -> Tuple[Any, ...]:
    out = list(a)
    for item in b:
        if not any(type(item) is type(x) and item == x for x in out):
            out.append(item)
    return tuple(out)


def _code(node: cst.CSTNode) -> str:
    return cst.Module(body=()).code_for_node(node)
