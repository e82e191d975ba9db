"""SPD501 python-loop-over-batch."""

from __future__ import annotations

import re
from typing import Dict, List, Optional, Set, Tuple

import libcst as cst

from speedlint.analyzer.providers.names import dotted
from speedlint.analyzer.rule import DISPLAY_ONLY, MEDIUM, Fix, Impact, Rule, Status

#: Attributes and methods only tensors (and arrays) have: evidence that a name holds a tensor.
TENSOR_ATTRS = frozenset(
    {
        "size", "shape", "view", "reshape", "unsqueeze", "squeeze", "permute", "transpose", "dim",
        "ndim", "flatten", "contiguous", "numel", "dtype", "device", "float", "half", "bfloat16",
        "long", "int", "cuda", "to", "detach", "masked_fill", "index_select", "gather", "matmul",
        "bmm", "softmax", "log_softmax", "argmax", "expand", "repeat", "chunk", "narrow",
    }
)
#: Calls that only collect or inspect: they are not tensor work per element by themselves.
_NOT_TENSOR_WORK = frozenset(
    {"print", "len", "str", "repr", "int", "float", "bool", "isinstance", "range", "enumerate", "zip",
     "list", "tuple", "dict", "set", "append", "extend", "add", "format", "join", "getattr", "hasattr", "type"}
)
_LIST_ANNOTATION = re.compile(r"\b(List|list|Sequence|Tuple|tuple|Dict|dict|Iterable|Mapping)\b")
_LOSS_FUNCTION = re.compile(r"loss|criterion", re.I)
_SEQUENCE_TYPES = re.compile(r"\b(list|tuple|List|Tuple|Sequence|dict|Mapping)\b")
#: namespaces whose functions return tensors (deeper torch modules may return lists, handles ...)
_TENSOR_MODULES = frozenset({"torch", "torch.nn.functional", "torch.linalg", "torch.fft", "torch.special"})
#: torch functions that return a tuple or list of tensors
_SEQUENCE_RETURNING = frozenset(
    {"split", "chunk", "unbind", "broadcast_tensors", "meshgrid", "tensor_split", "hsplit", "vsplit", "dsplit",
     "sort", "topk", "max", "min", "svd", "qr", "eig", "lstsq", "unique", "where", "nonzero", "load"}
)


