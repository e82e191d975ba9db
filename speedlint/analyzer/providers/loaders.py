"""Shared facts about data loaders in one module (used by SPD101-SPD107 and the codemod).

Not a rule: the registry only picks up `Rule` subclasses. Computed once per file and cached on
the `FileContext` (`loader_facts(ctx)`).

* which calls build a loader (`loader_kind`): torch's `DataLoader`, the loaders of
  torch_geometric, MONAI and DGL, project subclasses of them (defined here: their `__init__`
  defaults count; in another module: the whole program says so), `functools.partial(DataLoader,
  ...)` (its keywords count);
* what reaches each keyword (`kwarg`): by keyword, position, `**kwargs` built in several ways
  (a keyword some way leaves out has the DataLoader default), the partial's keywords, the
  subclass's defaults, a config file the code reads (`ctx.config_values`);
* which expressions refer to which loader call (the identity every loader rule reads, SPD202
  through `Flow.loaders_of_iterable`): names and `self.x` attributes it is assigned to (also
  from a constructor's parameter), a wrapper bound to a name (`pbar = tqdm(loader)`, a project
  generator), tuples, lists and dicts holding it (also returned by a helper, on every branch:
  `train_set, train_loader = get_data()`), loop variables over such containers, parameters of
  same-file functions it is passed to (alone or in a list: `[train_loader, eval_loader]`, also
  nested functions), same-file helpers returning it;
* where each loader is iterated (`for b in loader`, `enumerate(loader)`, `tqdm(loader)`, `zip(...)`,
  `itertools.cycle`, a project generator that yields what it iterates) and where it is read with
  `next(iter(loader))` or `next(it)`;
* whether the dataset of a loader lives in memory (`TensorDataset`, a list of tensors, a project
  dataset class whose `__getitem__` only indexes data in memory; also built by a helper or passed
  in from another module, as the program says);
* whether a loader gets to a loop of a function run once per epoch once per epoch itself
  (`reaches_per_epoch`): along the calls that pass it, not because the function is;
* whether a node runs when the module is imported (no `if __name__ == "__main__":` around it),
  which matters for multi-worker loading on spawn platforms.

Worker counts that come from the CPU count are read in `providers.worker_counts`.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Dict, Iterable, List, Optional, Sequence, Set, Tuple, Union

import libcst as cst

from speedlint.analyzer.context import FileContext
from speedlint.analyzer.prelook import AstFacts
from speedlint.analyzer.providers.configs import display_path, literal as _literal
from speedlint.analyzer.providers.names import dotted
from speedlint.analyzer.providers.values import NO_DEFAULT, KwArg, Value
from speedlint.analyzer.providers.tensor_aliases import may_be_cuda_type
from speedlint.analyzer.providers.walk import visit as fast_visit
from speedlint.analyzer.vocabulary import (  # noqa: F401 - DISTRIBUTED, LOADER_TRIGGERS re-exported for the rules
    DATALOADER, DISTRIBUTED, DTYPES, LOADER_FAMILIES, LOADER_TAILS, LOADER_TRIGGERS, POSITIONS,
)

TENSOR_DATASET = "torch.utils.data.TensorDataset"
#: The worker count a fix writes into a config file (a literal: a config cannot ask for the CPU count).
CONFIG_WORKERS = 4
#: What torch's DataLoader uses for a keyword that is left out (`**kwargs` that may lack it).
DEFAULTS: Dict[str, Any] = {"num_workers": 0, "pin_memory": False, "persistent_workers": False, "drop_last": False, "shuffle": False}
_ITER_WRAPPERS = ("enumerate", "iter", "tqdm", "trange", "zip", "islice", "chain", "cycle")

Key = Tuple[Any, ...]


@dataclass(frozen=True, eq=False)
class LoaderKind:
    """What kind of loader a call builds, and where its keywords may come from besides the call."""

    qualname: str  # the loader class (for a project subclass: its base)
    positions: Dict[str, int]
    #: `functools.partial(DataLoader, ...)`: the partial call whose arguments come first
    partial: Optional[cst.Call] = None
    #: a project subclass defined in this module: its `__init__` (None when it has none)
    init: Optional[cst.FunctionDef] = None
    #: a project subclass: keywords the call leaves out have the subclass's defaults
    subclass: bool = False
    #: a project subclass defined in another module (its defaults are not known here)
    foreign: bool = False


def may_build_loader(facts: AstFacts) -> bool:
    """The `ast` pre-look of the loader rules: a loader class (or a `partial` of one) is called or
    subclassed in the file."""
    return facts.calls_any(*LOADER_TAILS) or facts.uses_any(*LOADER_TAILS)


def loader_kind(ctx: FileContext, call: cst.Call) -> Optional[LoaderKind]:
    """The kind of loader `call` builds (None: not a data loader)."""
    memo = ctx.provider(_loader_kinds)
    key = id(call)
    got = memo.get(key)
    if got is None or got[0] is not call:
        got = memo[key] = (call, _loader_kind(ctx, call.func, 0))
    return got[1]


def _loader_kinds(ctx: FileContext) -> Dict[int, Tuple[cst.Call, Optional[LoaderKind]]]:
    """`loader_kind`'s answers so far: id of the call -> (the call, its kind)."""
    return {}


def _family(ctx: FileContext, func: cst.BaseExpression) -> Optional[str]:
    q = ctx.qualname(func)
    return q if q in LOADER_FAMILIES else None


def _loader_kind(ctx: FileContext, func: cst.BaseExpression, depth: int) -> Optional[LoaderKind]:
    family = _family(ctx, func)
    if family is not None:
        return LoaderKind(family, LOADER_FAMILIES[family])
    if depth > 4:
        return None
    name = dotted(func)
    if name is None:
        return None
    if "." not in name:
        cls = _loader_subclass(ctx, name, depth)
        if cls is not None:
            return cls
        partial = _partial_of(ctx, func)  # type: ignore[arg-type]
        if partial is not None:
            inner = _loader_kind(ctx, partial.args[0].value, depth + 1)
            if inner is not None and inner.partial is None:
                return LoaderKind(inner.qualname, inner.positions, partial, inner.init, inner.subclass, inner.foreign)
    # a project subclass of a data loader defined in another module (the whole program says so)
    seeds = ctx.seeds
    if seeds is not None and name in seeds.project.get("loader_classes", ()):
        return LoaderKind(DATALOADER, {"dataset": 0}, subclass=True, foreign=True)
    return None


