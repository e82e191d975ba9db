"""The `ast` pre-look's answer to "may this file loop over a batch in model code?" (SPD501).

A Python loop over the batch (`rules/overhead/python_loop_over_batch.py`) is reported only where
it runs hot (a training step, an evaluation loop, a hook, or model code: a `forward`, a loss
function and the same-file functions they call) and only when the loop has one of a few shapes:

* `for i in range(n)` over one bound that may be a batch size (`x.size(0)`, `x.shape[0]`,
  `len(x)`, a plain name, or a name such as `batch_size`), or whose body fills a row per element
  (`mask[i, n:] = 0`);
* a loop over the values of a `unique(...)` call;
* a loop over a value that may be a tensor: a name, an attribute, or an argument of `zip` /
  `enumerate`; `enumerate(...)` whose body fills rows.

`batch_loop_candidates` answers, from a walk of the `ast`, whether some loop has such a shape
where it may run hot, and whether one does in model code. A loop may run hot when another loop of
its function holds it (a training-step or evaluation loop may), or when a function around it may
run hot: model code, a framework hook (by its name), a function some loop of the file calls, a
function the whole program runs on every step or evaluation batch (its ordinal, from the seeds),
and what those call in the file (by name). Anywhere else `_context` answers no: a function
that nothing hot runs is called once (from the module, or from a function that is not hot),
however many loops it has. Every test here admits at least what
the rule admits (it over-approximates), and a few are decided exactly as the rule and its data
flow decide them, since they are what spares most model files:

* `self.layers` is not a tensor when every `self.layers = ...` in the file is a literal or a
  `torch.nn` container (`nn.ModuleList(...)`, `nn.Sequential(...)` ...), or there is none, and no
  buffer is registered under that name; `self.config.layers` is not one either (an attribute of
  an attribute is a tensor only as `.weight`, `.bias`, `.grad`, `.T` ...); literals are not;
* a parameter of the loop's function (other than `forward`) that nothing else binds there, with
  no tensor annotation, no mention in the docstring and no attribute read off it, is what the
  callers pass, which the rule does not take for a tensor; a `*args` tuple or a parameter
  annotated as a sequence is none either;
* `range(n)` runs over a batch size only when `n` is bound once in the function, to a batch size.
"""

from __future__ import annotations

import ast
from functools import cached_property
from typing import AbstractSet, Dict, Iterable, Iterator, List, NamedTuple, Optional, Set, Tuple, Union

from speedlint.analyzer.ast_fields import FIELDS, LEAVES, source_start
from speedlint.analyzer.frameworks.hooks import BATCH_HOOKS
from speedlint.analyzer.vocabulary import BATCH_SIZE_NAMES, LOSS_FUNCTION, SEQUENCE_ANNOTATION, TENSOR_ATTRS
from speedlint.analyzer.vocabulary import dotted_name as _dotted

#: `torch.nn` containers: `flow.is_tensor` of a call to one is False (a qualified name outside the
#: tensor-returning vocabulary).
_TORCH_CONTAINERS = frozenset(
    {"torch.nn.ModuleList", "torch.nn.Sequential", "torch.nn.ModuleDict", "torch.nn.ParameterList", "torch.nn.ParameterDict"}
)
#: Expressions `flow.is_tensor` never calls tensors (it only looks at calls, operations,
#: comparisons, subscripts, attributes and names).
_NEVER_TENSORS = (
    ast.List, ast.Tuple, ast.Set, ast.Dict, ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp,
    ast.Constant, ast.JoinedStr, ast.Lambda, ast.IfExp,
)
#: Attributes of a module that are tensors (`flow.is_tensor`: `model.weight`).
_PARAMETER_ATTRS = frozenset({"weight", "bias"})

Function = Union[ast.FunctionDef, ast.AsyncFunctionDef]
Scope = Union[Function, ast.Module]
_DEFS = (ast.FunctionDef, ast.AsyncFunctionDef)