class PythonLoopOverBatch(Rule):
    """
    ## What it does
    Flags a Python `for` loop over the batch dimension (`for i in range(x.size(0))`,
    `range(x.shape[0])`, `range(len(x))`, `for sample in x`, `zip(x, y)` where `x` is a tensor)
    that does tensor work per element, inside a model's `forward`, a loss function, or a training
    step. Loops over layers (`for layer in self.layers`), over a small fixed range, over other
    dimensions, recurrences over time steps (a hidden state carried from one iteration to the
    next) and ragged per-sample slicing (`x[i, :lengths[i]]`) are not flagged.

    ## Why is this slow?
    Every iteration launches its own small kernels (and on a GPU, pays the Python and launch
    overhead of each op, a few microseconds each), so the step does `batch_size` times more
    launches with a fraction of the work in each. The device sits idle between them. One batched
    op over the whole tensor does the same math in a handful of launches; on GPUs the speedup is
    often 10-100x for that part of the step.

    ## Example
    ```python
    class Scorer(nn.Module):
        def __init__(self):
            super().__init__()
            self.proj = nn.Linear(64, 64)

        def forward(self, x):
            scores = []
            for i in range(x.size(0)):
                scores.append(self.proj(x[i]).norm())
            return torch.stack(scores)
    ```

    ## Use instead
    ```python
    class Scorer(nn.Module):
        def __init__(self):
            super().__init__()
            self.proj = nn.Linear(64, 64)

        def forward(self, x):
            return self.proj(x).norm(dim=-1)
    ```

    ## Fix safety
    No automatic fix: vectorising needs the batched form of each op (broadcasting, batched
    matrix products such as `torch.bmm`/`torch.einsum`, `dim=` arguments of reductions, masking
    for ragged data, or `torch.vmap` for a per-sample function). The finding is advice only.
    The rule is in preview: whether the iterated value is a batch is inferred from how the file
    uses it.

    ## References
    - PyTorch docs, `torch.vmap` (vectorising a per-sample function)
    """

    code = "SPD501"
    name = "python-loop-over-batch"
    status = Status.PREVIEW
    impact = Impact(
        wastes="Python overhead and kernel launches (one set of small ops per sample)",
        when="always; worst on GPU with large batches",
        typical="10-100x for the looped part of the step",
        evidence="kernel launch overhead of a few microseconds per op",
        level=MEDIUM,
    )
    fixes = (DISPLAY_ONLY,)
    #: the loop must be in a forward, a loss function or a training step (which has a backward)
    triggers = ("forward", "backward", "loss", "criterion")
    ast_precondition = staticmethod(
        lambda facts: facts.has_loop and (facts.may_have_training_step or any(n == "forward" or _LOSS_FUNCTION.search(n) for n in facts.iter_functions))
    )

    def __init__(self, ctx):  # type: ignore[no-untyped-def]
        super().__init__(ctx)
        self._batch_loops: Dict[cst.CSTNode, Optional[str]] = {}

    def visit_For(self, node: cst.For) -> None:
        self._check(node)

    def visit_ListComp(self, node: cst.ListComp) -> None:
        self._check(node)

    def visit_GeneratorExp(self, node: cst.GeneratorExp) -> None:
        self._check(node)

    def _check(self, node: cst.CSTNode) -> None:
        described = self._batch_loop(node)
        if described is None:
            return
        facts = self.ctx.torch
        for a in facts.ancestors(node):
            if isinstance(a, cst.FunctionDef):
                break
            if isinstance(a, (cst.For, cst.ListComp, cst.GeneratorExp)) and self._batch_loop(a) is not None:
                return  # the outer loop is the one to vectorise
        where = self._context(node)
        if where is None:
            return
        self.report(
            node,
            f"Python loop over the batch dimension ({described}) in {where}: tensor ops run once per sample",
            fix=Fix.advice(
                "Vectorise over the batch: apply the ops to the whole tensor (broadcasting, `dim=` "
                "reductions, `torch.bmm`/`einsum`, masking), or `torch.vmap` a per-sample function"
            ),
        )

    # -- context ---------------------------------------------------------------------------
    def _context(self, loop: cst.CSTNode) -> Optional[str]:
        facts = self.ctx.torch
        if loop in facts.step_loops or loop in facts.epoch_loops:
            return None  # the training loop itself (e.g. per-sample SGD), not a batch loop
        fn = facts.enclosing_function(loop)
        if fn is not None and fn in facts.forward_functions:
            return "`forward`"
        if fn is not None and _LOSS_FUNCTION.search(fn.name.value):
            return f"the loss function `{fn.name.value}`"
        if facts.in_training_step(loop):
            return "a training step"
        return None

    # -- is it a loop over the batch? ------------------------------------------------------
    def _batch_loop(self, loop: cst.CSTNode) -> Optional[str]:
        if loop not in self._batch_loops:
            self._batch_loops[loop] = self._describe(loop)
        return self._batch_loops[loop]

    def _describe(self, loop: cst.CSTNode) -> Optional[str]:
        fn = self.ctx.torch.enclosing_function(loop)
        if fn is None:
            return None
        parts = _loop_parts(loop)
        if parts is None:
            return None
        it, loop_target, body = parts
        index: Optional[str] = None
        element: Set[str] = set()
        described: Optional[str] = None
        if isinstance(it, cst.Call) and dotted(it.func) == "range":
            args = [a for a in it.args if a.keyword is None]
            if len(args) == 2 and isinstance(args[0].value, cst.Integer) and args[0].value.value == "0":
                args = args[1:]
            if len(args) != 1 or not isinstance(loop_target, cst.Name):
                return None
            tensor = self._batch_size_of(args[0].value, fn, loop)
            if tensor is None:
                return None
            index = loop_target.value
            described = f"`{self.ctx.code(it)}`"
        else:
            iterated, targets = _unwrap_iteration(it, loop_target)
            if not iterated:
                return None
            for expr, target in zip(iterated, targets):
                if isinstance(expr, cst.Name) and self._is_tensor(expr.value, fn):
                    if target is not None:
                        element |= _names(target)
                    described = described or f"over `{expr.value}`"
            if described is None:
                return None
            if isinstance(it, cst.Call) and dotted(it.func) == "enumerate" and isinstance(loop_target, cst.Tuple):
                first = loop_target.elements[0].value
                if isinstance(first, cst.Name):
                    index = first.value
        if isinstance(loop, cst.For) and self._recurrent(loop, fn):
            return None
        if self._ragged(body, index, element):
            return None
        if not self._tensor_work(body, index, element):
            return None
        return described

    def _batch_size_of(self, expr: cst.BaseExpression, fn: cst.FunctionDef, loop: cst.CSTNode, depth: int = 0) -> Optional[str]:
        """The tensor whose first dimension `expr` is: `x.size(0)`, `x.shape[0]`, `len(x)`, `B` with `B = x.size(0)`."""
        if isinstance(expr, cst.Call):
            func = expr.func
            if isinstance(func, cst.Attribute) and func.attr.value == "size" and len(expr.args) == 1:
                if _is_zero(expr.args[0].value) and isinstance(func.value, cst.Name):
                    return func.value.value
                return None
            if dotted(func) == "len" and len(expr.args) == 1 and isinstance(expr.args[0].value, cst.Name):
                name = expr.args[0].value.value
                return name if self._is_tensor(name, fn) else None
            return None
        if isinstance(expr, cst.Subscript) and len(expr.slice) == 1 and isinstance(expr.slice[0].slice, cst.Index):
            if not _is_zero(expr.slice[0].slice.value):
                return None
            base = expr.value
            if isinstance(base, cst.Attribute) and base.attr.value == "shape" and isinstance(base.value, cst.Name):
                return base.value.value
            if isinstance(base, cst.Call) and isinstance(base.func, cst.Attribute) and base.func.attr.value == "size":
                if not base.args and isinstance(base.func.value, cst.Name):
                    return base.func.value.value
            return None
        if isinstance(expr, cst.Name) and depth == 0:
            return self._batch_size_name(expr.value, fn, loop)
        return None

    def _batch_size_name(self, name: str, fn: cst.FunctionDef, loop: cst.CSTNode) -> Optional[str]:
        """`B` bound once in the function from a batch size: `B = x.size(0)`, `B, C, H, W = x.shape`."""
        found: List[Optional[str]] = []
        for stmt in _assignments(fn, name):
            if len(stmt.targets) != 1:
                return None
            target = stmt.targets[0].target
            if isinstance(target, cst.Name):
                found.append(self._batch_size_of(stmt.value, fn, loop, depth=1))
            elif isinstance(target, (cst.Tuple, cst.List)) and target.elements:
                first = target.elements[0].value
                value = stmt.value
                is_shape = (isinstance(value, cst.Attribute) and value.attr.value == "shape") or (
                    isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute)
                    and value.func.attr.value == "size" and not value.args
                )
                if isinstance(first, cst.Name) and first.value == name and is_shape:
                    base = value.value if isinstance(value, cst.Attribute) else value.func.value  # type: ignore[union-attr]
                    found.append(base.value if isinstance(base, cst.Name) else None)
                else:
                    return None
            else:
                return None
        if len(found) == 1 and found[0] is not None:
            return found[0]
        return None

    def _is_tensor(self, name: str, fn: cst.FunctionDef) -> bool:
        """The function uses `name` as a tensor (`x.size(0)`, `x.to(device)`, `x: Tensor`)."""
        star = fn.params.star_arg
        if isinstance(star, cst.Param) and star.name.value == name:
            return False  # `*inputs`: a tuple
        for p in (*fn.params.posonly_params, *fn.params.params, *fn.params.kwonly_params):
            if p.name.value == name and p.annotation is not None:
                text = self.ctx.code(p.annotation.annotation)
                if _LIST_ANNOTATION.search(text):
                    return False
                if "Tensor" in text or "ndarray" in text:
                    return True
        finder = _TensorUse(self.ctx, name)
        fn.body.visit(finder)
        return finder.found and not finder.sequence

    # -- exclusions ------------------------------------------------------------------------
    def _recurrent(self, loop: cst.For, fn: cst.FunctionDef) -> bool:
        """A value carried from one iteration to the next (`h = cell(x[t], h)`): a recurrence."""
        facts = self.ctx.torch
        collector = _Flow()
        loop.body.visit(collector)
        for name, stmts in collector.assigned.items():
            first = min(stmts, key=lambda s: facts.order.get(s, 0))
            if _is_reduction(first, name):
                continue
            for read in collector.reads.get(name, ()):
                in_value = any(a is first for a in facts.ancestors(read))
                if in_value or facts.order.get(read, 0) < facts.order.get(first, 0):
                    return True
        return False

    def _ragged(self, body: cst.CSTNode, index: Optional[str], element: Set[str]) -> bool:
        """Per-sample slice bounds (`x[i, :lengths[i]]`): ragged data, not a plain batch loop."""
        names = ({index} if index else set()) | element
        finder = _RaggedSlice(names)
        body.visit(finder)
        return finder.found

    def _tensor_work(self, body: cst.CSTNode, index: Optional[str], element: Set[str]) -> bool:
        finder = _PerElementWork(self.ctx, index, element)
        body.visit(finder)
        return finder.found