def _loader_subclass(ctx: FileContext, name: str, depth: int) -> Optional[LoaderKind]:
    classes = ctx.torch.class_defs.get(name, ())
    if len(classes) != 1:
        return None
    cls = classes[0]
    for base in cls.bases:
        inner = _loader_kind(ctx, base.value, depth + 1)
        if inner is None or inner.partial is not None:
            continue
        init = next(iter(ctx.torch.methods.get((name, "__init__"), ())), None)
        if init is None:
            return LoaderKind(inner.qualname, inner.positions, init=inner.init, subclass=True)
        params = [p.name.value for p in [*init.params.posonly_params, *init.params.params][1:]]
        return LoaderKind(inner.qualname, {p: i for i, p in enumerate(params)}, init=init, subclass=True)
    return None


def _partial_of(ctx: FileContext, name: cst.Name) -> Optional[cst.Call]:
    """The `functools.partial(<loader class>, ...)` call a name is bound to (its only binding)."""
    key = LoaderFacts.name_key_of(ctx, name)
    bound = ctx.values.index.binds.get((key[1], key[2]), [])
    if len(bound) != 1 or not isinstance(bound[0], cst.Call):
        return None
    call = bound[0]
    if not ctx.matches(call.func, "functools.partial") or not call.args or call.args[0].keyword is not None or call.args[0].star:
        return None
    return call


def is_dataloader(ctx: FileContext, call: cst.Call) -> bool:
    return loader_kind(ctx, call) is not None


def kwarg(ctx: FileContext, call: cst.Call, name: str) -> KwArg:
    """What reaches DataLoader argument `name`, by keyword, position or `**kwargs`; through the
    keywords of a `functools.partial`, and the defaults of a project subclass's `__init__`."""
    kind = loader_kind(ctx, call)
    tracer = ctx.config_values
    default = DEFAULTS.get(name, NO_DEFAULT)
    if kind is None:
        return _checked(ctx, name, tracer.kwarg(call, name, POSITIONS.get(name), default))
    if kind.subclass:
        default = NO_DEFAULT  # its own `__init__` decides
    position = kind.positions.get(name)
    if kind.partial is not None:
        bound = [a for a in kind.partial.args[1:] if a.keyword is None and not a.star]
        own = tracer.kwarg(call, name, position - len(bound) if position is not None and position >= len(bound) else None, default)
        if not own.missing:
            return own
        got = tracer.kwarg(kind.partial, name, position + 1 if position is not None and position < len(bound) else None, default)
        if not got.missing or not kind.subclass:
            return got
        return _subclass_default(ctx, kind, name)
    got = tracer.kwarg(call, name, position, default)
    if got.missing and kind.subclass:
        return _subclass_default(ctx, kind, name)
    return _checked(ctx, name, got)


#: What each DataLoader keyword must be (a config value of another type is a problem worth saying).
_TYPES = {"num_workers": (int,), "pin_memory": (bool, int), "persistent_workers": (bool, int), "prefetch_factor": (int, type(None))}


def _checked(ctx: FileContext, name: str, kw: KwArg) -> KwArg:
    """A value from a config file of the wrong type for its keyword: a diagnostic, and unknown."""
    value = kw.value
    if value is None or not value.config or name not in _TYPES:
        return kw
    wrong = [s for s in value.config if not isinstance(s.value, _TYPES[name]) or (name == "num_workers" and isinstance(s.value, bool))]
    if not wrong:
        return kw
    lookup = getattr(ctx.config_values, "configs", None)
    if lookup is not None:
        site = wrong[0]
        lookup.problems.append((site.path, f"line {site.line}: `{'.'.join(map(str, site.keys))}: {site.raw}` is read as the DataLoader's `{name}`, which needs {'a whole number' if name == 'num_workers' else 'true or false'}"))
    return KwArg("unknown", None, kw.node, kw.via)


def config_site(kw: KwArg) -> Any:
    """The one config-file place (`providers.configs.ConfigSite`) a keyword's value comes from
    (None: not from a config file, or from several places)."""
    value = kw.value
    if value is None or value.kind != "config" or not value.config:
        return None
    return one_site(value.config, value.options)


def one_site(sites: Sequence[Any], options: Sequence[Any]) -> Any:
    """The one place of `sites`, or, for one value written once in each of several files (the
    candidates of a required config option), the first with the others (`ConfigSite.others`);
    None for anything else."""
    places = {(s.path, s.line, s.col) for s in sites}
    if len(places) == 1:
        return sites[0]
    if len(options) != 1 or len({s.path for s in sites}) != len(places):
        return None
    seen, others = {(sites[0].path, sites[0].line, sites[0].col)}, []
    for s in sites[1:]:
        if (s.path, s.line, s.col) not in seen:
            seen.add((s.path, s.line, s.col))
            others.append(s)
    return dataclasses.replace(sites[0], others=tuple(others))


def code_site(kw: KwArg, call: cst.Call) -> cst.CSTNode:
    """Where the code reads a keyword's value: its argument, else the loader call."""
    return kw.node if isinstance(kw.node, cst.Arg) else call


def _subclass_default(ctx: FileContext, kind: LoaderKind, name: str) -> KwArg:
    """A keyword a subclass's construction leaves out: its `__init__` default, or what its
    `super().__init__(...)` call passes (unknown for a subclass defined in another module)."""
    init = kind.init
    if init is None:
        return KwArg("unknown") if kind.foreign else KwArg("missing")
    for param in [*init.params.posonly_params, *init.params.params, *init.params.kwonly_params]:
        if param.name.value == name:
            if param.default is None:
                return KwArg("unknown")
            value = ctx.config_values.resolve(param.default)
            if value is None:
                return KwArg("unknown", None, param)
            return KwArg("value", Value(value.options, value.origin, "default", value.certain), param)
    for call in ctx.torch.units[init].calls:
        func = call.func
        if isinstance(func, cst.Attribute) and func.attr.value == "__init__":
            inner = func.value
            if (isinstance(inner, cst.Call) and dotted(inner.func) == "super") or _family(ctx, inner) is not None:
                positions = LOADER_FAMILIES.get(kind.qualname, POSITIONS)
                return ctx.config_values.kwarg(call, name, position=positions.get(name))
    return KwArg("unknown")


