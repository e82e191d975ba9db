"""Shared facts for the SPD2xx rules: where a name was bound, which loader a batch comes from,
what `.to(...)` is asked to do, and whether an expression is (as far as one file shows) a tensor.

Not a rule module (no `Rule` subclass): the registry imports it and finds nothing to register.
Everything here is computed from the providers on `ctx` and cached per file.
"""

from __future__ import annotations

import ast
import re
import weakref
from dataclasses import dataclass
from typing import Callable, Dict, Iterator, List, Optional, Set, Tuple, Union, cast

import libcst as cst

from speedlint.analyzer.context import FileContext
from speedlint.analyzer.providers.loaders import is_dataloader, loader_facts
from speedlint.analyzer.providers.names import dotted
from speedlint.analyzer.providers.walk import visit as fast_visit
from speedlint.analyzer.vocabulary import (
    ACCELERATOR_MODULES,
    DATA_CLASSES,
    DTYPES,
    FACTORIES,
    FROM_HOST_FUNCS,
    GRAPH_FIELDS,
    HOST_ATTR_PREFIXES,
    HOST_ATTRS,
    MODEL_NAME,
    NON_TENSOR_METHODS,
    NOT_TENSOR_FUNCS,
    PARAM_ITERS,
    RANDOM_FACTORIES,
    TENSOR_ATTRS,
    TENSOR_FUNCS,
)

Scope = Optional[cst.CSTNode]  # FunctionDef, Lambda, a comprehension, or None (module)
COMPREHENSIONS = (cst.ListComp, cst.SetComp, cst.DictComp, cst.GeneratorExp)


#: Annotations that say a parameter holds a Python value (`seq_len: int`, `train: bool`).
_HOST_ANNOTATIONS = frozenset({"int", "float", "bool", "str", "bytes", "complex"})


def _container_parameter(fn: cst.FunctionDef, param: cst.Param) -> bool:
    """`*args` (a tuple) or `**kwargs` (a dict): their truth is their length."""
    return param is fn.params.star_arg or param is fn.params.star_kwarg


def _host_annotation(param: cst.Param) -> bool:
    """A parameter annotated as a Python scalar (`int`, `Optional[bool]`, `int | None`)."""
    annotation = param.annotation.annotation if param.annotation is not None else None
    while isinstance(annotation, cst.Subscript) and dotted(annotation.value) in ("Optional", "typing.Optional") and len(annotation.slice) == 1:
        inner = annotation.slice[0].slice
        annotation = inner.value if isinstance(inner, cst.Index) else None
    if isinstance(annotation, cst.BinaryOperation) and isinstance(annotation.operator, cst.BitOr):
        if isinstance(annotation.right, cst.Name) and annotation.right.value == "None":
            annotation = annotation.left
    return isinstance(annotation, cst.Name) and annotation.value in _HOST_ANNOTATIONS


# ---------------------------------------------------------------------------------------------
# bindings
# ---------------------------------------------------------------------------------------------
@dataclass(frozen=True, eq=False)
class Binding:
    """One place where a name gets a value.

    kind: assign | augassign | for | comp | param | with | other
    `value` is the assigned expression (assign/augassign/namedexpr), the iterable (for/comp), or
    None; `site` is the statement/clause that binds; `param` the Param for parameters; `path` the
    position inside a tuple target (`x, (y, z) = ...` gives y the path (1, 0)).
    """

    kind: str
    site: cst.CSTNode
    value: Optional[cst.BaseExpression] = None
    path: Tuple[int, ...] = ()
    param: Optional[cst.Param] = None
    function: Optional[cst.FunctionDef] = None


class _BindingIndex(cst.CSTVisitor):
    def __init__(self, ctx: FileContext) -> None:
        super().__init__()
        self.facts = ctx.torch
        self.binds: Dict[Tuple[Scope, str], List[Binding]] = {}
        self.backward_names: Set[Tuple[Scope, str]] = set()  # `loss.backward()` was called

    def scope_of(self, node: cst.CSTNode) -> Scope:
        for a in self.facts.ancestors(node):
            if isinstance(a, (cst.FunctionDef, cst.Lambda)):
                return a
        return None

    def _add(
        self, target: cst.BaseExpression, make: Callable[[Tuple[int, ...]], Binding], scope: Scope, path: Tuple[int, ...] = ()
    ) -> None:
        if isinstance(target, cst.Name):
            self.binds.setdefault((scope, target.value), []).append(make(path))
        elif isinstance(target, (cst.Tuple, cst.List)):
            for i, el in enumerate(target.elements):
                value = el.value
                if isinstance(el, cst.StarredElement):
                    # `*rest`: bound, to something we do not follow
                    self._add(value, lambda p: Binding("other", make(p).site), scope, path + (i,))
                    continue
                self._add(value, make, scope, path + (i,))

    def visit_Assign(self, node: cst.Assign) -> None:
        scope = self.scope_of(node)
        for t in node.targets:
            self._add(t.target, lambda p: Binding("assign", node, node.value, p), scope)

    def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
        if node.value is not None:
            self._add(node.target, lambda p: Binding("assign", node, node.value, p), self.scope_of(node))

    def visit_AugAssign(self, node: cst.AugAssign) -> None:
        self._add(node.target, lambda p: Binding("augassign", node, node.value, p), self.scope_of(node))

    def visit_NamedExpr(self, node: cst.NamedExpr) -> None:
        self._add(node.target, lambda p: Binding("assign", node, node.value, p), self.scope_of(node))

    def visit_For(self, node: cst.For) -> None:
        self._add(node.target, lambda p: Binding("for", node, node.iter, p), self.scope_of(node))

    def visit_CompFor(self, node: cst.CompFor) -> None:
        comp = next((a for a in self.facts.ancestors(node) if isinstance(a, COMPREHENSIONS)), None)
        self._add(node.target, lambda p: Binding("comp", node, node.iter, p), comp)

    def visit_WithItem(self, node: cst.WithItem) -> None:
        if node.asname is not None:
            self._add(node.asname.name, lambda p: Binding("with", node, node.item, p), self.scope_of(node))

    def visit_Param(self, node: cst.Param) -> None:
        scope = self.scope_of(node)
        if isinstance(scope, cst.Lambda):
            self.binds.setdefault((scope, node.name.value), []).append(Binding("other", node))
            return
        fn = self.facts.enclosing_function(node)
        if fn is not None:
            self.binds.setdefault((fn, node.name.value), []).append(Binding("param", node, None, (), node, fn))

    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        if isinstance(func, cst.Attribute) and func.attr.value == "backward" and isinstance(func.value, cst.Name):
            self.backward_names.add((self.scope_of(node), func.value.value))


def _param_key(fn: cst.FunctionDef, param: cst.Param) -> str:
    """A parameter as the program names it: "x", "*args", "**kwargs"."""
    if param is fn.params.star_kwarg:
        return "**" + param.name.value
    if param is fn.params.star_arg:
        return "*" + param.name.value
    return param.name.value


