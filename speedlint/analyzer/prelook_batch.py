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

`batch_loop_candidates` answers, from one walk of the `ast`, whether some loop has such a shape
anywhere in the file, and whether one does in model code. Every test here admits at least what
the rule admits (it over-approximates: a name is always taken as a possible tensor), with one
exception that is decided exactly as the rule's data flow decides it: `self.layers` is not a
tensor when every `self.layers = ...` in the file is a literal or a `torch.nn` container
(`nn.ModuleList(...)`, `nn.Sequential(...)` ...) and no buffer is registered under that name. That
exception is what spares model files whose loops all run over their layers.
"""

from __future__ import annotations

import ast
from typing import Dict, Iterator, List, Optional, Set, Tuple

from speedlint.analyzer.vocabulary import BATCH_SIZE_NAMES, LOSS_FUNCTION, TENSOR_ATTRS
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

_Loop = Tuple[ast.AST, ast.AST, ast.AST, List[ast.AST]]  # the loop, its iterable, its target, its body


def batch_loop_candidates(tree: ast.Module, text: Optional[str]) -> Tuple[bool, bool]:
    """(a loop anywhere in the file may run over a batch, one in model code may); `text`: the
    source (None: not at hand)."""
    shapes = _Shapes(tree, text)
    anywhere = any(shapes.may_loop_over_batch(loop) for loop in _loops(tree))
    if not anywhere:
        return False, False
    return True, any(shapes.may_loop_over_batch(loop) for fn in _model_functions(tree) for loop in _loops(fn))


def _loops(tree: ast.AST) -> Iterator[_Loop]:
    """The loops the rule looks at: `for` statements and single-`for` list comprehensions and
    generator expressions without conditions."""
    for node in ast.walk(tree):
        if isinstance(node, (ast.For, ast.AsyncFor)):
            yield node, node.iter, node.target, node.body
        elif isinstance(node, (ast.ListComp, ast.GeneratorExp)) and len(node.generators) == 1 and not node.generators[0].ifs:
            comp = node.generators[0]
            yield node, comp.iter, comp.target, [node.elt]


def _model_functions(tree: ast.Module) -> List[ast.AST]:
    """The functions named `forward` or like a loss, and every function they may call in the file
    (by name: `f(...)`, `x.f(...)`, a class's `__init__` for `C(...)`), nested ones included."""
    by_name: Dict[str, List[ast.AST]] = {}
    classes: Set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            by_name.setdefault(node.name, []).append(node)
        elif isinstance(node, ast.ClassDef):
            classes.add(node.name)
    todo = [fn for name, fns in by_name.items() if name == "forward" or LOSS_FUNCTION.search(name) for fn in fns]
    seen: Dict[int, ast.AST] = {}
    while todo:
        fn = todo.pop()
        if id(fn) in seen:
            continue
        seen[id(fn)] = fn
        for node in ast.walk(fn):
            if isinstance(node, ast.Call):
                func = node.func
                name = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else None
                if name is not None:
                    todo.extend(by_name.get(name, ()))
                    if name in classes:
                        todo.extend(by_name.get("__init__", ()))
    return list(seen.values())


def _is_zero(node: Optional[ast.AST]) -> bool:
    return isinstance(node, ast.Constant) and type(node.value) is int and node.value == 0


def _is_constant(node: ast.AST) -> bool:
    """What the rule's `_is_constant` accepts: a number, True/False/None, or a negated one."""
    if isinstance(node, ast.UnaryOp):
        return _is_constant(node.operand)
    return isinstance(node, ast.Constant) and (node.value is None or type(node.value) in (bool, int, float))


def _positional(call: ast.Call) -> List[ast.AST]:
    """The arguments LibCST counts as positional: `*a` and `**kw` included."""
    return [*call.args, *(k.value for k in call.keywords if k.arg is None)]


def _all_args(call: ast.Call) -> List[ast.AST]:
    return [*call.args, *(k.value for k in call.keywords)]


class _Shapes:
    """The loop shapes of one file (see the module docstring)."""

    def __init__(self, tree: ast.Module, text: Optional[str]) -> None:
        self.text = text
        self._tree = tree
        self._layers: Optional[Set[str]] = None

    def may_loop_over_batch(self, loop: _Loop) -> bool:
        _, it, target, body = loop
        if isinstance(it, ast.Call) and _dotted(it.func) == "range":
            args = _positional(it)
            if len(args) == 2 and _is_zero(args[0]):
                args = args[1:]
            if len(args) != 1 or not isinstance(target, ast.Name):
                return False
            return _may_be_batch_size(args[0]) or _fills_rows(body, target.id)
        if self._may_iterate_unique(it):
            return True
        if any(self._may_be_tensor(e) for e in _iterated(it, target)):
            return True
        if isinstance(it, ast.Call) and _dotted(it.func) == "enumerate" and isinstance(target, ast.Tuple) and target.elts:
            first = target.elts[0]
            return isinstance(first, ast.Name) and _fills_rows(body, first.id)
        return False

    def _may_iterate_unique(self, it: ast.AST) -> bool:
        """`x.unique()`, `torch.unique(x)`, `np.unique(x.cpu())` (also under `.tolist()` ...):
        any call, when the file says `unique` at all (an alias may name it)."""
        return isinstance(_strip_conversions(it), ast.Call) and (self.text is None or "unique" in self.text)

    def _may_be_tensor(self, expr: ast.AST) -> bool:
        if isinstance(expr, ast.Attribute) and isinstance(expr.value, ast.Name) and expr.value.id == "self":
            return expr.attr in TENSOR_ATTRS or expr.attr not in self.layers()
        return True

    def layers(self) -> Set[str]:
        """The `self.<name>`s that are never tensors (see the module docstring)."""
        if self._layers is None:
            self._layers = _never_tensor_attrs(self._tree)
        return self._layers


def _may_be_batch_size(expr: ast.AST) -> bool:
    """What the rule's `_batch_size_of` may accept (a name may be bound to a batch size)."""
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
    return isinstance(expr, ast.Name)


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


def _strip_conversions(expr: ast.AST) -> ast.AST:
    """`t.cpu().numpy()`, `t.data`: `t` (the rule's `_strip_conversions`)."""
    while True:
        if isinstance(expr, ast.Call) and isinstance(expr.func, ast.Attribute) and expr.func.attr in ("cpu", "numpy", "tolist", "detach", "data") and not _all_args(expr):
            expr = expr.func.value
        elif isinstance(expr, ast.Attribute) and expr.attr == "data":
            expr = expr.value
        else:
            return expr


def _iterated(it: ast.AST, target: Optional[ast.AST]) -> List[ast.AST]:
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


def _never_tensor_attrs(tree: ast.Module) -> Set[str]:
    """`self.<name>`s that the data flow never takes for a tensor: no buffer of that name, and
    every value written to it anywhere in the file is a literal or a `torch.nn` container (a
    written name also bound another way, or in a tuple, counts as a possible tensor)."""
    imports = _import_bindings(tree)
    maybe: Set[str] = set()
    seen: Set[str] = set()
    buffers_unknown = False
    for node in ast.walk(tree):
        if isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for t in targets:
                if _self_attr(t) is not None:
                    name = _self_attr(t)
                    seen.add(name)  # type: ignore[arg-type]
                    if isinstance(node, ast.AugAssign) or node.value is None or not _never_tensor(node.value, imports):
                        maybe.add(name)  # type: ignore[arg-type]
                else:
                    maybe.update(n for n in _attrs_inside(t))  # `self.a, self.b = ...`
        elif isinstance(node, (ast.For, ast.AsyncFor, ast.comprehension)):
            maybe.update(_attrs_inside(node.target))
        elif isinstance(node, ast.withitem) and node.optional_vars is not None:
            maybe.update(_attrs_inside(node.optional_vars))
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "register_buffer":
            args = _all_args(node)
            if args and isinstance(args[0], ast.Constant) and isinstance(args[0].value, str):
                maybe.add(args[0].value)
            else:
                buffers_unknown = True
    if buffers_unknown:
        return set()
    return {name for name in seen if name not in maybe}


def _self_attr(node: ast.AST) -> Optional[str]:
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "self":
        return node.attr
    return None


def _attrs_inside(target: ast.AST) -> Iterator[str]:
    for node in ast.walk(target):
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


def _import_bindings(tree: ast.Module) -> Dict[str, Optional[str]]:
    """Local name -> the module path an import binds it to, for names that only one import
    binds and nothing else does (None: bound more than once, or otherwise too)."""
    out: Dict[str, Optional[str]] = {}

    def bind(name: str, path: Optional[str]) -> None:
        out[name] = path if name not in out else None

    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.asname:
                    bind(a.asname, a.name)
                else:
                    root = a.name.split(".")[0]
                    bind(root, root)
        elif isinstance(node, ast.ImportFrom):
            for a in node.names:
                local = a.asname or a.name
                bind(local, f"{node.module}.{a.name}" if node.module and not node.level else None)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            out[node.id] = None
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            out[node.name] = None
        elif isinstance(node, ast.arg):
            out[node.arg] = None
        elif isinstance(node, ast.ExceptHandler) and node.name:
            out[node.name] = None
    return out