class _Collect(cst.CSTVisitor):
    def __init__(self) -> None:
        super().__init__()
        self.assigns: List[cst.CSTNode] = []
        self.returns: List[cst.Return] = []
        self.names: Dict[str, List[cst.Name]] = {}
        self.comp_fors: List[cst.CompFor] = []

    def visit_CompFor(self, node: cst.CompFor) -> None:
        self.comp_fors.append(node)

    def visit_Assign(self, node: cst.Assign) -> None:
        self.assigns.append(node)

    def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
        if node.value is not None:
            self.assigns.append(node)

    def visit_Return(self, node: cst.Return) -> None:
        if node.value is not None:
            self.returns.append(node)

    def visit_Name(self, node: cst.Name) -> None:
        self.names.setdefault(node.value, []).append(node)


class LoaderFacts:
    """Which expressions are which DataLoader, and where each one is iterated."""

    def __init__(self, ctx: FileContext) -> None:
        self.ctx = ctx
        f = ctx.torch
        self.calls: List[cst.Call] = [c for c in f.calls if is_dataloader(ctx, c)]
        self.keys: Dict[Key, Set[cst.Call]] = {}
        self.returns: Dict[cst.FunctionDef, Set[cst.Call]] = {}
        #: names (and `self.x`) bound to a tuple, list or dict holding loaders: member -> loaders
        self.members: Dict[Key, Dict[Any, Set[cst.Call]]] = {}
        #: functions returning such a container (`return train_set, train_loader`)
        self.ret_members: Dict[cst.FunctionDef, Dict[Any, Set[cst.Call]]] = {}
        #: (function, parameter) -> the calls of this file passing it a loader, with that argument
        self.passes: Dict[Tuple[cst.FunctionDef, str], Dict[cst.Call, cst.Arg]] = {}
        #: class -> the classes of this file it inherits from (`_family`, on demand)
        self._above: Optional[Dict[cst.ClassDef, Set[cst.ClassDef]]] = None
        self._collect = _Collect()
        fast_visit(ctx.module, self._collect)
        if self.calls:
            self._propagate()
        self.loop_origins: Dict[cst.For, Set[cst.Call]] = {}
        self.comp_origins: Dict[cst.CompFor, Set[cst.Call]] = {}
        self.next_iter: List[Tuple[cst.Call, Set[cst.Call]]] = []  # next(iter(x)) sites
        self.next_reads: List[Tuple[cst.Call, Set[cst.Call]]] = []  # next(...) of an iterator over a loader
        if self.calls:
            self._find_uses()

    # -- names -------------------------------------------------------------------------------
    def name_key(self, name: cst.Name) -> Key:
        return LoaderFacts.name_key_of(self.ctx, name)

    @staticmethod
    def name_key_of(ctx: FileContext, name: cst.Name) -> Key:
        binds = ctx.values.index.binds
        for a in ctx.torch.ancestors(name):
            if isinstance(a, cst.FunctionDef) and (a, name.value) in binds:
                return ("name", a, name.value)
        return ("name", None, name.value)

    def _expr_key(self, expr: cst.BaseExpression) -> Optional[Key]:
        if isinstance(expr, cst.Name):
            return self.name_key(expr)
        if isinstance(expr, cst.Attribute) and dotted(expr.value) == "self":
            return ("self", self.ctx.torch.enclosing_class(expr), expr.attr.value)
        return None

    def origins(self, expr: Optional[cst.BaseExpression]) -> Set[cst.Call]:
        """The DataLoader calls an expression may evaluate to (empty: not a known loader)."""
        if expr is None:
            return set()
        if isinstance(expr, cst.Call):
            if is_dataloader(self.ctx, expr):
                return {expr}
            found: Set[cst.Call] = set()
            inner = self.unwrap(expr)  # `pbar = tqdm(loader)`, `batches = prefetch(loader)`
            if inner != [expr]:
                for e in inner:
                    found |= self.origins(e)
                return found
            for fn in self.ctx.torch.resolve_call(expr):
                found |= self.returns.get(fn, set())
            return found
        if isinstance(expr, cst.Subscript):  # loaders["train"], returned[1]
            members = self.members_of(expr.value)
            if not members:
                return set()
            index = _literal_index(expr)
            if index is not None:
                return set(members.get(index, ()))
            return {c for calls in members.values() for c in calls}
        found = set()
        for key in self._keys_of(expr):
            found |= self.keys.get(key, set())
        return found

    def _keys_of(self, expr: cst.BaseExpression) -> List[Key]:
        """The keys an expression reads: its own; for `self.x`, also `self.x` of the classes of
        this file it inherits from or that inherit from it (`set_loaders()` of a base class)."""
        key = self._expr_key(expr)
        if key is None:
            return []
        if key[0] != "self" or key[1] is None:
            return [key]
        return [key, *(("self", c, key[2]) for c in self._family(key[1]))]

    def _family(self, cls: cst.ClassDef) -> Set[cst.ClassDef]:
        """The classes of this file that `cls` inherits from, or that inherit from it."""
        if self._above is None:
            defs = self.ctx.torch.class_defs
            self._above = {}
            for c in (c for cs in defs.values() for c in cs):
                seen: Set[cst.ClassDef] = set()
                todo = [c]
                while todo:
                    for base in todo.pop().bases:
                        for b in defs.get(dotted(base.value) or "", ()):
                            if b not in seen and b is not c:
                                seen.add(b)
                                todo.append(b)
                self._above[c] = seen
        above = self._above.get(cls, set())
        return above | {c for c, ups in self._above.items() if cls in ups}

    def members_of(self, expr: Optional[cst.BaseExpression]) -> Dict[Any, Set[cst.Call]]:
        """Member -> loaders of a tuple, list or dict that holds loaders (empty: none)."""
        out: Dict[Any, Set[cst.Call]] = {}
        el: Union[cst.BaseElement, cst.BaseDictElement]
        if isinstance(expr, (cst.Tuple, cst.List)):
            for i, el in enumerate(expr.elements):
                if isinstance(el, cst.StarredElement):
                    break
                calls = self.origins(el.value)
                if calls:
                    out[i] = calls
        elif isinstance(expr, cst.Dict):
            for el in expr.elements:
                if isinstance(el, cst.DictElement):
                    key = _literal(el.key)
                    calls = self.origins(el.value)
                    if key is not None and calls:
                        out[key] = calls
        elif isinstance(expr, cst.Call):
            for fn in self.ctx.torch.resolve_call(expr):
                for k, calls in self.ret_members.get(fn, {}).items():
                    out.setdefault(k, set()).update(calls)
        elif expr is not None:
            for key in self._keys_of(expr):
                for k, calls in self.members.get(key, {}).items():
                    out.setdefault(k, set()).update(calls)
        return out

    def _add_members(self, into: Dict[Any, Set[cst.Call]], members: Dict[Any, Set[cst.Call]]) -> bool:
        changed = False
        for k, calls in members.items():
            have = into.setdefault(k, set())
            if not calls <= have:
                have |= calls
                changed = True
        return changed

    def _add(self, key: Optional[Key], calls: Set[cst.Call]) -> bool:
        if key is None or not calls:
            return False
        have = self.keys.setdefault(key, set())
        if calls <= have:
            return False
        have |= calls
        return True

    def _propagate(self) -> None:
        f = self.ctx.torch
        for _ in range(6):
            changed = False
            for node in self._collect.assigns:
                value = node.value  # type: ignore[attr-defined]
                targets = [t.target for t in node.targets] if isinstance(node, cst.Assign) else [node.target]  # type: ignore[attr-defined]
                members = self.members_of(value)
                if members:
                    for t in targets:
                        if isinstance(t, (cst.Tuple, cst.List)):  # `train_set, train_loader = get_data()`
                            for i, el in enumerate(t.elements):
                                if isinstance(el, cst.StarredElement):
                                    break
                                changed |= self._add(self._expr_key(el.value), members.get(i, set()))
                        else:
                            key = self._expr_key(t)
                            if key is not None:
                                changed |= self._add_members(self.members.setdefault(key, {}), members)
                calls = self.origins(value)
                if not calls:
                    continue
                for t in targets:
                    changed |= self._add(self._expr_key(t), calls)
            for ret in self._collect.returns:
                fn = f.enclosing_function(ret)
                if fn is None:
                    continue
                members = self.members_of(ret.value)
                if members:
                    changed |= self._add_members(self.ret_members.setdefault(fn, {}), members)
                calls = self.origins(ret.value)
                if calls and not calls <= self.returns.get(fn, set()):
                    self.returns.setdefault(fn, set()).update(calls)
                    changed = True
            for loop in f.loops:  # `for loader in (train_loader, val_loader):`, `for name, loader in loaders.items()`
                if isinstance(loop, cst.For):
                    changed |= self._bind_loop_target(loop.target, loop.iter)
            for call in f.calls:
                # an argument that is a loader, or a tuple/list/dict holding loaders (`[train_loader,
                # eval_loader]`, unpacked in the callee): the parameter gets them
                loaders = [(a, self.origins(a.value), self.members_of(a.value)) for a in call.args if not a.star]
                loaders = [x for x in loaders if x[1] or x[2]]
                if not loaders:
                    continue
                for fn in f.resolve_call(call) or self._instance_methods(call):
                    params = list(fn.params.posonly_params) + list(fn.params.params)
                    offset = 0
                    if f.function_class.get(fn) is not None and not any(
                        dotted(d.decorator) == "staticmethod" for d in fn.decorators
                    ):
                        bound_by_class = isinstance(call.func, cst.Attribute) and dotted(call.func.value) in f.class_defs
                        offset = 0 if bound_by_class else 1
                    by_name = {p.name.value: p for p in params + list(fn.params.kwonly_params)}
                    positional = [a for a in call.args if a.keyword is None and not a.star]
                    for arg, calls, members in loaders:
                        if arg.keyword is not None:
                            param = by_name.get(arg.keyword.value)
                        else:
                            idx = positional.index(arg) + offset
                            param = params[idx] if idx < len(params) else None
                        if param is None:
                            continue
                        if members:
                            changed |= self._add_members(self.members.setdefault(("name", fn, param.name.value), {}), members)
                        if calls:
                            changed |= self._add(("name", fn, param.name.value), calls)
                            self.passes.setdefault((fn, param.name.value), {})[call] = arg
            if not changed:
                break

    def _instance_methods(self, call: cst.Call) -> List[cst.FunctionDef]:
        """`trainer.set_loaders(train, val)` where `trainer` is only ever bound to an instance of a
        class of this file (`trainer = Trainer(model)`): the method it runs."""
        func = call.func
        if not (isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name)):
            return []
        key = self.name_key(func.value)
        bound = self.ctx.values.index.binds.get((key[1], key[2]), [])
        f = self.ctx.torch
        if not bound or not all(isinstance(b, cst.Call) and isinstance(b.func, cst.Name) and len(f.class_defs.get(b.func.value, ())) == 1 for b in bound):
            return []
        found: List[cst.FunctionDef] = []
        for b in bound:
            for fn in f._methods_in_hierarchy(f.class_defs[b.func.value][0], func.attr.value):
                if fn not in found:
                    found.append(fn)
        return found

    def _bind_loop_target(self, target: cst.BaseExpression, it: cst.BaseExpression) -> bool:
        """A loop whose variable takes each loader of a container in turn."""
        if isinstance(it, cst.Call) and isinstance(it.func, cst.Attribute) and it.func.attr.value in ("values", "items") and not it.args:
            calls = {c for cs in self.members_of(it.func.value).values() for c in cs}
            if it.func.attr.value == "items":
                if not (isinstance(target, (cst.Tuple, cst.List)) and len(target.elements) == 2):
                    return False
                target = target.elements[1].value
        else:
            members = self.members_of(it)
            calls = {c for cs in members.values() for c in cs}
        return self._add(self._expr_key(target), calls) if calls else False

    # -- uses --------------------------------------------------------------------------------
    def unwrap(self, expr: cst.BaseExpression) -> List[cst.BaseExpression]:
        """`enumerate(tqdm(loader))` -> [loader]; `zip(a, b)` -> [a, b]; a project generator
        that yields what it iterates (`metric_logger.log_every(loader, 10)`) -> [loader]."""
        if isinstance(expr, cst.NamedExpr):  # `for b in (pbar := tqdm(loader))`
            return self.unwrap(expr.value)
        if isinstance(expr, cst.Call):
            name = dotted(expr.func) or ""
            tail = name.rsplit(".", 1)[-1]
            wrapped = self._wrapper_argument(expr, name)
            if wrapped is not None:
                return self.unwrap(wrapped)
            if tail in _ITER_WRAPPERS:
                positional = [a.value for a in expr.args if a.keyword is None and not a.star]
                if tail == "zip" or tail == "chain":
                    return [x for p in positional for x in self.unwrap(p)]
                if positional:
                    return self.unwrap(positional[0])
        return [expr]

    def _wrapper_argument(self, call: cst.Call, name: str) -> Optional[cst.BaseExpression]:
        """The argument a generator of the project yields the items of (the program says which)."""
        seeds = self.ctx.seeds
        wrappers = seeds.project.get("iter_wrappers") if seeds is not None else None
        if not wrappers or not name:
            return None
        line = self.ctx.position(call).start.line
        for at, label, index in wrappers:
            if at == line and label == name:
                positional = [a.value for a in call.args if a.keyword is None and not a.star]
                return positional[index] if index < len(positional) else None
        return None

    def _find_uses(self) -> None:
        for loop in self.ctx.torch.loops:
            if isinstance(loop, cst.For):
                calls: Set[cst.Call] = set()
                for e in self.unwrap(loop.iter):
                    calls |= self.origins(e)
                if calls:
                    self.loop_origins[loop] = calls
        for comp in self._collect.comp_fors:
            calls = set()
            for e in self.unwrap(comp.iter):
                calls |= self.origins(e)
            if calls:
                self.comp_origins[comp] = calls
        for call in self.ctx.torch.calls:
            if _is_next_iter(call):
                inner = call.args[0].value
                assert isinstance(inner, cst.Call)
                calls = self.origins(inner.args[0].value)
                if calls:
                    self.next_iter.append((call, calls))
                    self.next_reads.append((call, calls))
            elif isinstance(call.func, cst.Name) and call.func.value == "next" and call.args and isinstance(call.args[0].value, cst.Name):
                # `it = iter(loader)` ... `batch = next(it)` (in a `while` loop)
                key = self.name_key(call.args[0].value)
                bound = self.ctx.values.index.binds.get((key[1], key[2]), [])
                if len(bound) == 1 and isinstance(bound[0], cst.Call) and dotted(bound[0].func) == "iter" and bound[0].args:
                    calls = set()
                    for e in self.unwrap(bound[0].args[0].value):
                        calls |= self.origins(e)
                    if calls:
                        self.next_reads.append((call, calls))

    def iteration_loops(self, call: cst.Call) -> List[cst.For]:
        return [loop for loop, calls in self.loop_origins.items() if call in calls]

    def iteration_sites(self, call: cst.Call) -> List[cst.CSTNode]:
        """`for` loops and comprehensions over the loader."""
        comps = [c for c, calls in self.comp_origins.items() if call in calls]
        return [*self.iteration_loops(call), *comps]

    def reaches_per_epoch(self, site: cst.CSTNode, call: cst.Call) -> bool:
        """Whether the loader built by `call` gets to `site` (a loop or comprehension over it, in a
        function run once per epoch) once per epoch too. A helper run once per epoch with one
        loader may be run once, from elsewhere, with another: followed back from the iterated
        expression, a loader built in the function itself is built again on every call (SPD104's
        business), and one that comes in as a parameter gets there once per epoch only when a call
        passing it does (in an epoch loop, or in a function run once per epoch that gets it that
        way). Anything not followed (a `self` attribute, a global, a helper's return value, a
        tuple unpacked) keeps what the function's hotness says."""
        it = getattr(site, "iter", None)  # a `for` loop or a comprehension's `for`
        return it is None or self._carried_per_epoch(it, call, 0, set())

    def _carried_per_epoch(self, expr: cst.BaseExpression, call: cst.Call, depth: int, seen: Set[Key]) -> bool:
        if depth > 12:
            return True
        for e in self.unwrap(expr):
            if call not in self.origins(e):
                continue
            if e is call:
                continue  # built right here, on every run
            if not isinstance(e, cst.Name):
                return True  # `self.loader`, `loaders["train"]`, a helper's return value
            key = self.name_key(e)
            if key[1] is None:
                return True  # a module global
            for bound in self.ctx.values.index.binds.get((key[1], e.value), []):
                if isinstance(bound, tuple) and bound and bound[0] == "param":
                    if self._passed_per_epoch(key, call, depth, seen):
                        return True
                elif not isinstance(bound, cst.BaseExpression):
                    return True  # unpacked from a tuple, a loop variable: not followed
                elif self._carried_per_epoch(bound, call, depth + 1, seen):
                    return True
        return False

    def _passed_per_epoch(self, key: Key, call: cst.Call, depth: int, seen: Set[Key]) -> bool:
        """A call of this file passes the loader to parameter `key` once per epoch."""
        if key in seen:
            return False  # a cycle: the other call sites decide
        seen.add(key)
        f = self.ctx.torch
        for site, arg in self.passes.get((key[1], key[2]), {}).items():
            if call not in self.origins(arg.value):
                continue
            unit = f.epoch_of(site)
            if unit is None:
                continue
            if not isinstance(unit, cst.FunctionDef):
                if any(a is unit for a in f.ancestors(call)):
                    continue  # built again in that epoch loop
                return True
            if self._carried_per_epoch(arg.value, call, depth + 1, seen):
                return True
        return False

    def next_iter_sites(self, call: cst.Call) -> List[cst.Call]:
        return [site for site, calls in self.next_iter if call in calls]

    def only_peeked(self, call: cst.Call) -> bool:
        """The loader is only read once with `next(iter(loader))` (no loop, no other use)."""
        if self.iteration_sites(call):
            return False
        sites = self.next_iter_sites(call)
        if not sites or any(self.ctx.torch.in_loop(s) is not None for s in sites):
            return False
        parent = self.ctx.torch.parent(call)
        if isinstance(parent, cst.Arg):  # next(iter(DataLoader(...)))
            return True
        # every other mention of the loader's names must be its assignment or a peek
        allowed: Set[cst.CSTNode] = set()
        for site in sites:
            inner = site.args[0].value
            assert isinstance(inner, cst.Call)
            allowed.add(inner.args[0].value)
        keys = [k for k, calls in self.keys.items() if call in calls]
        if any(k[0] != "name" for k in keys):
            return False
        for key in keys:
            for name in self._collect.names.get(key[2], ()):
                if name in allowed or self.name_key(name) != key:
                    continue
                if self._is_store(name):
                    continue
                return False
        return True

    def _is_store(self, name: cst.Name) -> bool:
        parent = self.ctx.torch.parent(name)
        if isinstance(parent, cst.AssignTarget) and parent.target is name:
            return True
        if isinstance(parent, cst.Param):
            return True
        return False

    def dataset_self_test(self, call: cst.Call) -> bool:
        """The loader is the self-test of a dataset module: built under its `if __name__ ==
        "__main__":` block, in a file that defines the dataset (`__getitem__`) and trains nothing."""
        guard = self.main_guard()
        if guard is None or self.top_statement(call) is not guard:
            return False
        f = self.ctx.torch
        if f.step_loops or not any(name in ("__getitem__", "__iter__") for _, name in f.methods):
            return False
        return not any(f.grad_disabled_at(loop) or f.eval_loop_of(loop) for loop in self.iteration_loops(call))

    # -- datasets ----------------------------------------------------------------------------
    def dataset_expr(self, call: cst.Call) -> Optional[cst.BaseExpression]:
        kw = kwarg(self.ctx, call, "dataset")
        node = kw.node
        if isinstance(node, cst.Arg) and kw.via is None:
            return node.value
        if isinstance(node, cst.DictElement):
            return node.value
        return None

    def in_memory(self, expr: Optional[cst.BaseExpression], depth: int = 0) -> bool:
        """The dataset is tensors/lists already in memory (`TensorDataset`, a list of tensors)."""
        if expr is None or depth > 8:
            return False
        ctx = self.ctx
        if isinstance(expr, (cst.List, cst.Tuple, cst.ListComp)):
            return True
        if isinstance(expr, cst.Call):
            if ctx.matches(expr.func, TENSOR_DATASET):
                return True
            name = dotted(expr.func) or ""
            if name in ("list", "zip", "range"):  # `DataLoader(range(n), bs)`: an index batcher
                return True
            if ctx.matches(expr.func, "torch.utils.data.Subset", "torch.utils.data.dataset.Subset") and expr.args:
                return self.in_memory(expr.args[0].value, depth + 1)
            return self._returns_in_memory(expr, depth)
        if isinstance(expr, cst.Subscript):  # random_split(TensorDataset(...))[0]
            return self.in_memory(expr.value, depth + 1)
        if isinstance(expr, cst.Name):
            key = self.name_key(expr)
            bound = self.ctx.values.index.binds.get((key[1], key[2]), [])
            values = [b for b in bound if isinstance(b, cst.BaseExpression)]
            if bound and len(values) == len(bound):
                return all(self.in_memory(v, depth + 1) for v in values)
            if len(bound) == 1 and isinstance(bound[0], tuple) and bound[0][0] == "param":
                return self._param_in_memory(bound[0][1], bound[0][2].name.value)
            # `train_ds, val_ds = random_split(TensorDataset(...), [n, m])`
            for node in self._collect.assigns:
                if not isinstance(node, cst.Assign) or not isinstance(node.value, cst.Call):
                    continue
                if not ctx.matches(node.value.func, "torch.utils.data.random_split", "torch.utils.data.dataset.random_split"):
                    continue
                for t in node.targets:
                    if isinstance(t.target, (cst.Tuple, cst.List)) and any(
                        isinstance(el.value, cst.Name) and el.value.value == expr.value for el in t.target.elements
                    ):
                        return bool(node.value.args) and self.in_memory(node.value.args[0].value, depth + 1)
            return False
        if isinstance(expr, cst.Attribute) and dotted(expr.value) == "self":
            writes = self.ctx.values.index.self_attrs.get((ctx.torch.enclosing_class(expr), expr.attr.value), [])
            values = [w for w in writes if isinstance(w, cst.BaseExpression)]
            return bool(writes) and len(values) == len(writes) and all(self.in_memory(v, depth + 1) for v in values)
        return False

    def _program_facts(self) -> Dict[str, Any]:
        seeds = self.ctx.seeds
        return seeds.project.get("in_memory", {}) if seeds is not None else {}

    def _param_in_memory(self, fn: cst.FunctionDef, name: str) -> bool:
        """Every call site in the project gives this parameter an in-memory dataset."""
        ordinal = self.ctx.torch._function_ordinal.get(fn, -1)
        return name in self._program_facts().get("params", {}).get(str(ordinal), ())

    def _returns_in_memory(self, call: cst.Call, depth: int) -> bool:
        """A helper (of this file, or another module as the program says) that returns one; a
        project dataset class whose `__getitem__` only indexes data in memory (the program says
        which: `loader_program._in_memory_classes`)."""
        facts = self._program_facts()
        lines = facts.get("calls")
        if lines and self.ctx.position(call).start.line in lines:
            return True
        classes = facts.get("classes")
        if classes and dotted(call.func) in classes:
            return True
        fns = self.ctx.torch.resolve_call(call)
        if not fns or depth > 4:
            return False
        returns = [r for fn in fns for r in self.ctx.values.index.returns.get(fn, [])]
        return bool(returns) and all(r is not None and self.in_memory(r, depth + 1) for r in returns)

    def iterable_dataset(self, expr: Optional[cst.BaseExpression]) -> bool:
        """The dataset is a same-file `IterableDataset` subclass (workers would duplicate its data)."""
        if not isinstance(expr, cst.Call) or not isinstance(expr.func, cst.Name):
            if isinstance(expr, cst.Name):
                key = self.name_key(expr)
                bound = self.ctx.values.index.binds.get((key[1], key[2]), [])
                return len(bound) == 1 and isinstance(bound[0], cst.BaseExpression) and self.iterable_dataset(bound[0])
            return False
        for cls in self.ctx.torch.class_defs.get(expr.func.value, ()):
            for base in cls.bases:
                q = self.ctx.qualname(base.value) or dotted(base.value) or ""
                if q.endswith("IterableDataset"):
                    return True
        return False

    # -- import-time execution -----------------------------------------------------------------
    def main_guard(self) -> Optional[cst.If]:
        for stmt in self.ctx.module.body:
            if isinstance(stmt, cst.If) and is_main_test(stmt.test):
                return stmt
        return None

    def top_statement(self, node: cst.CSTNode) -> Optional[cst.CSTNode]:
        body = self.ctx.module.body
        for a in [node, *self.ctx.torch.ancestors(node)]:
            if self.ctx.torch.parent(a) is self.ctx.module and a in body:
                return a
        return None

    def import_time_statements(self) -> List[cst.CSTNode]:
        """Top-level statements that run code when the module is imported (or run as a script)."""
        out: List[cst.CSTNode] = []
        for stmt in self.ctx.module.body:
            if isinstance(stmt, (cst.FunctionDef, cst.ClassDef)):
                continue
            if isinstance(stmt, cst.If) and is_main_test(stmt.test):
                continue
            out.append(stmt)
        return out

    def _functions_run_by(self, stmts: Iterable[cst.CSTNode]) -> Dict[cst.FunctionDef, cst.CSTNode]:
        """Same-file functions run (transitively) by each top-level statement."""
        f = self.ctx.torch
        stmt_set = list(stmts)
        result: Dict[cst.FunctionDef, cst.CSTNode] = {}
        for call in f.calls:
            if f.enclosing_function(call) is not None:
                continue
            top = self.top_statement(call)
            if top is None or top not in stmt_set:
                continue
            todo = list(f.resolve_call(call))
            while todo:
                fn = todo.pop()
                if fn in result:
                    continue
                result[fn] = top
                todo.extend(f.units[fn].callees)
        return result

    def import_time_triggers(self, call: cst.Call) -> List[cst.CSTNode]:
        """Top-level unguarded statements that iterate (or, unseen, build) this loader on import."""
        stmts = self.import_time_statements()
        run_by = self._functions_run_by(stmts)
        sites: List[cst.CSTNode] = [*self.iteration_sites(call), *self.next_iter_sites(call)]
        if not sites:
            sites = [call]
        found: List[cst.CSTNode] = []
        f = self.ctx.torch
        for site in sites:
            fn = f.enclosing_function(site)
            while fn is not None and f.enclosing_function(fn) is not None:
                fn = f.enclosing_function(fn)
            if fn is None:
                top = self.top_statement(site)
                if top is not None and top in stmts:
                    found.append(top)
            elif fn in run_by:
                found.append(run_by[fn])
        return found