_CACHE: "weakref.WeakKeyDictionary[FileContext, Flow]" = weakref.WeakKeyDictionary()


def flow(ctx: FileContext) -> "Flow":
    """The per-file `Flow` (computed once, shared by the SPD2xx rules of one traversal).

    Kept by the context (`FileContext.provider`): a `Flow` refers to its context, so a
    `WeakKeyDictionary` entry (`_CACHE`, no longer filled) would never die and would keep every
    analysed tree alive."""
    return ctx.provider(Flow)


# ---------------------------------------------------------------------------------------------
# what `.to(...)` / `.cuda(...)` is asked to do
# ---------------------------------------------------------------------------------------------
DEVICE = "device"  # clearly a device (literal, torch.device(...), x.device, traced string)
MAYBE_DEVICE = "maybe-device"  # a variable named like a device whose value is unknown
CPU = "cpu"
DTYPE = "dtype"
UNKNOWN = "unknown"

_DEVICE_PREFIXES = ("cuda", "mps", "xpu", "xla", "hpu", "npu", "mtia", "privateuseone", "meta", "ipu", "lazy")
_DEVICE_NAME = re.compile(r"(^|_)(device|dev|devices|gpu|cuda|accelerator|rank|local_rank|gpu_id|device_id)(_|$)|device$", re.I)
_DTYPE_NAME = re.compile(r"dtype|(^|_)(precision|type)$", re.I)


@dataclass(frozen=True)
class Move:
    """A parsed `.to(...)`/`.cuda(...)` call."""

    call: cst.Call
    method: str  # "to" | "cuda"
    target: Optional[cst.BaseExpression]  # the device expression (None for `.cuda()`)
    kind: str  # DEVICE | MAYBE_DEVICE | CPU | DTYPE | UNKNOWN
    dtype: Optional[cst.BaseExpression] = None
    non_blocking: Optional[cst.Arg] = None
    extra: Tuple[str, ...] = ()  # other keywords given (copy, memory_format ...)

    @property
    def moves_to_device(self) -> bool:
        return self.kind in (DEVICE, MAYBE_DEVICE)


def _string_value(node: cst.BaseExpression) -> Optional[str]:
    if isinstance(node, (cst.SimpleString, cst.ConcatenatedString)):
        try:
            value = ast.literal_eval(cst.Module(body=()).code_for_node(node))
        except Exception:
            return None
        return value if isinstance(value, str) else None
    return None


def _device_string_kind(text: str) -> str:
    low = text.strip().lower()
    if low.startswith("cpu"):
        return CPU
    if low.startswith(_DEVICE_PREFIXES):
        return DEVICE
    return UNKNOWN


# ---------------------------------------------------------------------------------------------
# tensors (their vocabulary: `analyzer.vocabulary`)
# ---------------------------------------------------------------------------------------------