class _Loop:
    """A loop the rule looks at: its iterable, target and body, its scope (the innermost function
    around it, else the module), the functions around it (their ids) and whether another loop of
    its scope holds it (`nested`: a `for`, `while` or comprehension around it)."""

    __slots__ = ("node", "it", "target", "body", "scope", "inside", "nested")

    def __init__(self, node: ast.AST, it: ast.expr, target: ast.expr, body: List[ast.AST], scope: Scope, inside: Tuple[int, ...], nested: bool) -> None:
        self.node, self.it, self.target, self.body, self.scope, self.inside = node, it, target, body, scope, inside
        self.nested = nested


class BatchLoops(NamedTuple):
    """Where some loop of a file may run over a batch (`batch_loop_candidates`)."""

    hot: bool  # in code that may run hot (`_Index.may_run_hot`)
    in_model: bool  # in model code (a `forward`, a loss function, what they call)


def batch_loop_candidates(tree: ast.Module, text: Optional[str], seeded: AbstractSet[int] = frozenset()) -> BatchLoops:
    """Where some loop may run over a batch (see `BatchLoops`); `text`: the source (None: not
    at hand); `seeded`: the ordinals (source order) of the functions the whole program runs on
    every training step or evaluation batch (`FileSeeds.functions`)."""
    index = _Index(tree)
    if not index.loops:
        return BatchLoops(False, False)
    shapes = _Shapes(text, index)
    model = index.model_functions()
    in_model = [loop for loop in index.loops if not model.isdisjoint(loop.inside)]
    if any(shapes.may_loop_over_batch(loop) for loop in in_model):
        return BatchLoops(True, True)
    hot = index.hot_functions(seeded)
    return BatchLoops(any(shapes.may_loop_over_batch(loop) for loop in index.loops if model.isdisjoint(loop.inside) and index.may_run_hot(loop, hot)), False)


_END = object()  # marks the end of a function's subtree on the walk's stack
_END_LOOP = object()  # the end of a loop's subtree
#: Loops of the rule (`for`, one-generator list and generator comprehensions) and the others a
#: training step or evaluation may be (`while`) or hold it (every comprehension).
_LOOPS = frozenset({ast.For, ast.AsyncFor, ast.While, ast.ListComp, ast.GeneratorExp, ast.SetComp, ast.DictComp})


def _nodes(roots: List[ast.AST], prune: Tuple[type, ...] = ()) -> Iterator[ast.AST]:
    """Every node under `roots` (theirs included), in no particular order; nodes of the classes
    in `prune` are left out with their subtrees."""
    stack = list(roots)
    pop, push, extend = stack.pop, stack.append, stack.extend
    AST, leaves = ast.AST, LEAVES
    while stack:
        node = pop()
        if node.__class__ in leaves or node.__class__ in prune:
            continue
        yield node
        for f in FIELDS[node.__class__]:
            value = getattr(node, f, None)
            if value.__class__ is list:
                extend(value)
            elif isinstance(value, AST):
                push(value)