def _literal_index(node: cst.Subscript) -> Any:
    if len(node.slice) != 1 or not isinstance(node.slice[0].slice, cst.Index):
        return None
    return _literal(node.slice[0].slice.value)


def _is_next_iter(call: cst.Call) -> bool:
    """`next(iter(x))`: exactly one argument each (any keyword or star form of it too, as the
    matcher `Call(func=Name("next"), args=[Arg(value=Call(func=Name("iter"), args=[Arg()]))])` did)."""
    func = call.func
    if not isinstance(func, cst.Name) or func.value != "next" or len(call.args) != 1:
        return False
    inner = call.args[0].value
    return (
        isinstance(inner, cst.Call)
        and isinstance(inner.func, cst.Name)
        and inner.func.value == "iter"
        and len(inner.args) == 1
    )


def is_main_test(test: cst.BaseExpression) -> bool:
    if not isinstance(test, cst.Comparison) or len(test.comparisons) != 1:
        return False
    comp = test.comparisons[0]
    if not isinstance(comp.operator, cst.Equal):
        return False
    sides = [test.left, comp.comparator]
    names = [s for s in sides if isinstance(s, cst.Name) and s.value == "__name__"]
    strings = [s for s in sides if isinstance(s, cst.SimpleString) and s.value.strip("\"'") == "__main__"]
    return len(names) == 1 and len(strings) == 1