# -- helpers ---------------------------------------------------------------------------------
def _loop_parts(loop: cst.CSTNode) -> Optional[Tuple[cst.BaseExpression, cst.BaseExpression, cst.CSTNode]]:
    """(iterable, target, per-iteration part) of a `for` statement or a single-`for` comprehension."""
    if isinstance(loop, cst.For):
        return loop.iter, loop.target, loop.body
    if isinstance(loop, (cst.ListComp, cst.GeneratorExp)):
        comp = loop.for_in
        if comp.inner_for_in is not None or comp.ifs:
            return None
        return comp.iter, comp.target, loop.elt
    return None


def _is_zero(expr: cst.BaseExpression) -> bool:
    return isinstance(expr, cst.Integer) and expr.value == "0"


def _names(target: cst.BaseExpression) -> Set[str]:
    if isinstance(target, cst.Name):
        return {target.value}
    if isinstance(target, (cst.Tuple, cst.List)):
        out: Set[str] = set()
        for el in target.elements:
            out |= _names(el.value)
        return out
    return set()


def _unwrap_iteration(
    it: cst.BaseExpression, target: cst.BaseExpression
) -> Tuple[List[cst.BaseExpression], List[Optional[cst.BaseExpression]]]:
    """What a `for` iterates and the target bound to each: `x`, `enumerate(x)`, `zip(x, y)`."""
    if isinstance(it, cst.Name):
        return [it], [target]
    if isinstance(it, cst.Call) and dotted(it.func) == "enumerate" and it.args:
        inner = target.elements[1].value if isinstance(target, cst.Tuple) and len(target.elements) == 2 else None
        return _unwrap_iteration(it.args[0].value, inner) if inner is not None else ([], [])
    if isinstance(it, cst.Call) and dotted(it.func) == "zip":
        exprs = [a.value for a in it.args if not a.star]
        if isinstance(target, cst.Tuple) and len(target.elements) == len(exprs):
            return exprs, [el.value for el in target.elements]
        return exprs, [None] * len(exprs)
    return [], []