class _Index:
    """One walk over the tree: its loops (with their scopes), its functions and what each may
    call by name, its classes, and the nodes the data-flow questions read (assignments,
    imports, bindings)."""

    def __init__(self, tree: ast.Module) -> None:
        self.loops: List[_Loop] = []
        self.functions: Dict[str, List[int]] = {}  # name -> function ids
        self.calls: Dict[int, Set[str]] = {}  # function id -> names it calls (nested functions' calls too)
        self.inits: Dict[str, List[int]] = {}  # class name -> the ids of its own `__init__`s
        self.writes: List[ast.AST] = []  # assignments, loop / `with` / walrus targets, `register_buffer` calls
        self.binders: List[ast.AST] = []  # imports and every other binding of a name (`_import_bindings`)
        self.loop_calls: Set[str] = set()  # names called inside some loop (of any scope)
        self.defs: List[ast.AST] = []  # the functions (walk order)
        self._walk(tree)

    def _walk(self, tree: ast.Module) -> None:
        loops, writes, binders, calls = self.loops, self.writes, self.binders, self.calls
        scopes: List[Scope] = [tree]
        open_fns: List[int] = []
        inside: Tuple[int, ...] = ()
        depth = 0  # loops open in the current scope
        depths: List[int] = []  # the enclosing scopes' `depth`s
        open_loops = 0  # loops open in any scope
        loop_calls = self.loop_calls
        stack: list = [tree]
        pop, push, extend = stack.pop, stack.append, stack.extend
        AST, leaves = ast.AST, LEAVES
        Name, Attribute, Call = ast.Name, ast.Attribute, ast.Call
        defs = _DEFS
        while stack:
            node = pop()
            kind = node.__class__
            if kind in leaves:
                continue
            if node is _END:
                scopes.pop()
                open_fns.pop()
                inside = tuple(open_fns)
                depth = depths.pop()
                continue
            if node is _END_LOOP:
                depth -= 1
                open_loops -= 1
                continue
            if kind is Name:
                if node.ctx.__class__ is not ast.Load:
                    binders.append(node)
                continue
            if kind is Attribute:
                push(node.value)
                continue
            if kind is Call:
                func = node.func
                name = func.id if func.__class__ is Name else func.attr if func.__class__ is Attribute else None
                if name is not None:
                    for fid in open_fns:
                        calls[fid].add(name)
                    if open_loops:
                        loop_calls.add(name)
                    if name == "register_buffer":
                        writes.append(node)
            elif kind in defs:
                fid = id(node)
                self.functions.setdefault(node.name, []).append(fid)
                self.defs.append(node)
                calls[fid] = set()
                binders.append(node)
                push(_END)
                scopes.append(node)
                open_fns.append(fid)
                inside = tuple(open_fns)
                depths.append(depth)
                depth = 0
            elif kind in _LOOPS:
                if kind is ast.For or kind is ast.AsyncFor:
                    loops.append(_Loop(node, node.iter, node.target, node.body, scopes[-1], inside, depth > 0))
                    writes.append(node)
                elif kind is ast.ListComp or kind is ast.GeneratorExp:
                    comp = node.generators
                    if len(comp) == 1 and not comp[0].ifs:
                        loops.append(_Loop(node, comp[0].iter, comp[0].target, [node.elt], scopes[-1], inside, depth > 0))
                push(_END_LOOP)  # below its children: popped once they are walked
                depth += 1
                open_loops += 1
            elif kind is ast.Assign or kind is ast.AnnAssign or kind is ast.AugAssign or kind is ast.NamedExpr:
                writes.append(node)
            elif kind is ast.comprehension or kind is ast.withitem:
                writes.append(node)
            elif kind is ast.ClassDef:
                inits = self.inits.setdefault(node.name, [])
                inits.extend(id(f) for f in node.body if f.__class__ in defs and f.name == "__init__")
                binders.append(node)
            elif kind is ast.Import or kind is ast.ImportFrom or kind is ast.arg or kind is ast.ExceptHandler:
                binders.append(node)
            for f in FIELDS[kind]:
                value = getattr(node, f, None)
                if value.__class__ is list:
                    extend(value)
                elif isinstance(value, AST):
                    push(value)

    def model_functions(self) -> Set[int]:
        """The ids of the functions named `forward` or like a loss, and of every function they
        may call in the file (`_closure`)."""
        return self._closure(name for name in self.functions if name == "forward" or LOSS_FUNCTION.search(name))

    def hot_functions(self, seeded: AbstractSet[int] = frozenset()) -> Set[int]:
        """The ids of the functions that may run hot, and of every function they may call in the
        file (by name): model code, a framework's per-batch hook (by its name), whatever a loop
        calls (a training-step or evaluation loop's callees), and the functions of the ordinals
        `seeded` (the whole program runs them hot). What the torch facts' step and evaluation
        functions, hooks and model code can be."""
        names = [
            name for name in self.functions
            if name == "forward" or LOSS_FUNCTION.search(name) or name in BATCH_HOOKS or name in self.loop_calls
        ]
        defs = sorted(self.defs, key=source_start) if seeded else []
        return self._closure(names, [id(defs[i]) for i in seeded if i < len(defs)])

    @staticmethod
    def may_run_hot(loop: _Loop, hot: Set[int]) -> bool:
        """Whether the rule's `_context` may place `loop` in hot code without the whole program:
        another loop of its function holds it (a training-step or evaluation loop may), or a
        function around it is in `hot` (`hot_functions`). Otherwise every question of `_context`
        answers no: its own step or evaluation loop is no batch loop, and a function nothing hot
        runs is a step, evaluation or model function only through another module."""
        return loop.nested or not hot.isdisjoint(loop.inside)

    def _closure(self, roots: Iterable[str], more: Iterable[int] = ()) -> Set[int]:
        """The ids of the functions named `roots` and of the functions `more`, and of every
        function they may call in the file (by name: `f(...)`, `x.f(...)`, and for `C(...)` the
        `__init__` defined in a class named `C`, as the torch facts resolve calls)."""
        by_name = self.functions
        todo = [fid for name in roots for fid in by_name[name]]
        todo.extend(more)
        seen: Set[int] = set()
        while todo:
            fid = todo.pop()
            if fid in seen:
                continue
            seen.add(fid)
            for name in self.calls[fid]:
                todo.extend(by_name.get(name, ()))
                todo.extend(self.inits.get(name, ()))  # `C(...)` runs the `__init__` of `C`
        return seen