def loader_facts(ctx: FileContext) -> LoaderFacts:
    return ctx.provider(LoaderFacts)


def workers_text(kw: KwArg) -> str:
    """How the rule message describes a num_workers value."""
    if kw.missing:
        return "`num_workers` is not set (default 0)"
    value = kw.value
    assert value is not None
    shown = "/".join(str(o) for o in value.options)
    if value.kind == "argparse":
        return f"`num_workers` comes from a command-line option that defaults to {shown}"
    if value.kind == "config-default":
        return f"`num_workers` falls back to {shown} when the config does not set it"
    if value.kind == "config-python":
        return f"`num_workers` is {shown} by the defaults of the project's config"
    if value.kind == "config" and value.config:
        site = value.config[0]
        return f"`num_workers` is {shown} in the config file (`{site.name}`)"
    if value.kind == "hparams-config" and value.knob is not None:  # a Lightning `self.hparams` value from a Hydra config
        knob = value.knob
        return f"`num_workers` is {shown} in {display_path(knob.path)}:{knob.line}, the config the class is built from (`self.hparams`)"
    if value.kind == "dict":
        return f"`num_workers` is {shown} in the keyword arguments"
    if value.kind == "default":
        return f"`num_workers` is {shown} (a function default)"
    return f"`num_workers` is {shown}"