def _assignments(fn: cst.FunctionDef, name: str) -> List[cst.Assign]:
    finder = _AssignFinder(name)
    fn.body.visit(finder)
    return finder.found


def _is_reduction(stmt: cst.CSTNode, name: str) -> bool:
    """`total = total + term` (an accumulation, vectorisable as a sum)."""
    if isinstance(stmt, cst.Assign) and isinstance(stmt.value, cst.BinaryOperation):
        left = stmt.value.left
        return isinstance(left, cst.Name) and left.value == name and isinstance(stmt.value.operator, (cst.Add, cst.Subtract))
    return False


class _AssignFinder(cst.CSTVisitor):
    def __init__(self, name: str) -> None:
        super().__init__()
        self.name = name
        self.found: List[cst.Assign] = []

    def visit_Assign(self, node: cst.Assign) -> None:
        if any(self.name in _names(t.target) for t in node.targets):
            self.found.append(node)

    def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
        return False


class _Flow(cst.CSTVisitor):
    """Plain assignments and reads of local names in a loop body."""

    def __init__(self) -> None:
        super().__init__()
        self.assigned: Dict[str, List[cst.CSTNode]] = {}
        self.reads: Dict[str, List[cst.Name]] = {}
        self._targets: Set[int] = set()

    def visit_Assign(self, node: cst.Assign) -> None:
        for t in node.targets:
            for name in _names(t.target):
                self.assigned.setdefault(name, []).append(node)
            self._mark(t.target)

    def visit_AugAssign(self, node: cst.AugAssign) -> None:
        self._mark(node.target)  # `loss += term`: a reduction, not a recurrence

    def visit_For(self, node: cst.For) -> None:
        self._mark(node.target)

    def _mark(self, target: cst.BaseExpression) -> None:
        if isinstance(target, cst.Name):
            self._targets.add(id(target))
        elif isinstance(target, (cst.Tuple, cst.List)):
            for el in target.elements:
                self._mark(el.value)

    def visit_Attribute(self, node: cst.Attribute) -> bool:
        node.value.visit(self)
        return False

    def visit_Arg(self, node: cst.Arg) -> bool:
        node.value.visit(self)
        return False

    def visit_Name(self, node: cst.Name) -> None:
        if id(node) not in self._targets:
            self.reads.setdefault(node.value, []).append(node)