class Flow:
    def __init__(self, ctx: FileContext) -> None:
        self.ctx = ctx
        self.facts = ctx.torch
        self.index = _BindingIndex(ctx)
        fast_visit(ctx.module, self.index)  # LibCST's visit rebuilds the tree: several times slower
        self._tensor_memo: Dict[cst.CSTNode, bool] = {}
        self._buffer_memo: Dict[cst.ClassDef, Set[str]] = {}
        seeds = ctx.seeds
        self._project_models: Set[str] = set(seeds.project.get("models", ())) if seeds is not None else set()
        self._callers: Dict[cst.FunctionDef, List[cst.Call]] = {}
        self._submodule_callers: Dict[cst.FunctionDef, List[cst.Call]] = {}
        self._builds_loaders: Optional[bool] = None

    # -- bindings ----------------------------------------------------------------------------
    def _scopes(self, node: cst.CSTNode, name: str) -> Iterator[Scope]:
        for a in self.facts.ancestors(node):
            if isinstance(a, COMPREHENSIONS):
                yield a
            elif isinstance(a, (cst.FunctionDef, cst.Lambda)):
                yield a
        yield None

    def bindings(self, name: cst.Name) -> List[Binding]:
        """Every binding of `name` in the scope that binds it where it is used."""
        for scope in self._scopes(name, name.value):
            found = self.index.binds.get((scope, name.value))
            if found:
                return found
        return []

    def _contains(self, outer: cst.CSTNode, node: cst.CSTNode) -> bool:
        """`node` lies strictly inside `outer`."""
        return node is not outer and self.facts.contains(outer, node)

    def binding(self, name: cst.Name) -> Optional[Binding]:
        """The binding that reaches this use: the nearest one before it in source order.

        Loop-carried uses (no binding before them) take the last binding of the scope.
        """
        found = self.bindings(name)
        if not found:
            return None
        order = self.facts.order
        use = order.get(name, -1)
        before: List[Binding] = []
        for b in found:
            site = b.site
            if b.kind in ("for", "comp"):
                # the target is bound for the loop body, not for the iterable expression
                owner = site if b.kind == "for" else next(
                    (a for a in self.facts.ancestors(site) if isinstance(a, COMPREHENSIONS)), None
                )
                iter_expr = b.value
                if owner is not None and self._contains(owner, name) and not (iter_expr is not None and (iter_expr is name or self._contains(iter_expr, name))):
                    before.append(b)
                    continue
                if order.get(site, -1) < use and not self._contains(site, name):
                    before.append(b)
                continue
            if b.kind == "param":
                before.append(b)
                continue
            if order.get(site, -1) < use and not self._contains(site, name):
                before.append(b)
        pool = before or found
        return max(pool, key=lambda b: order.get(b.site, -1))

    def reaching(self, name: cst.Name) -> List[Binding]:
        """The bindings that may reach this use: the nearest one before it, and the earlier ones
        it does not cover on every path (`if cuda: device = "cuda"` / `else: device = "cpu"`, a
        binding inside an `if` or a `try`). Loop-carried values are not followed."""
        first = self.binding(name)
        if first is None:
            return []
        found = [first]
        if first.kind not in ("assign", "augassign", "with") or self._covers(first.site, name):
            return found
        order = self.facts.order
        at = order.get(first.site, -1)
        earlier = [
            b for b in self.bindings(name)
            if b is not first and b.kind in ("assign", "augassign", "with", "param") and order.get(b.site, -1) < at
        ]
        for b in sorted(earlier, key=lambda b: -order.get(b.site, -1)):
            found.append(b)
            if b.kind == "param" or self._covers(b.site, name):
                break
        return found

    def parameter_source(self, name: cst.Name) -> Optional[Tuple[cst.FunctionDef, str]]:
        """The parameter whose value `name` holds here, unchanged: the parameter itself, or one
        of the values of `**kwargs` / `*args` taken by the loop that binds it (`for k, v in
        kwargs.items()`, `for v in kwargs.values()`, `for v in args`). Returns the function and
        the parameter as written ("x", "*args", "**kwargs"); None when another binding may reach
        the use (also one from a later iteration of a loop around it)."""
        reaching = self.reaching(name)
        if len(reaching) != 1 or reaching[0].kind not in ("param", "for"):
            return None
        b = reaching[0]
        if b.kind == "param":
            source = (b.function, _param_key(b.function, b.param)) if b.function is not None and b.param is not None else None
        else:
            it, path = b.value, b.path
            star = None
            if isinstance(it, cst.Call) and isinstance(it.func, cst.Attribute) and not it.args:
                if (it.func.attr.value, path) in (("items", (1,)), ("values", ())):
                    star, it = "**", it.func.value
            elif not path:
                star = "*"
            source = self._star_parameter(it, star) if star is not None and isinstance(it, cst.Name) else None
        if source is None:
            return None
        # a later binding in a loop around the use (inside the binding loop, for a loop
        # variable) reaches it on the next iteration
        loops = []
        for a in self.facts.ancestors(name):
            if a is source[0] or a is b.site:
                break
            if isinstance(a, (cst.For, cst.While)):
                loops.append(a)
        for other in self.bindings(name):
            if other is not b and any(self._contains(loop, other.site) for loop in loops):
                return None
        return source

    def _star_parameter(self, expr: cst.Name, star: str) -> Optional[Tuple[cst.FunctionDef, str]]:
        reaching = self.reaching(expr)
        if len(reaching) != 1 or reaching[0].kind != "param":
            return None
        b = reaching[0]
        if b.function is None or b.param is None:
            return None
        key = _param_key(b.function, b.param)
        return (b.function, key) if key.startswith(star) and not key.startswith(star + "*") else None

    def _covers(self, site: cst.CSTNode, use: cst.CSTNode) -> bool:
        """The statement block that holds `site` also holds `use` (so `site` ran before it)."""
        block = next((a for a in self.facts.ancestors(site) if isinstance(a, (cst.IndentedBlock, cst.Module))), None)
        return block is not None and self._contains(block, use)

    def value_at(self, b: Binding) -> Optional[cst.BaseExpression]:
        """The expression a tuple-unpacking binding takes its value from, when it can be told."""
        value = b.value
        for i in b.path:
            if isinstance(value, (cst.Tuple, cst.List)) and i < len(value.elements) and not any(
                isinstance(e, cst.StarredElement) for e in value.elements
            ):
                value = value.elements[i].value
            else:
                return value  # an element of something: the caller decides if that is enough
        return value

    def element_values(self, b: Binding) -> List[cst.BaseExpression]:
        """What a binding's name may hold: the assigned value, or for a tuple target the element
        at its position, also out of the tuples a project function returns
        (`targets, n = self.validate_args(targets)`)."""
        r: Union[Binding, cst.BaseExpression]  # a binding that reaches, then a returned value
        value = self.value_at(b)
        if value is None:
            return []
        rest = b.path
        node = b.value
        for i in b.path:  # how much of the path `value_at` consumed
            if node is value:
                break
            node = node.elements[i].value  # type: ignore[union-attr]
            rest = rest[1:]
        if rest and isinstance(value, cst.Name):
            # `batch = [b.to(device) for b in batch]`, then `x, y = batch`: an element of the list
            for r in self.reaching(value):
                made = self.value_at(r) if r.kind == "assign" and not r.path else None
                if isinstance(made, (cst.ListComp, cst.GeneratorExp)):
                    return [made.elt]
        if rest and isinstance(value, (cst.ListComp, cst.GeneratorExp)):
            return [value.elt]
        if not rest or not isinstance(value, cst.Call):
            return [value]
        out: List[cst.BaseExpression] = []
        for r in self.returns(value):
            if isinstance(r, (cst.Tuple, cst.List)) and len(rest) == 1 and rest[0] < len(r.elements) and not any(
                isinstance(e, cst.StarredElement) for e in r.elements
            ):
                out.append(r.elements[rest[0]].value)
        return out or [value]

    def callers(self, fn: cst.FunctionDef) -> List[cst.Call]:
        if fn not in self._callers:
            self._callers[fn] = [c for c in self.facts.calls if fn in self.facts.resolve_call(c)]
        return self._callers[fn]

    def _submodule_calls(self, fn: cst.FunctionDef) -> List[cst.Call]:
        """For a module's `forward`: the calls of this file that run it through an attribute of
        another module (`self.y_embedder(y, self.training)` after `self.y_embedder =
        LabelEmbedder(...)`)."""
        if fn in self._submodule_callers:
            return self._submodule_callers[fn]
        cls = self.facts.function_class.get(fn)
        found: List[cst.Call] = []
        self._submodule_callers[fn] = found
        if fn.name.value != "forward" or cls is None:
            return found
        for call in self.facts.calls:
            func = call.func
            if not (isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name) and func.value.value == "self"):
                continue
            if any(
                isinstance(built, cst.Call) and isinstance(built.func, cst.Name) and built.func.value == cls.name.value
                for built in self.self_writes(func)
            ):
                found.append(call)
        return found

    def argument_for(self, call: cst.Call, fn: cst.FunctionDef, param: cst.Param) -> Optional[cst.BaseExpression]:
        """The expression `call` passes for `param` of `fn` (None when it cannot be told)."""
        for arg in call.args:
            if arg.keyword is not None and arg.keyword.value == param.name.value:
                return arg.value
        params = list(fn.params.posonly_params) + list(fn.params.params)
        if param not in params:
            return None
        position = params.index(param)
        if self.facts.function_class.get(fn) is not None and isinstance(call.func, cst.Attribute):
            decorators = {dotted(d.decorator) for d in fn.decorators}
            if "staticmethod" not in decorators:
                position -= 1
        if position < 0:
            return None
        positional = [a for a in call.args if a.keyword is None]
        if any(a.star for a in positional[: position + 1]):
            return None
        if position < len(positional):
            return positional[position].value
        return param.default

    def self_writes(self, attr: cst.Attribute) -> List[cst.BaseExpression]:
        """`self.x = ...` values written in the class of the method using `self.x`."""
        if dotted(attr.value) != "self":
            return []
        cls = self.facts.enclosing_class(attr)
        writes = self.ctx.values.index.self_attrs.get((cls, attr.attr.value), [])
        return [w for w in writes if isinstance(w, cst.BaseExpression)]

    def returns(self, call: cst.Call) -> List[cst.BaseExpression]:
        out: List[cst.BaseExpression] = []
        for fn in self.facts.resolve_call(call):
            if fn.name.value == "__init__":
                continue
            out.extend(r for r in self.ctx.values.index.returns.get(fn, []) if r is not None)
        return out

    # -- loaders -----------------------------------------------------------------------------
    def is_loader_call(self, node: cst.BaseExpression) -> bool:
        return isinstance(node, cst.Call) and self.ctx.matches(node.func, "torch.utils.data.DataLoader")

    def loaders_of_iterable(self, expr: Optional[cst.BaseExpression], depth: int = 0) -> List[cst.Call]:
        """Every `DataLoader(...)` call an iterable (a loader, `enumerate(loader)`, `tqdm(loader)`,
        `pbar = tqdm(loader)`, a project generator over one, `self.train_data` set from a
        constructor argument, an element of the tuple a helper returns on either branch ...) may
        run, in source order. The loader identity is the one every loader rule reads
        (`providers.loaders.LoaderFacts`); this file's bindings add a `with` target and a
        parameter's default."""
        found: Set[cst.Call] = set()
        if expr is not None and self._loader_file():
            facts = loader_facts(self.ctx)
            for e in facts.unwrap(expr):
                found |= facts.origins(e)
        self._walk_loaders(expr, depth, found)
        return sorted(found, key=self._source_order)

    def _loader_file(self) -> bool:
        """This file builds a data loader (memoised): the shared loader facts have something to say."""
        if self._builds_loaders is None:
            self._builds_loaders = any(is_dataloader(self.ctx, c) for c in self.facts.calls)
        return self._builds_loaders

    def _source_order(self, call: cst.Call) -> Tuple[int, int]:
        start = self.ctx.position(call).start
        return (start.line, start.column)

    def _walk_loaders(self, expr: Optional[cst.BaseExpression], depth: int, out: Set[cst.Call]) -> None:
        if expr is None or depth > 8:
            return
        if isinstance(expr, cst.Call):
            if self.is_loader_call(expr):
                out.add(expr)
                return
            name = dotted(expr.func) or ""
            short = name.rsplit(".", 1)[-1]
            if short in ("enumerate", "iter", "tqdm", "trange", "zip", "track", "progress_bar", "islice", "cycle") and expr.args:
                for arg in expr.args:
                    if arg.keyword is None and not arg.star:
                        self._walk_loaders(arg.value, depth + 1, out)
                return
            for value in self.returns(expr):
                self._walk_loaders(value, depth + 1, out)
            return
        if isinstance(expr, cst.Name):
            b = self.binding(expr)
            if b is None:
                return
            if b.kind in ("assign", "with"):
                self._walk_loaders(b.value if b.kind == "with" else self.value_at(b), depth + 1, out)
            elif b.kind == "param" and b.function is not None and b.param is not None:
                for call in self.callers(b.function):
                    self._walk_loaders(self.argument_for(call, b.function, b.param), depth + 1, out)
                if b.param.default:
                    self._walk_loaders(b.param.default, depth + 1, out)
            return
        if isinstance(expr, cst.Attribute):
            for value in self.self_writes(expr):
                self._walk_loaders(value, depth + 1, out)

    def loader_of_batch(self, expr: Optional[cst.BaseExpression], depth: int = 0) -> Optional[cst.Call]:
        """The `DataLoader(...)` whose batches `expr` is (a part of)."""
        found = self.batch_origins(expr, depth)
        return found[0][0] if found else None

    def batch_origins(
        self, expr: Optional[cst.BaseExpression], depth: int = 0, whole: bool = True
    ) -> Optional[Tuple[List[cst.Call], bool]]:
        """The `DataLoader(...)` calls whose batches `expr` may be (a part of), in source order, and
        whether `expr` is a whole batch as the loader yields it (True) or an element taken out of
        one (False)."""
        if expr is None or depth > 10:
            return None
        if isinstance(expr, (cst.Subscript, cst.Attribute)) and not (
            isinstance(expr, cst.Attribute) and dotted(expr.value) == "self"
        ):
            return self.batch_origins(expr.value, depth + 1, False)
        if isinstance(expr, cst.Call):
            func = expr.func
            if isinstance(func, cst.Name) and func.value == "next" and expr.args:
                loaders = self.loaders_of_iterable(expr.args[0].value, depth + 1)
                return (loaders, whole) if loaders else None
            if isinstance(func, cst.Attribute) and func.attr.value in ("items", "values") and not expr.args:
                return self.batch_origins(func.value, depth + 1, False)
            return None
        if isinstance(expr, cst.Name):
            b = self.binding(expr)
            if b is None:
                return None
            if b.kind == "for":
                it, path = b.value, b.path
                # `for i, (x, y) in enumerate(loader)`, `for a, b in zip(loader_a, loader_b)`
                while isinstance(it, cst.Call) and dotted(it.func) in ("enumerate", "zip") and path:
                    args = [a for a in it.args if a.keyword is None and not a.star]
                    index = 0 if dotted(it.func) == "enumerate" else path[0]
                    if dotted(it.func) == "enumerate" and path[0] != 1:
                        return None  # the counter
                    if index >= len(args):
                        return None
                    it, path = args[index].value, path[1:]
                loaders = self.loaders_of_iterable(it, depth + 1)
                return (loaders, whole and not path) if loaders else None
            if b.kind == "comp":  # an element of a batch, or an item of the loader itself
                got = self.batch_origins(b.value, depth + 1, False)
                loaders = self.loaders_of_iterable(b.value, depth + 1) if got is None else []
                return got or ((loaders, False) if loaders else None)
            if b.kind == "assign":
                return self.batch_origins(self.value_at(b), depth + 1, whole and not b.path)
            if b.kind == "param" and b.function is not None and b.param is not None:
                found: Set[cst.Call] = set()
                each_whole = True
                for call in self.callers(b.function):
                    got = self.batch_origins(self.argument_for(call, b.function, b.param), depth + 1, whole)
                    if got is not None:
                        found.update(got[0])
                        each_whole = each_whole and got[1]
                return (sorted(found, key=self._source_order), each_whole) if found else None
            return None
        return None

    def batch_loop(self, expr: cst.BaseExpression) -> Optional[Tuple[Binding, bool]]:
        """The `for` binding whose loop variable `expr` is (a part of), and whether `expr` is that
        variable whole: followed through subscripts and attributes (`batch["x"]`), `.items()` /
        `.values()`, comprehension variables (`[b.to(device) for b in batch[1:]]`) and names
        assigned from such (`x = batch[0]`, `x, y = batch`)."""
        whole = True
        for _ in range(8):
            if isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute) and expr.func.attr.value in ("items", "values") and not expr.args:
                expr, whole = expr.func.value, False
            root = expr
            while isinstance(root, (cst.Subscript, cst.Attribute)):
                root = root.value
            if not isinstance(root, cst.Name):
                return None
            whole = whole and root is expr
            b = self.binding(root)
            if b is None:
                return None
            if b.kind == "for":
                return b, whole and not b.path
            value = self.value_at(b) if b.kind == "assign" else b.value if b.kind == "comp" else None
            if value is None:
                return None
            expr, whole = value, whole and b.kind == "assign" and not b.path
        return None

    # -- devices -----------------------------------------------------------------------------
    def device_kind(self, expr: Optional[cst.BaseExpression], depth: int = 0) -> str:
        """What an argument of `.to(...)` is: DEVICE, MAYBE_DEVICE, CPU, DTYPE or UNKNOWN."""
        if expr is None or depth > 8:
            return UNKNOWN
        text = _string_value(expr)
        if text is not None:
            return _device_string_kind(text)
        if isinstance(expr, cst.FormattedString):
            head = expr.parts[0] if expr.parts else None
            if isinstance(head, cst.FormattedStringText):
                return _device_string_kind(head.value) if _device_string_kind(head.value) != UNKNOWN else DEVICE
            return DEVICE  # `.to(f"{...}")`: only a device can be spelled as a string
        if isinstance(expr, cst.Integer):
            return DEVICE  # a device index
        if isinstance(expr, cst.IfExp):
            kinds = {self.device_kind(expr.body, depth + 1), self.device_kind(expr.orelse, depth + 1)}
            if kinds <= {DEVICE, CPU} and DEVICE in kinds:
                return DEVICE
            if kinds == {CPU}:
                return CPU
            return UNKNOWN
        if isinstance(expr, cst.Call):
            if self.ctx.matches(expr.func, "torch.device"):
                first = expr.args[0].value if expr.args else None
                text = _string_value(first) if first is not None else None
                if text is not None:
                    kind = _device_string_kind(text)
                    return kind if kind != UNKNOWN else DEVICE
                return DEVICE
            return UNKNOWN
        q = self.ctx.qualname(expr) if isinstance(expr, (cst.Name, cst.Attribute)) else None
        if q is not None and q.startswith("torch.") and q[len("torch."):] in DTYPES:
            return DTYPE
        if isinstance(expr, cst.Attribute):
            if expr.attr.value == "device":
                return DEVICE
            if expr.attr.value == "dtype":
                return DTYPE
        traced = self.ctx.values.resolve(expr)
        if traced is not None and traced.options and traced.all(lambda v: isinstance(v, str)):
            kinds = {_device_string_kind(v) for v in traced.options}
            if kinds == {CPU}:
                return CPU
            if DEVICE in kinds:
                return DEVICE
        if traced is not None and traced.options and traced.all(lambda v: isinstance(v, int) and not isinstance(v, bool)):
            return DEVICE
        bound: List[cst.BaseExpression] = []
        if isinstance(expr, cst.Name):
            for b in self.reaching(expr):  # "may be CUDA" when any reaching definition may be
                if b.kind == "assign":
                    value = self.value_at(b)
                    if value is not None and not b.path:
                        bound.append(value)
                elif b.kind == "param" and b.function is not None and b.param is not None:
                    args = [self.argument_for(c, b.function, b.param) for c in self.callers(b.function)]
                    if args and all(a is not None for a in args):
                        kinds = {self.device_kind(a, depth + 1) for a in args}
                        if kinds == {DEVICE} or kinds == {DEVICE, CPU}:
                            return DEVICE
                        if kinds == {DTYPE} and not bound:
                            return DTYPE
        elif isinstance(expr, cst.Attribute):
            bound.extend(self.self_writes(expr))
        if bound:
            kinds = {self.device_kind(v, depth + 1) for v in bound}
            if kinds <= {DEVICE, CPU} and DEVICE in kinds:
                return DEVICE
            if kinds == {CPU}:
                return CPU
            if kinds == {DTYPE}:
                return DTYPE
        last = (dotted(expr) or "").rsplit(".", 1)[-1]
        if last and _DTYPE_NAME.search(last):
            return DTYPE
        if last and _DEVICE_NAME.search(last):
            return MAYBE_DEVICE
        return UNKNOWN

    def parse_move(self, call: cst.Call) -> Optional[Move]:
        """`x.to(...)` / `x.cuda(...)` as a `Move`, or None for anything else (or with splats)."""
        func = call.func
        if not isinstance(func, cst.Attribute) or func.attr.value not in ("to", "cuda"):
            return None
        if any(a.star for a in call.args):
            return None
        positional = [a for a in call.args if a.keyword is None]
        keywords = {a.keyword.value: a for a in call.args if a.keyword is not None}
        extra = tuple(k for k in keywords if k not in ("device", "dtype", "non_blocking"))
        non_blocking = keywords.get("non_blocking")
        if func.attr.value == "cuda":
            target = keywords["device"].value if "device" in keywords else (positional[0].value if positional else None)
            if len(positional) > 1:
                non_blocking = positional[1]
            return Move(call, "cuda", target, DEVICE, None, non_blocking, extra)
        target = keywords["device"].value if "device" in keywords else None
        dtype = keywords["dtype"].value if "dtype" in keywords else None
        if target is None and positional:
            first = positional[0].value
            kind = self.device_kind(first)
            if kind == DTYPE:
                if len(positional) > 1:
                    non_blocking = positional[1]
                return Move(call, "to", None, DTYPE, first, non_blocking, extra)
            target = first
            if len(positional) > 1:
                dtype = positional[1].value
            if len(positional) > 2:
                non_blocking = positional[2]
            if len(positional) > 3:
                extra = extra + ("copy",)
        elif target is not None and positional:
            return None  # `.to(x, device=...)`: not a form we understand
        if target is None:
            return Move(call, "to", None, DTYPE if dtype is not None else UNKNOWN, dtype, non_blocking, extra)
        return Move(call, "to", target, self.device_kind(target), dtype, non_blocking, extra)

    # -- tensors -----------------------------------------------------------------------------
    def is_model(self, expr: cst.BaseExpression, depth: int = 0) -> bool:
        """An nn.Module (or loss module): `nn.X(...)`, a same-file Module subclass, or a model-named object."""
        if depth > 6:
            return False
        if isinstance(expr, cst.Call):
            q = self.ctx.qualname(expr.func) or ""
            if q.startswith("torch.nn.") and not q.startswith("torch.nn.functional") and q[len("torch.nn."):][:1].isupper():
                return True
            name = dotted(expr.func) or ""
            if name and name in self._project_models:
                return True  # a project module class or factory (defined in another file)
            for cls in self.facts.class_defs.get(name, ()):
                for base in cls.bases:
                    bq = self.ctx.qualname(base.value) or dotted(base.value) or ""
                    if bq in ("torch.nn.Module", "nn.Module", "Module") or bq.startswith("torch.nn."):
                        return True
            if isinstance(expr.func, cst.Attribute) and expr.func.attr.value in ("to", "cuda", "train", "eval", "float", "half"):
                inner = expr.func.value
                if expr.func.attr.value in ("to", "cuda") and self._built_and_moved(inner):
                    return True
                return self.is_model(inner, depth + 1)
            return False
        if isinstance(expr, cst.Name):
            b = self.binding(expr)
            if b is not None and b.kind == "assign" and not b.path:
                value = self.value_at(b)
                if value is not None and self.is_model(value, depth + 1):
                    return True
        elif isinstance(expr, cst.Attribute):
            if any(self.is_model(v, depth + 1) for v in self.self_writes(expr)):
                return True
        last = (dotted(expr) or "").rsplit(".", 1)[-1]
        return bool(last) and bool(MODEL_NAME.search(last))

    def is_accelerator_module(self, expr: cst.BaseExpression) -> bool:
        """`torch.cuda` under another name: `acc = getattr(torch, device_type, torch.cuda)`,
        `acc = torch.get_device_module(device)`, `acc = torch.cuda` (any reaching binding)."""
        if isinstance(expr, cst.Attribute):
            return (self.ctx.qualname(expr) or "") in ACCELERATOR_MODULES
        if not isinstance(expr, cst.Name):
            return False
        for b in self.reaching(expr):
            value = self.value_at(b) if b.kind == "assign" and not b.path else None
            if isinstance(value, (cst.Attribute, cst.Name)) and (self.ctx.qualname(value) or "") in ACCELERATOR_MODULES:
                return True
            if isinstance(value, cst.Call):
                q = self.ctx.qualname(value.func) if isinstance(value.func, (cst.Name, cst.Attribute)) else None
                if q == "torch.get_device_module":
                    return True
                if (q or dotted(value.func)) in ("getattr", "builtins.getattr") and value.args and self.ctx.qualname(value.args[0].value) == "torch":
                    return True
        return False

    def _built_and_moved(self, inner: cst.BaseExpression) -> bool:
        """`Net(...)` in `Net(...).to(device)`: a class built and moved at once is a module (a
        tensor would be built with `device=`), unless it is a tensor or graph-batch type."""
        if not isinstance(inner, cst.Call):
            return False
        tail = (dotted(inner.func) or "").rsplit(".", 1)[-1]
        q = self.ctx.qualname(inner.func) if isinstance(inner.func, (cst.Name, cst.Attribute)) else None
        return tail[:1].isupper() and not (q or "").startswith("torch.") and tail not in DATA_CLASSES

    def is_tensor(self, expr: Optional[cst.BaseExpression], depth: int = 0) -> bool:
        """Whether `expr` is known to evaluate to a tensor that may live on the device.

        Strict on purpose: unknown names, loop counters, `.item()` results, numpy values and
        CPU-only factory calls are not tensors here.
        """
        if expr is None or depth > 10:
            return False
        if expr in self._tensor_memo:
            return self._tensor_memo[expr]
        self._tensor_memo[expr] = False  # cycles (x = x + 1) resolve to "no"
        result = self._is_tensor(expr, depth)
        self._tensor_memo[expr] = result
        return result

    def _is_tensor(self, expr: cst.BaseExpression, depth: int) -> bool:
        if isinstance(expr, cst.Call):
            func = expr.func
            q = self.ctx.qualname(func) if isinstance(func, (cst.Name, cst.Attribute)) else None
            if q is not None:
                if q.startswith(("torch.nn.functional.", "torch.linalg.", "torch.fft.", "torch.special.", "torch.nn.utils.rnn.pad")):
                    return True
                if q in TENSOR_FUNCS:
                    return True
                if q.startswith("torch.") and q.count(".") == 1:
                    short = q.split(".", 1)[1]
                    if short in NOT_TENSOR_FUNCS or short.startswith(("is_", "get_", "set_")):
                        return False
                    if short in ("as_tensor", "asarray") and self._host_torch_call(expr, q, depth):
                        return False  # host data made a tensor, on the CPU
                    if short in FACTORIES or short in RANDOM_FACTORIES:
                        if any(a.keyword is not None and a.keyword.value == "device" for a in expr.args):
                            return True
                        # `zeros_like(t)`: on the device of `t`
                        return short.endswith("_like") and bool(expr.args) and self.is_tensor(expr.args[0].value, depth + 1)
                    return short[:1].islower()
                return False
            if isinstance(func, cst.Attribute):
                method = func.attr.value
                if method in ("to", "cuda"):
                    move = self.parse_move(expr)
                    if move is not None and move.moves_to_device:
                        return not (self._built_and_moved(func.value) or self.is_model(func.value))
                    return move is not None and move.kind == DTYPE and self.is_tensor(func.value, depth + 1)
                if method in NON_TENSOR_METHODS:
                    return False
                if self.is_tensor(func.value, depth + 1):
                    return True
            if self.is_model(func):
                return True
            return any(self.is_tensor(r, depth + 1) for r in self.returns(expr))
        if isinstance(expr, cst.BinaryOperation):
            strings = (cst.SimpleString, cst.ConcatenatedString, cst.FormattedString)
            if isinstance(expr.left, strings) or isinstance(expr.right, strings):
                return False  # `"%f" % t`, `"a" + s`: a string
            return self.is_tensor(expr.left, depth + 1) or self.is_tensor(expr.right, depth + 1)
        if isinstance(expr, cst.UnaryOperation):
            return self.is_tensor(expr.expression, depth + 1)
        if isinstance(expr, cst.Comparison):
            if any(isinstance(t.operator, (cst.Is, cst.IsNot, cst.In, cst.NotIn)) for t in expr.comparisons):
                return False
            if any(_is_none(x) for x in (expr.left, *(t.comparator for t in expr.comparisons))):
                return False  # `t == None`: a tensor compared with None is a Python bool (no sync)
            return self.is_tensor(expr.left, depth + 1) or any(
                self.is_tensor(t.comparator, depth + 1) for t in expr.comparisons
            )
        if isinstance(expr, cst.Subscript):
            b = self.binding(expr.value) if isinstance(expr.value, cst.Name) else None
            if b is not None and b.kind == "param" and b.function is not None and b.param is not None and _container_parameter(b.function, b.param):
                return self._param_is_tensor(b, cast(cst.Name, expr.value), depth + 1)  # `args[0]`, `kwargs["x"]`
            return self.is_tensor(expr.value, depth + 1)
        if isinstance(expr, cst.Attribute):
            attr = expr.attr.value
            if attr in TENSOR_ATTRS:
                return self.is_tensor(expr.value, depth + 1) or (
                    attr in ("loss", "logits") and self._model_output(expr.value, depth)
                )
            if dotted(expr.value) == "self":
                # a registered buffer, a parameter, or an attribute only ever set to a tensor
                if attr in self._buffers(expr):
                    return True
                writes = self.self_writes(expr)
                return bool(writes) and all(self.is_tensor(w, depth + 1) for w in writes)
            if attr in ("weight", "bias") and self.is_model(expr.value):
                return True  # a parameter of a module
            if attr not in HOST_ATTRS and not attr.startswith(HOST_ATTR_PREFIXES) and self._moved_batch(expr.value, attr):
                return True  # `batch = batch.to(device)`, then `batch.y`: a field of a graph/dict batch
            return False
        if isinstance(expr, cst.Name):
            return self._name_is_tensor(expr, depth)
        return False

    def _buffers(self, attr: cst.Attribute) -> Set[str]:
        """Names the class of this method registers with `self.register_buffer("name", ...)`."""
        cls = self.facts.enclosing_class(attr)
        if cls is None:
            return set()
        found = self._buffer_memo.get(cls)
        if found is None:
            found = set()
            for call in self.facts.calls:
                func = call.func
                if (
                    isinstance(func, cst.Attribute) and func.attr.value == "register_buffer" and dotted(func.value) == "self"
                    and call.args and isinstance(call.args[0].value, cst.SimpleString)
                    and self.facts.enclosing_class(call) is cls
                ):
                    found.add(call.args[0].value.evaluated_value)  # type: ignore[arg-type]
            self._buffer_memo[cls] = found
        return found

    def _moved_batch(self, expr: cst.BaseExpression, field: str) -> bool:
        """A batch object on the device: a name bound to `something.to(<device>)` / `.cuda()`,
        or a parameter fed device tensors (`forward(self, batched_data)`). A plain tensor has
        no fields, so the fields read off such a value are the batch's tensors."""
        if not isinstance(expr, cst.Name):
            return False
        for b in self.reaching(expr):
            if b.kind == "param":
                # a graph batch handed to `forward`: its standard fields only (other objects
                # passed in, such as a DGL graph, also carry flags and sizes)
                return field in GRAPH_FIELDS and self.is_tensor(expr)
            value = self.value_at(b) if b.kind == "assign" and not b.path else None
            if isinstance(value, cst.Call):
                move = self.parse_move(value)
                if move is not None and move.moves_to_device and not self.is_model(value.func.value):  # type: ignore[attr-defined]
                    return True
        return False

    def _model_output(self, expr: cst.BaseExpression, depth: int) -> bool:
        if isinstance(expr, cst.Call):
            return self.is_model(expr.func)
        if isinstance(expr, cst.Name):
            b = self.binding(expr)
            return b is not None and b.kind == "assign" and isinstance(self.value_at(b), cst.Call) and self.is_model(self.value_at(b).func)  # type: ignore[union-attr]
        return False

    def _name_is_tensor(self, name: cst.Name, depth: int) -> bool:
        b = self.binding(name)
        if b is None:
            return False
        if b.kind == "assign":
            for r in self.reaching(name):  # any reaching assignment may give a tensor
                if r.kind == "assign" and any(self.is_tensor(v, depth + 1) for v in self.element_values(r)):
                    return True
            # `loss = compute(...)` from elsewhere, then `loss.backward()`: a tensor
            return self.backward_called_on(name) and not self.is_host_value(self.value_at(b))
        if b.kind == "for":
            # `for p in model.parameters()`, `for name, p in model.named_parameters()`
            it = b.value
            if isinstance(it, cst.Call) and isinstance(it.func, cst.Attribute) and not it.args:
                return PARAM_ITERS.get(it.func.attr.value) == b.path
            return self._element_is_tensor(it, b.path, depth)
        if b.kind == "augassign":
            if self.is_tensor(b.value, depth + 1):
                return True
            # `total += x` keeps whatever `total` was
            earlier = [o for o in self.bindings(name) if o is not b and o.kind in ("assign", "augassign")]
            return any(self.is_tensor(o.value if o.kind == "augassign" else self.value_at(o), depth + 1) for o in earlier)
        if b.kind == "param" and b.function is not None and b.param is not None:
            if _container_parameter(b.function, b.param):
                return False  # (an element of it: see `_is_tensor`'s subscripts)
            return self._param_is_tensor(b, name, depth)
        return False

    def is_epoch_counter(self, expr: cst.BaseExpression) -> bool:
        """The counter of an epoch loop (`for epoch in range(n):` around the training steps)."""
        if not isinstance(expr, cst.Name):
            return False
        b = self.binding(expr)
        return b is not None and b.kind == "for" and b.site in self.facts.epoch_loops

    def is_cpu_buffer(self, name: cst.Name) -> bool:
        """`name` is only ever bound to a tensor made on the CPU by a factory without a device
        (`buf = torch.zeros(shape)`): writing a device tensor into it copies to the host."""
        bindings = self.reaching(name)
        if not bindings:
            return False
        for b in bindings:
            value = self.value_at(b) if b.kind == "assign" and not b.path else None
            if not isinstance(value, cst.Call) or not isinstance(value.func, (cst.Name, cst.Attribute)):
                return False
            q = self.ctx.qualname(value.func) or ""
            if q not in ("torch.zeros", "torch.ones", "torch.empty", "torch.full") or any(
                a.keyword is not None and a.keyword.value == "device" or a.star for a in value.args
            ):
                return False
        return True

    def _element_is_tensor(self, it: Optional[cst.BaseExpression], path: Tuple[int, ...], depth: int) -> bool:
        """An element of a loop's iterable: `for row in t` (a row of a tensor is a tensor),
        `for a, b in zip(t, u)` (the i-th element of the i-th zipped tensor). Only for the
        iterables that are tensors themselves: a list, a loader, `range` stay unknown."""
        if isinstance(it, cst.Call) and isinstance(it.func, cst.Name) and it.func.value == "zip" and self.ctx.qualname(it.func) is None:
            if len(path) == 1 and path[0] < len(it.args) and not any(a.star or a.keyword for a in it.args):
                return self.is_tensor(it.args[path[0]].value, depth + 1)
            return False
        if not path and isinstance(it, (cst.Name, cst.Attribute)):
            return self.is_tensor(it, depth + 1)
        return False

    def _param_is_tensor(self, b: Binding, name: cst.Name, depth: int) -> bool:
        """What a parameter (or an element of `*args` / `**kwargs`) holds: what the calls pass."""
        assert b.function is not None and b.param is not None
        if (b.function, name.value) in self.index.backward_names:
            return True
        if _host_annotation(b.param):
            return False
        callers = self.callers(b.function) or self._submodule_calls(b.function)
        if not callers:
            return self._forward_input(b.function, b.param)
        args = [self.argument_for(c, b.function, b.param) for c in callers]
        return bool(args) and all(self.is_tensor(a, depth + 1) for a in args)

    def _forward_input(self, fn: cst.FunctionDef, param: cst.Param) -> bool:
        """An input of a module's `forward` that the whole program runs in a training step or an
        evaluation loop from another file (`model(x)` there): a tensor, by the module contract,
        unless its default says otherwise (`reduction="mean"`, `k=3`; `mask=None` may be one)."""
        facts = self.ctx.torch
        if fn.name.value != "forward" or facts.function_class.get(fn) is None or not facts.chain_of(fn.body)[1]:
            return False
        params = fn.params.params
        if params and params[0] is param:
            return False  # self
        if facts.scalar_parameter(fn, param.name.value):
            return False  # a call site passes a number (a step index, a flag)
        default = param.default
        return default is None or (isinstance(default, cst.Name) and default.value == "None")

    def is_host_value(self, expr: Optional[cst.BaseExpression], depth: int = 0) -> bool:
        """Known to be a Python number, numpy value or CPU-only tensor: reading it never syncs."""
        if expr is None or depth > 8:
            return False
        if isinstance(expr, (cst.Integer, cst.Float, cst.Imaginary, cst.SimpleString, cst.ConcatenatedString, cst.FormattedString)):
            return True
        if isinstance(expr, cst.Call):
            func = expr.func
            if isinstance(func, cst.Name) and func.value in ("float", "int", "bool", "len", "round", "str", "sum", "abs", "min", "max", "list", "dict", "tuple", "range"):
                return func.value not in ("sum", "abs", "min", "max") or all(
                    self.is_host_value(a.value, depth + 1) for a in expr.args
                )
            if isinstance(func, cst.Attribute) and func.attr.value in ("item", "tolist", "numpy", "cpu"):
                return True
            if isinstance(func, cst.Attribute) and not self._may_move(expr) and (
                (isinstance(func.value, cst.Call) and self.is_host_value(func.value, depth + 1))
                or self.is_host_array(func.value, depth + 1)
            ):
                return True  # `np.ceil(x).astype(int)`, `m.eq(i).sum()`: a method of a host value
            q = self.ctx.qualname(func) if isinstance(func, (cst.Name, cst.Attribute)) else None
            if q is not None and (q.startswith(("numpy.", "math.", "time.", "random.")) or q == "numpy"):
                return True
            return self._host_torch_call(expr, q, depth) or self.is_host_array(expr, depth + 1)
        if isinstance(expr, cst.Subscript):
            return self.is_host_array(expr.value, depth + 1)  # an element of a CPU tensor
        if isinstance(expr, cst.BinaryOperation):
            return self.is_host_value(expr.left, depth + 1) and self.is_host_value(expr.right, depth + 1)
        if isinstance(expr, cst.UnaryOperation):
            return self.is_host_value(expr.expression, depth + 1)
        if isinstance(expr, cst.Name):
            b = self.binding(expr)
            if b is not None and b.kind == "assign":
                reaching = self.reaching(expr)  # a host value on every path
                return all(r.kind == "assign" and all(self.is_host_value(v, depth + 1) for v in self.unpacked(r)) for r in reaching)
            if b is not None and b.kind == "for":
                # a loop counter: `for step in range(n)` / `for i, batch in enumerate(loader)`
                it = b.value
                if isinstance(it, cst.Call) and dotted(it.func) == "range":
                    return True
                if isinstance(it, cst.Call) and dotted(it.func) == "enumerate" and b.path[:1] == (0,):
                    return True
            return False
        return False

    def is_host_array(self, expr: Optional[cst.BaseExpression], depth: int = 0) -> bool:
        """A CPU tensor or a numpy array, whose methods and elements are host values too:
        `torch.from_numpy(a)`, a torch factory without `device=`, `torch.as_tensor(a)` of a host
        value, `t.cpu()`, `t.numpy()`, a numpy call, a method of one of these that does not move
        it (`m.eq(i).sum()`, not `m.cuda()`), an element of one, and a name every binding of
        which that reaches the use is one (`m = torch.from_numpy(rgb2id(img))` after `m` was
        a device tensor: the later binding counts)."""
        if expr is None or depth > 8:
            return False
        if isinstance(expr, cst.Call):
            func = expr.func
            if self._may_move(expr):
                return False
            if isinstance(func, cst.Attribute) and (func.attr.value in ("cpu", "numpy") or self.is_host_array(func.value, depth + 1)):
                return True
            q = self.ctx.qualname(func) if isinstance(func, (cst.Name, cst.Attribute)) else None
            if q is not None and (q.startswith("numpy.") or q == "numpy"):
                return True
            if self._host_torch_call(expr, q, depth):
                return True
            # a function of this file every `return` of which gives a host tensor
            # (`return torch.tensor(v)`, `return out.cpu()`): its result is on the host too
            returns = self.returns(expr) if depth < 4 else []
            return bool(returns) and all(self.is_host_array(r, depth + 2) for r in returns)
        if isinstance(expr, cst.Subscript):
            return self.is_host_array(expr.value, depth + 1)
        if isinstance(expr, cst.Attribute) and expr.attr.value in ("values", "indices", "T", "mT", "data", "real", "imag"):
            return self.is_host_array(expr.value, depth + 1)  # `probs.max(1).values`
        if isinstance(expr, (cst.Comparison, cst.BinaryOperation)):
            # `preds == y` of host arrays and values (at least one array): a host array too
            parts = [expr.left, *(c.comparator for c in expr.comparisons)] if isinstance(expr, cst.Comparison) else [expr.left, expr.right]
            arrays = [self.is_host_array(p, depth + 1) for p in parts]
            return any(arrays) and all(a or self.is_host_value(p, depth + 1) for a, p in zip(arrays, parts))
        if isinstance(expr, cst.Name):
            reaching = self.reaching(expr)
            return bool(reaching) and all(self._host_binding(r, depth + 1) for r in reaching)
        return False

    def _host_binding(self, b: Binding, depth: int) -> bool:
        """A binding that leaves its name on the host: an assignment of a host array, or an
        in-place update (`boxes /= scale`) of a name that was one (it stays where it is)."""
        if b.kind == "assign":
            values = self.unpacked(b)  # (`probs, preds = to_host(out)`: the element each return gives)
            return bool(values) and all(self.is_host_array(v, depth) for v in values)
        site = b.site
        if b.kind == "augassign" and isinstance(site, cst.AugAssign) and isinstance(site.target, cst.Name):
            return self.is_host_array(site.target, depth)
        return False

    def unpacked(self, b: Binding) -> List[cst.BaseExpression]:
        """What a binding takes: its value, or for a name unpacked from a project function's
        result (`probs, preds = to_host(out)`) the element at its place in each tuple the
        function returns, when every `return` gives such a tuple."""
        value = self.value_at(b)
        if value is None:
            return []
        if b.path and isinstance(value, cst.Call):
            returns = self.returns(value)
            if returns and all(isinstance(r, (cst.Tuple, cst.List)) for r in returns):
                got = self.element_values(b)
                if len(got) == len(returns) and value not in got:
                    return got
        return [value]

    def _host_torch_call(self, call: cst.Call, q: Optional[str], depth: int) -> bool:
        """`torch.zeros(n)`, `torch.from_numpy(a)`, `torch.as_tensor(a)` of a host value,
        `torch.zeros_like(t)` of a CPU tensor, without `device=`: a CPU tensor."""
        if q is None or not q.startswith("torch.") or q.count(".") != 1:
            return False
        short = q.split(".", 1)[1]
        if short not in FACTORIES and short not in RANDOM_FACTORIES and short not in FROM_HOST_FUNCS:
            return False
        if self._may_move(call):
            return False
        if short.endswith("_like") or short in ("as_tensor", "asarray"):
            return bool(call.args) and not call.args[0].star and self.is_host_value(call.args[0].value, depth + 1)
        return True

    def _may_move(self, call: cst.Call) -> bool:
        """A call whose result may be on a device: `.cuda()`, `.to(x)` that is not a dtype cast
        or a move to the CPU, `.type(...)`, anything given a `device=` other than the CPU."""
        func = call.func
        if isinstance(func, cst.Attribute) and func.attr.value in ("cuda", "type") and (func.attr.value == "cuda" or call.args):
            return True
        if isinstance(func, cst.Attribute) and func.attr.value == "to":
            move = self.parse_move(call)
            return move is None or move.kind not in (CPU, DTYPE)
        return any(a.keyword is not None and a.keyword.value == "device" and self.device_kind(a.value) != CPU for a in call.args)

    def backward_called_on(self, name: cst.Name) -> bool:
        for scope in self._scopes(name, name.value):
            if (scope, name.value) in self.index.backward_names:
                return True
            if (scope, name.value) in self.index.binds:
                return False
        return False


def _is_none(expr: cst.BaseExpression) -> bool:
    return isinstance(expr, cst.Name) and expr.value == "None"