def sync_loading(ctx: FileContext, call: cst.Call) -> Optional[KwArg]:
    """The num_workers of a DataLoader that SPD101 flags, or None when it must stay silent."""
    if not is_dataloader(ctx, call):
        return None
    kw = kwarg(ctx, call, "num_workers")
    if kw.unknown:
        return None
    if kw.status == "value":
        value = kw.value
        if value is None or not value.all(lambda v: isinstance(v, int) and 0 <= v <= 1):
            return None
    facts = loader_facts(ctx)
    dataset = facts.dataset_expr(call)
    if facts.in_memory(dataset) or facts.iterable_dataset(dataset):
        return None
    if facts.only_peeked(call) or facts.dataset_self_test(call):
        return None
    return kw


# -- batches moved to the GPU ---------------------------------------------------------------------



def root_name(expr: cst.BaseExpression) -> Optional[str]:
    """`batch[0].float()` -> "batch"; the variable an expression is derived from."""
    node: cst.CSTNode = expr
    for _ in range(20):
        if isinstance(node, cst.Name):
            return node.value
        if isinstance(node, cst.Attribute):
            node = node.value
        elif isinstance(node, cst.Subscript):
            node = node.value
        elif isinstance(node, cst.Call):
            node = node.func
        else:
            return None
    return None