def _is_zero(node: Optional[ast.AST]) -> bool:
    return isinstance(node, ast.Constant) and type(node.value) is int and node.value == 0


def _is_constant(node: ast.AST) -> bool:
    """What the rule's `_is_constant` accepts: a number, True/False/None, or a negated one."""
    if isinstance(node, ast.UnaryOp):
        return _is_constant(node.operand)
    return isinstance(node, ast.Constant) and (node.value is None or type(node.value) in (bool, int, float))


def _positional(call: ast.Call) -> List[ast.expr]:
    """The arguments LibCST counts as positional: `*a` and `**kw` included."""
    return [*call.args, *(k.value for k in call.keywords if k.arg is None)]


def _all_args(call: ast.Call) -> List[ast.expr]:
    return [*call.args, *(k.value for k in call.keywords)]


class _Shapes:
    """The loop shapes of one file (see the module docstring)."""

    def __init__(self, text: Optional[str], index: _Index) -> None:
        self.text = text
        self._index = index
        self._bound: Dict[int, Dict[str, int]] = {}  # scope -> name -> bindings other than parameters

    def may_loop_over_batch(self, loop: _Loop) -> bool:
        it, target = loop.it, loop.target
        if isinstance(it, ast.Call) and _dotted(it.func) == "range":
            args = _positional(it)
            if len(args) == 2 and _is_zero(args[0]):
                args = args[1:]
            if len(args) != 1 or not isinstance(target, ast.Name):
                return False
            return self._may_be_batch_size(args[0], loop.scope) or _fills_rows(loop.body, target.id)
        if self._may_iterate_unique(it):
            return True
        if any(self._may_be_tensor(e, loop.scope) for e in _iterated(it, target)):
            return True
        if isinstance(it, ast.Call) and _dotted(it.func) == "enumerate" and isinstance(target, ast.Tuple) and target.elts:
            first = target.elts[0]
            return isinstance(first, ast.Name) and _fills_rows(loop.body, first.id)
        return False

    def _may_iterate_unique(self, it: ast.expr) -> bool:
        """`x.unique()`, `torch.unique(x)`, `np.unique(x.cpu())` (also under `.tolist()` ...):
        any call, when the file says `unique` at all (an alias may name it)."""
        return isinstance(_strip_conversions(it), ast.Call) and (self.text is None or "unique" in self.text)

    # -- tensors ------------------------------------------------------------------------------------
    def _may_be_tensor(self, expr: ast.expr, scope: Scope) -> bool:
        if isinstance(expr, _NEVER_TENSORS):
            return False
        if isinstance(expr, ast.Attribute):
            if isinstance(expr.value, ast.Name):
                if expr.value.id == "self":
                    tensors = self.self_tensors
                    return expr.attr in TENSOR_ATTRS or tensors is None or expr.attr in tensors
                return True  # a field of a batch, an output ...
            return expr.attr in TENSOR_ATTRS or expr.attr in _PARAMETER_ATTRS
        if isinstance(expr, ast.Name):
            return not self._passed_in(expr.id, scope)
        return True

    @cached_property
    def self_tensors(self) -> Optional[Set[str]]:
        """The `self.<name>`s that may be tensors (see the module docstring); None: any may be."""
        return _self_tensors(self._index)

    def _passed_in(self, name: str, scope: Scope) -> bool:
        """`name` is what the callers of the loop's function pass (or a `*args` tuple, or a
        parameter annotated as a sequence), and nothing in the function says it is a tensor."""
        if not isinstance(scope, (ast.FunctionDef, ast.AsyncFunctionDef)) or scope.name == "forward":
            return False
        a = scope.args
        if a.vararg is not None and a.vararg.arg == name:
            return True  # `*inputs`: a tuple
        param = next((p for p in (*a.posonlyargs, *a.args, *a.kwonlyargs) if p.arg == name), None)
        if param is None and not (a.kwarg is not None and a.kwarg.arg == name):
            return False
        if param is not None and param.annotation is not None:
            written = ast.unparse(param.annotation)
            if SEQUENCE_ANNOTATION.search(written):
                return True
            if "Tensor" in written or "ndarray" in written:
                return False
        doc = ast.get_docstring(scope)
        if doc and name in doc:
            return False
        return self._bindings(scope).get(name, 0) == 0

    def _bindings(self, scope: Function) -> Dict[str, int]:
        """Name -> how many times the function binds it other than as a parameter, or reads an
        attribute off it (anywhere in its body, nested functions included)."""
        got = self._bound.get(id(scope))
        if got is None:
            got = self._bound[id(scope)] = {}
            for node in _nodes(list(scope.body)):
                if isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Load):
                    got[node.id] = got.get(node.id, 0) + 1
                elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
                    got[node.value.id] = got.get(node.value.id, 0) + 1
                elif isinstance(node, ast.arg):
                    got[node.arg] = got.get(node.arg, 0) + 1
                elif isinstance(node, ast.ExceptHandler) and node.name:
                    got[node.name] = got.get(node.name, 0) + 1
                elif isinstance(node, (ast.Global, ast.Nonlocal)):
                    for n in node.names:
                        got[n] = got.get(n, 0) + 1
                elif isinstance(node, (ast.Import, ast.ImportFrom)):
                    for alias in node.names:
                        local = alias.asname or alias.name.split(".")[0]
                        got[local] = got.get(local, 0) + 1
                elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                    got[node.name] = got.get(node.name, 0) + 1
        return got

    # -- batch sizes --------------------------------------------------------------------------------
    def _may_be_batch_size(self, expr: ast.expr, scope: Scope, depth: int = 0) -> bool:
        """What the rule's `_batch_size_of` may accept."""
        if isinstance(expr, ast.Call):
            func = expr.func
            args = _all_args(expr)
            if isinstance(func, ast.Attribute) and func.attr == "size" and len(args) == 1:
                return _is_zero(args[0]) and isinstance(func.value, (ast.Name, ast.Attribute))
            return _dotted(func) == "len" and len(args) == 1
        if isinstance(expr, ast.Subscript):
            index = expr.slice
            if isinstance(index, ast.Tuple) and len(index.elts) == 1:
                index = index.elts[0]  # `x.shape[0,]`
            return _is_zero(index) and _shape_of(expr.value)
        if isinstance(expr, ast.Attribute):
            return expr.attr in BATCH_SIZE_NAMES
        if isinstance(expr, ast.Name):
            return expr.id in BATCH_SIZE_NAMES or (depth == 0 and self._bound_to_batch_size(expr.id, scope))
        return False

    def _bound_to_batch_size(self, name: str, scope: Scope) -> bool:
        """The rule's `_batch_size_name`: `name` bound by one assignment in the function (nested
        functions aside), from a batch size (`B = x.size(0)`, `B, C, H, W = x.shape`)."""
        found = 0
        for stmt in _assignments(scope, name):
            if len(stmt.targets) != 1:
                return False
            target = stmt.targets[0]
            if isinstance(target, ast.Name):
                found += 1
                if found > 1 or not self._may_be_batch_size(stmt.value, scope, depth=1):
                    return False
            elif isinstance(target, (ast.Tuple, ast.List)) and target.elts:
                first = target.elts[0]
                if not (isinstance(first, ast.Name) and first.id == name and _shape_of(_leading_dims(stmt.value))):
                    return False
                found += 1
            else:
                return False
        return found == 1