class _TensorUse(cst.CSTVisitor):
    def __init__(self, ctx, name: str) -> None:  # type: ignore[no-untyped-def]
        super().__init__()
        self.ctx = ctx
        self.name = name
        self.found = False
        self.sequence = False  # evidence that it is a list/tuple: `isinstance(x, list)`, `x = (a, b)`

    def visit_Attribute(self, node: cst.Attribute) -> None:
        if isinstance(node.value, cst.Name) and node.value.value == self.name and node.attr.value in TENSOR_ATTRS:
            self.found = True

    def visit_Call(self, node: cst.Call) -> None:
        if dotted(node.func) == "isinstance" and len(node.args) == 2:
            first, kinds = node.args[0].value, node.args[1].value
            if isinstance(first, cst.Name) and first.value == self.name and _SEQUENCE_TYPES.search(self.ctx.code(kinds)):
                self.sequence = True

    def visit_Assign(self, node: cst.Assign) -> None:
        for t in node.targets:
            self._bound(t.target, node.value)

    def _bound(self, target: cst.BaseExpression, value: cst.BaseExpression) -> None:
        if isinstance(target, (cst.Tuple, cst.List)):
            if isinstance(value, (cst.Tuple, cst.List)) and len(value.elements) == len(target.elements):
                for t, v in zip(target.elements, value.elements):
                    self._bound(t.value, v.value)
            return
        if not (isinstance(target, cst.Name) and target.value == self.name):
            return
        if isinstance(value, (cst.Tuple, cst.List, cst.ListComp, cst.GeneratorExp, cst.Dict, cst.DictComp, cst.Set)):
            self.sequence = True
        elif isinstance(value, cst.Call):
            callee = dotted(value.func) or ""
            q = self.ctx.qualname(value.func) or ""
            if callee in ("tuple", "list", "dict", "zip", "map", "sorted", "reversed"):
                self.sequence = True
            else:
                module, _, fname = q.rpartition(".")
                if module in _TENSOR_MODULES and fname not in _SEQUENCE_RETURNING:
                    self.found = True


class _RaggedSlice(cst.CSTVisitor):
    def __init__(self, names: Set[str]) -> None:
        super().__init__()
        self.names = names
        self.found = False

    def visit_Slice(self, node: cst.Slice) -> None:
        for bound in (node.lower, node.upper):
            if bound is not None and _mentions(bound, self.names):
                if not _is_index_plus_const(bound, self.names):
                    self.found = True


def _mentions(expr: cst.CSTNode, names: Set[str]) -> bool:
    finder = _NameFinder(names)
    expr.visit(finder)
    return finder.found


def _is_index_plus_const(expr: cst.BaseExpression, names: Set[str]) -> bool:
    """`i` or `i + 1`: a one-sample slice `x[i : i + 1]`, not a ragged bound."""
    if isinstance(expr, cst.Name):
        return expr.value in names
    if isinstance(expr, cst.BinaryOperation) and isinstance(expr.operator, (cst.Add, cst.Subtract)):
        return isinstance(expr.left, cst.Name) and expr.left.value in names and isinstance(expr.right, cst.Integer)
    return False


class _NameFinder(cst.CSTVisitor):
    def __init__(self, names: Set[str]) -> None:
        super().__init__()
        self.names = names
        self.found = False

    def visit_Name(self, node: cst.Name) -> None:
        if node.value in self.names:
            self.found = True


class _PerElementWork(cst.CSTVisitor):
    """Tensor work on one element: `f(x[i])`, `x[i].sum()`, `xi @ w`, `x[i] * 2` (not `print(i)`)."""

    def __init__(self, ctx, index: Optional[str], element: Set[str]) -> None:  # type: ignore[no-untyped-def]
        super().__init__()
        self.ctx = ctx
        self.index = index
        self.element = element
        self.found = False

    def _elementy(self, expr: cst.CSTNode) -> bool:
        finder = _ElementFinder(self.index, self.element)
        expr.visit(finder)
        return finder.found

    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        short = func.attr.value if isinstance(func, cst.Attribute) else dotted(func) or ""
        if short in _NOT_TENSOR_WORK:
            return
        if any(self._elementy(a.value) for a in node.args) or (
            isinstance(func, cst.Attribute) and self._elementy(func.value)
        ):
            self.found = True

    def visit_BinaryOperation(self, node: cst.BinaryOperation) -> None:
        if self._elementy(node.left) or self._elementy(node.right):
            self.found = True


class _ElementFinder(cst.CSTVisitor):
    """The element itself, or a subscript by the loop index (`x[i]`, `x[i, :]`)."""

    def __init__(self, index: Optional[str], element: Set[str]) -> None:
        super().__init__()
        self.index = index
        self.element = element
        self.found = False

    def visit_Name(self, node: cst.Name) -> None:
        if node.value in self.element:
            self.found = True

    def visit_Subscript(self, node: cst.Subscript) -> None:
        if self.index and any(_mentions(el, {self.index}) for el in node.slice):
            self.found = True