def target_names(target: cst.BaseExpression) -> List[str]:
    if isinstance(target, cst.Name):
        return [target.value]
    if isinstance(target, (cst.Tuple, cst.List)):
        return [n for el in target.elements for n in target_names(el.value)]
    if isinstance(target, cst.StarredElement):
        return target_names(target.value)
    return []


def batch_names(loop: cst.For) -> List[str]:
    """The loop variables that hold the batch (not the index of `enumerate`)."""
    target = loop.iter
    if isinstance(target, cst.Call) and (dotted(target.func) or "").endswith("enumerate"):
        if isinstance(loop.target, (cst.Tuple, cst.List)) and len(loop.target.elements) == 2:
            return target_names(loop.target.elements[1].value)
    return target_names(loop.target)


def may_be_cuda(ctx: FileContext, call: cst.Call) -> bool:
    """`x.cuda()` or `x.to(<device that is or may be CUDA>)`."""
    func = call.func
    if not isinstance(func, cst.Attribute):
        return False
    if func.attr.value == "cuda":
        return True
    if func.attr.value == "type":  # `x.type(torch.cuda.FloatTensor)`, `x.type("torch.cuda.HalfTensor")`
        return any("cuda" in (ctx.qualname(a.value) or ctx.code(a.value)) or may_be_cuda_type(ctx, a.value) for a in call.args if not a.star)
    if func.attr.value != "to":
        return False
    device: Optional[cst.BaseExpression] = None
    for arg in call.args:
        if arg.keyword is not None and arg.keyword.value == "device":
            device = arg.value
    positional = [a.value for a in call.args if a.keyword is None and not a.star]
    if device is None and positional:
        device = positional[0]
    if device is None:
        return False
    return device_may_be_cuda(ctx, device)