def _assignments(scope: Scope, name: str) -> List[ast.Assign]:
    """The `=` statements of the scope (not of the functions nested in it) whose targets bind `name`."""
    return [
        node for node in _nodes(list(scope.body), prune=_DEFS)
        if isinstance(node, ast.Assign) and any(name in _names(t) for t in node.targets)
    ]


def _names(target: ast.AST) -> Set[str]:
    if isinstance(target, ast.Name):
        return {target.id}
    if isinstance(target, (ast.Tuple, ast.List)):
        return {n for el in target.elts for n in _names(el)}
    return set()


def _leading_dims(expr: ast.expr) -> ast.expr:
    """`x.shape[:2]`: `x.shape`."""
    if isinstance(expr, ast.Subscript) and isinstance(expr.slice, ast.Slice):
        s = expr.slice
        if (s.lower is None or _is_zero(s.lower)) and s.step is None:
            return expr.value
    return expr


def _shape_of(expr: ast.AST) -> bool:
    """`x.shape` or `x.size()`."""
    if isinstance(expr, ast.Attribute):
        return expr.attr == "shape"
    return isinstance(expr, ast.Call) and isinstance(expr.func, ast.Attribute) and expr.func.attr == "size" and not _all_args(expr)


def _fills_rows(body: List[ast.AST], index: str) -> bool:
    """`t[i, n:] = c`, `t[i, :n].fill_(c)`: a constant written into a slice of row `i` (the rule's
    `_RowFills`, whatever bounds the slice)."""
    for stmt in body:
        for node in ast.walk(stmt):
            if isinstance(node, ast.Assign) and _is_constant(node.value):
                if any(_row_of(t, index) for t in node.targets):
                    return True
            elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "fill_":
                if node.args and _is_constant(node.args[0]) and _row_of(node.func.value, index):
                    return True
    return False


def _row_of(target: ast.AST, index: str) -> bool:
    if not (isinstance(target, ast.Subscript) and isinstance(target.value, ast.Name) and isinstance(target.slice, ast.Tuple)):
        return False
    parts = target.slice.elts
    if len(parts) < 2 or not (isinstance(parts[0], ast.Name) and parts[0].id == index):
        return False
    return any(isinstance(p, ast.Slice) for p in parts[1:])


def _strip_conversions(expr: ast.expr) -> ast.expr:
    """`t.cpu().numpy()`, `t.data`: `t` (the rule's `_strip_conversions`)."""
    while True:
        if isinstance(expr, ast.Call) and isinstance(expr.func, ast.Attribute) and expr.func.attr in ("cpu", "numpy", "tolist", "detach", "data") and not _all_args(expr):
            expr = expr.func.value
        elif isinstance(expr, ast.Attribute) and expr.attr == "data":
            expr = expr.value
        else:
            return expr


def _iterated(it: ast.expr, target: Optional[ast.expr]) -> List[ast.expr]:
    """What a loop iterates (the rule's `_unwrap_iteration`): `x`, `enumerate(x)`, `zip(x, y)`."""
    if isinstance(it, (ast.Name, ast.Attribute)):
        return [it]
    if isinstance(it, ast.Call) and _dotted(it.func) == "enumerate":
        args = _all_args(it)
        if not args:
            return []
        inner = target.elts[1] if isinstance(target, ast.Tuple) and len(target.elts) == 2 else None
        return _iterated(args[0], inner) if inner is not None else []
    if isinstance(it, ast.Call) and _dotted(it.func) == "zip":
        return [*(a for a in it.args if not isinstance(a, ast.Starred)), *(k.value for k in it.keywords if k.arg is not None)]
    return []