def device_may_be_cuda(ctx: FileContext, device: cst.BaseExpression, depth: int = 0) -> bool:
    if depth > 4:
        return True
    q = ctx.qualname(device) or ""
    if q.startswith("torch.") and q.rsplit(".", 1)[-1] in DTYPES:
        return False
    if isinstance(device, cst.Call) and ctx.matches(device.func, "torch.device") and device.args:
        return device_may_be_cuda(ctx, device.args[0].value, depth + 1)
    if isinstance(device, cst.Call):
        func = device.func
        if isinstance(func, cst.Attribute) and func.attr.value == "is_available":
            return False
    value = ctx.values.resolve(device)
    if value is not None and value.all(lambda v: isinstance(v, (str, int))):
        return value.any(lambda v: isinstance(v, int) or "cuda" in v or v.startswith("gpu"))
    if isinstance(device, cst.Name):  # device = torch.device(...) in this scope
        key = loader_facts(ctx).name_key(device)
        bound = ctx.values.index.binds.get((key[1], key[2]), [])
        exprs = [b for b in bound if isinstance(b, cst.BaseExpression)]
        if bound and len(exprs) == len(bound):
            return any(device_may_be_cuda(ctx, e, depth + 1) for e in exprs)
    return True


class _Taint(cst.CSTVisitor):
    """Follows the batch through a loop body: finds its copy to the GPU and helper calls it feeds."""

    def __init__(self, ctx: FileContext, names: Iterable[str]) -> None:
        super().__init__()
        self.ctx = ctx
        self.names: Set[str] = set(names)
        self.found: Optional[cst.Call] = None
        self.handoffs: List[Tuple[cst.Call, cst.Arg]] = []

    def _tainted(self, expr: cst.BaseExpression) -> bool:
        return root_name(expr) in self.names

    def visit_Assign(self, node: cst.Assign) -> None:
        if self._tainted(node.value) or (
            isinstance(node.value, cst.Tuple) and any(self._tainted(el.value) for el in node.value.elements)
        ):
            for t in node.targets:
                self.names.update(target_names(t.target))

    def visit_CompFor(self, node: cst.CompFor) -> None:
        if self._tainted(node.iter):
            self.names.update(target_names(node.target))

    def _comprehension(self, node: cst.BaseComp) -> None:
        # the element is visited before `for ... in`: taint the targets first
        comp: Optional[cst.CompFor] = node.for_in
        while comp is not None:
            self.visit_CompFor(comp)
            comp = comp.inner_for_in

    def visit_ListComp(self, node: cst.ListComp) -> None:
        self._comprehension(node)

    def visit_SetComp(self, node: cst.SetComp) -> None:
        self._comprehension(node)

    def visit_GeneratorExp(self, node: cst.GeneratorExp) -> None:
        self._comprehension(node)

    def visit_DictComp(self, node: cst.DictComp) -> None:
        self._comprehension(node)

    def visit_Call(self, node: cst.Call) -> None:
        if self.found is not None:
            return
        func = node.func
        if isinstance(func, cst.Attribute) and self._tainted(func.value) and may_be_cuda(self.ctx, node):
            self.found = node
            return
        for arg in node.args:
            if not arg.star and self._tainted(arg.value):
                self.handoffs.append((node, arg))

    def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
        return False


def batches_to_cuda(ctx: FileContext, call: cst.Call) -> Optional[cst.Call]:
    """The `.cuda()`/`.to(device)` that moves a batch of this loader to the GPU, if any."""
    loop: Optional[Union[cst.For, cst.While]]
    facts = loader_facts(ctx)
    for loop in facts.iteration_loops(call):
        found = _follow(ctx, loop.body, batch_names(loop), 0)
        if found is not None:
            return found
    for site, calls in facts.next_reads:  # `batch = next(it)` in a loop: the batch is followed there
        loop = ctx.torch.in_loop(site)
        parent = ctx.torch.parent(site)
        if call not in calls or loop is None or not isinstance(parent, cst.Assign):
            continue
        names = [n for t in parent.targets for n in target_names(t.target)]
        found = _follow(ctx, loop.body, names, 0)
        if found is not None:
            return found
    return None


def _follow(ctx: FileContext, body: cst.CSTNode, names: Iterable[str], depth: int) -> Optional[cst.Call]:
    taint = _Taint(ctx, names)
    fast_visit(body, taint)
    if taint.found is not None or depth >= 2:
        return taint.found
    f = ctx.torch
    for site, arg in taint.handoffs:
        for fn in [*f.resolve_call(site), *_forward_of(ctx, site)]:
            params = list(fn.params.posonly_params) + list(fn.params.params)
            if arg.keyword is not None:
                names2 = [arg.keyword.value]
            else:
                positional = [a for a in site.args if a.keyword is None and not a.star]
                idx = positional.index(arg)
                if f.function_class.get(fn) is not None and params and params[0].name.value in ("self", "cls"):
                    idx += 1
                if idx >= len(params):
                    continue
                names2 = [params[idx].name.value]
            found = _follow(ctx, fn.body, names2, depth + 1)
            if found is not None:
                return found
    return None


def _forward_of(ctx: FileContext, site: cst.Call) -> List[cst.FunctionDef]:
    """`model(x)` where `model` (or `self.model`) is bound to an instance of a class of this
    file: its `forward` (or `__call__`), found along the bases."""
    func = site.func
    values: List[Any] = []
    if isinstance(func, cst.Name):
        key = LoaderFacts.name_key_of(ctx, func)
        values = ctx.values.index.binds.get((key[1], key[2]), [])
    elif isinstance(func, cst.Attribute) and dotted(func.value) == "self":
        values = ctx.values.index.self_attrs.get((ctx.torch.enclosing_class(site), func.attr.value), [])
    found: List[cst.FunctionDef] = []
    for value in values:
        # `Net(...)` or `Net(...).to(device)` / `.cuda()`
        while isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute) and value.func.attr.value in ("to", "cuda", "train", "eval"):
            value = value.func.value
        if not isinstance(value, cst.Call) or not isinstance(value.func, cst.Name):
            continue
        for cls in ctx.torch.class_defs.get(value.func.value, ()):
            for method in ("forward", "__call__"):
                fns = ctx.torch._methods_in_hierarchy(cls, method)
                if fns:
                    found += fns
                    break
    return found