def _self_tensors(index: _Index) -> Optional[Set[str]]:
    """`self.<name>`s that the data flow may take for a tensor: a registered buffer, or one
    written a value other than a literal or a `torch.nn` container (or bound another way: an
    augmented assignment, a tuple target, a loop or `with` target). None: any of them may be (a
    buffer registered under a name computed at run time)."""
    imports: Optional[Dict[str, Optional[str]]] = None
    maybe: Set[str] = set()
    for node in index.writes:
        if isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for t in targets:
                name = _self_attr(t)
                if name is None:
                    maybe.update(_attrs_inside(t))  # `self.a, self.b = ...`
                elif isinstance(node, ast.AugAssign) or node.value is None:
                    maybe.add(name)
                else:
                    if imports is None:
                        imports = _import_bindings(index)
                    if not _never_tensor(node.value, imports):
                        maybe.add(name)
        elif isinstance(node, (ast.For, ast.AsyncFor, ast.comprehension, ast.NamedExpr)):
            maybe.update(_attrs_inside(node.target))
        elif isinstance(node, ast.withitem):
            if node.optional_vars is not None:
                maybe.update(_attrs_inside(node.optional_vars))
        elif isinstance(node, ast.Call):  # `register_buffer`
            args = _all_args(node)
            if args and isinstance(args[0], ast.Constant) and isinstance(args[0].value, str):
                maybe.add(args[0].value)
            else:
                return None  # a buffer named at run time: any attribute may be one
    return maybe


def _self_attr(node: ast.AST) -> Optional[str]:
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "self":
        return node.attr
    return None


def _attrs_inside(target: ast.AST) -> Iterator[str]:
    for node in _nodes([target]):
        name = _self_attr(node)
        if name is not None:
            yield name


def _never_tensor(value: ast.AST, imports: Dict[str, Optional[str]]) -> bool:
    """A literal, or a call of a `torch.nn` container named through an import."""
    if isinstance(value, _NEVER_TENSORS):
        return True
    if not isinstance(value, ast.Call):
        return False
    name = _dotted(value.func)
    if name is None:
        return False
    root, _, rest = name.partition(".")
    module = imports.get(root)
    if module is None:
        return False
    return (f"{module}.{rest}" if rest else module) in _TORCH_CONTAINERS


def _import_bindings(index: _Index) -> Dict[str, Optional[str]]:
    """Local name -> the module path an import binds it to, for names that only one import
    binds and nothing else does (None: bound more than once, or otherwise too)."""
    out: Dict[str, Optional[str]] = {}

    def bind(name: str, path: Optional[str]) -> None:
        out[name] = path if name not in out else None

    for node in index.binders:
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.asname:
                    bind(a.asname, a.name)
                else:
                    root = a.name.split(".")[0]
                    bind(root, root)
        elif isinstance(node, ast.ImportFrom):
            for a in node.names:
                bind(a.asname or a.name, f"{node.module}.{a.name}" if node.module and not node.level else None)
        elif isinstance(node, ast.Name):
            out[node.id] = None
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            out[node.name] = None
        elif isinstance(node, ast.arg):
            out[node.arg] = None
        elif isinstance(node, ast.ExceptHandler) and node.name:
            out[node.name] = None
    return out
