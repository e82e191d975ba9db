"""SPD501 python-loop-over-batch."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Dict, List, Optional, Set, Tuple, Union, cast

import libcst as cst

from speedlint.analyzer.providers.narrowing import known_not_tensor
from speedlint.analyzer.providers.flow import flow
from speedlint.analyzer.providers.hot import hook_of
from speedlint.analyzer.providers.names import dotted
from speedlint.analyzer.rule import DISPLAY_ONLY, LOW, MEDIUM, Fix, Impact, Rule, Status
from speedlint.analyzer.vocabulary import BATCH_SIZE_NAMES, LOSS_FUNCTION, SEQUENCE_ANNOTATION
from speedlint.analyzer.providers import walk

if TYPE_CHECKING:  # pragma: no cover
    from speedlint.analyzer.context import FileContext

#: Attributes and methods only tensors (and arrays) have: evidence that a name holds a tensor.
TENSOR_ATTRS = frozenset(
    {
        "size", "shape", "view", "reshape", "unsqueeze", "squeeze", "permute", "transpose", "dim",
        "ndim", "flatten", "contiguous", "numel", "dtype", "device", "float", "half", "bfloat16",
        "long", "int", "cuda", "to", "detach", "masked_fill", "index_select", "gather", "matmul",
        "bmm", "softmax", "log_softmax", "argmax", "expand", "repeat", "chunk", "narrow", "clone",
        "is_cuda",
    }
)
#: Calls that only collect or inspect: they are not tensor work per element by themselves.
_NOT_TENSOR_WORK = frozenset(
    {"print", "len", "str", "repr", "int", "float", "bool", "isinstance", "range", "enumerate", "zip",
     "list", "tuple", "dict", "set", "append", "extend", "add", "format", "join", "getattr", "hasattr", "type"}
)
_SEQUENCE_TYPES = re.compile(r"\b(list|tuple|List|Tuple|Sequence|dict|Mapping)\b")
#: A parameter's type as its docstring writes it (Google `x (torch.Tensor): ...`, reST `:type x: ...`,
#: numpy `x : Tensor`): `{name}` is filled in.
_DOC_TYPES = (
    r"^\s*\**{name}\s*\(([^)\n]*)\)\s*:",
    r":type\s+{name}\s*:\s*([^\n]+)",
    r":param\s+([\w.\[\], ]+?)\s+{name}\s*:",
    r"^\s*{name}\s+:\s+([^\n]+)",
)
_DOC_TENSOR = re.compile(r"\b(\w*Tensor|ndarray)\b")
_DOC_SEQUENCE = re.compile(r"\b(list|tuple|sequence|iterable|dict)\b|\[", re.I)
#: namespaces whose functions return tensors (deeper torch modules may return lists, handles ...)
_TENSOR_MODULES = frozenset({"torch", "torch.nn.functional", "torch.linalg", "torch.fft", "torch.special"})
#: torch functions that return a tuple or list of tensors
_SEQUENCE_RETURNING = frozenset(
    {"split", "chunk", "unbind", "broadcast_tensors", "meshgrid", "tensor_split", "hsplit", "vsplit", "dsplit",
     "sort", "topk", "max", "min", "svd", "qr", "eig", "lstsq", "unique", "where", "nonzero", "load"}
)
#: Calls that give back the distinct values of a tensor or array: a loop over them visits the
#: classes (speakers, labels ...) present in the batch.
_UNIQUE = frozenset({"torch.unique", "numpy.unique"})
#: A literal sequence this short is a fixed handful of items (channels, levels), not a batch.
_FEW = 8
#: Conversions around an iterated value that keep what it holds (`np.unique(t.cpu())`).
_CONVERSIONS = frozenset({"cpu", "numpy", "tolist", "detach", "data"})

Scope = Union[cst.FunctionDef, cst.Module]
#: `_batch_size_of`: a value named the batch size (no tensor to read it from).
NAMED = "named"

#: What kind of loop over the batch, for the advice.
RANGE, ITEMS, VALUES, ROWS = "range", "items", "values", "rows"
_ADVICE = {
    RANGE: "Vectorise over the batch: apply the ops to the whole tensor (broadcasting, `dim=` "
           "reductions, `torch.bmm`/`einsum`, `gather` for per-sample windows, masking), or `torch.vmap` "
           "a per-sample function",
    ITEMS: "Vectorise over the batch: apply the ops to the whole tensor (broadcasting, `dim=` "
           "reductions, `torch.bmm`/`einsum`, masking), or `torch.vmap` a per-sample function",
    VALUES: "Compute the per-class results in one pass (`torch.bincount`, `scatter_add_`/`index_add_` "
            "over the labels, or a one-hot matrix product) instead of one masked selection per value",
    ROWS: "Build the whole mask or target at once from the lengths: `torch.arange(T) >= lengths[:, None]` "
          "(or `< lengths[:, None]`), then one masked fill",
}


_WHAT_RUNS = {
    RANGE: "tensor ops run once per sample",
    ITEMS: "tensor ops run once per sample",
    VALUES: "a masked selection and its tensor ops run once per value",
    ROWS: "one small write per sample instead of one masked fill",
}


class PythonLoopOverBatch(Rule):
    """
    ## What it does
    Flags a Python `for` loop over the elements of a batch that does tensor work per element,
    inside a model's `forward`, a loss function (and what they call), a training step or, at low
    impact, an evaluation loop: `for i in range(x.size(0))`, `range(x.shape[0])`, `range(len(x))`,
    `range(batch_size)`, `for sample in x`, `zip(x, y)` where `x` is a tensor (known from how the
    code uses it, its annotation or its docstring type), a loop over the classes present in a batch
    (`for c in torch.unique(labels)` with a masked selection per class), and a mask or target built
    row by row from per-sample lengths (`for i, n in enumerate(lengths): mask[i, n:] = 0`).

    Not flagged: loops over layers (`for layer in self.layers`), over a small fixed range, over
    other dimensions (time steps, `range(x.size(1))`), over node or edge types, recurrences (a
    value carried from one iteration to the next, such as a hidden state or a decoder input),
    ragged per-sample reductions (`x[i, :lengths[i]].mean()`), collate functions and dataset code
    (per-sample by design), and the training loop itself.

    ## Why is this slow?
    Every iteration launches its own small kernels (and on a GPU, pays the Python and launch
    overhead of each op, a few microseconds each), so the step does `batch_size` times more
    launches with a fraction of the work in each. The device sits idle between them. One batched
    op over the whole tensor does the same math in a handful of launches; on GPUs the speedup is
    often 10-100x for that part of the step. Per-element `.item()` calls or boolean-mask selections
    add a host-device sync each. On the host (NumPy arrays, CPU tensors) the cost is the Python
    overhead per element, small for small batches.

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
    matrix products such as `torch.bmm`/`torch.einsum`, `dim=` arguments of reductions, `gather`
    for per-sample windows, masking for ragged data, `bincount`/`scatter_add_` for per-class
    sums, or `torch.vmap` for a per-sample function). The finding is advice only: whether the
    iterated value is a batch is inferred from how the code uses it.

    ## References
    - PyTorch docs, `torch.vmap` (vectorising a per-sample function)
    """

    code = "SPD501"
    name = "python-loop-over-batch"
    status = Status.STABLE
    impact = Impact(
        wastes="Python overhead and kernel launches (one set of small ops per sample)",
        when="always; worst on GPU with large batches",
        typical="10-100x for the looped part of the step",
        evidence="kernel launch overhead of a few microseconds per op",
        level=MEDIUM,
    )
    #: in an evaluation loop: once per evaluation batch, not per training step
    eval_impact = impact.with_level(LOW, when="evaluation only; worst on GPU with large batches")
    fixes = (DISPLAY_ONLY,)
    #: a `for` loop or comprehension (where it runs is decided by the program, not the text)
    triggers = ("for",)
    #: a loop shaped like a loop over the batch (`prelook_batch`) where it may run hot: anywhere in
    #: a file that may hold a training step, an evaluation loop or a hook, else in model code
    ast_precondition = staticmethod(
        lambda facts: facts.has_loop and (
            facts.may_loop_over_batch(everywhere=True)
            if facts.may_have_training_step or facts.may_have_eval_loop or facts.may_have_hook
            else any(n == "forward" or LOSS_FUNCTION.search(n) for n in facts.functions) and facts.may_loop_over_batch(everywhere=False)
        )
    )

    def __init__(self, ctx: FileContext) -> None:
        super().__init__(ctx)
        self._batch_loops: Dict[cst.CSTNode, Optional[Tuple[str, str, bool]]] = {}
        self._model_functions: Optional[Set[cst.FunctionDef]] = None

    def visit_For(self, node: cst.For) -> None:
        self._check(node)

    def visit_ListComp(self, node: cst.ListComp) -> None:
        self._check(node)

    def visit_GeneratorExp(self, node: cst.GeneratorExp) -> None:
        self._check(node)

    def _check(self, node: cst.CSTNode) -> None:
        where = self._context(node)
        if where is None:
            return
        described = self._batch_loop(node)
        if described is None:
            return
        facts = self.ctx.torch
        for a in facts.ancestors(node):
            if isinstance(a, cst.FunctionDef):
                break
            if isinstance(a, (cst.For, cst.ListComp, cst.GeneratorExp)) and self._batch_loop(a) is not None:
                return  # the outer loop is the one to vectorise
        text, kind, on_device = described
        place, impact = where
        if impact is self.eval_impact and not on_device:
            return  # host-side metric code once per evaluation batch: Python overhead only
        self.report(
            node,
            f"Python loop over the batch ({text}) in {place}: {_WHAT_RUNS[kind]}",
            fix=Fix.advice(_ADVICE[kind]),
            impact=impact,
        )

    # -- context ---------------------------------------------------------------------------
    def _context(self, loop: cst.CSTNode) -> Optional[Tuple[str, Impact]]:
        facts = self.ctx.torch
        if loop in facts.step_loops or loop in facts.epoch_loops or loop in facts.run_loops or loop in facts.eval_loops:
            return None  # the training / evaluation loop itself (e.g. per-sample SGD), not a batch loop
        if facts.sample_function_of(loop) is not None:
            return None  # dataset and collate code: per sample by design
        if facts.in_training_step(loop) or hook_of(self.ctx, loop) == "step":
            return "a training step", self.impact
        fn = facts.enclosing_function(loop)
        if fn is not None:
            if fn in facts.forward_functions:
                return "`forward`", self.impact
            if LOSS_FUNCTION.search(fn.name.value):
                return f"the loss function `{fn.name.value}`", self.impact
            if fn in self._called_by_model():
                return f"`{fn.name.value}` (called from a `forward` or a loss function)", self.impact
        if facts.eval_loop_of(loop) is not None or facts.eval_function_of(loop) is not None or hook_of(self.ctx, loop) == "eval":
            return "an evaluation loop", self.eval_impact
        return None

    def _called_by_model(self) -> Set[cst.FunctionDef]:
        """Same-file functions a `forward` or a loss function runs."""
        if self._model_functions is None:
            facts = self.ctx.torch
            roots = set(facts.forward_functions) | {fn for fn in facts.all_functions if LOSS_FUNCTION.search(fn.name.value)}
            self._model_functions = facts.callees_closure(roots)
        return self._model_functions

    # -- is it a loop over the batch? ------------------------------------------------------
    def _batch_loop(self, loop: cst.CSTNode) -> Optional[Tuple[str, str, bool]]:
        if loop not in self._batch_loops:
            self._batch_loops[loop] = self._describe(loop)
        return self._batch_loops[loop]

    def _describe(self, loop: cst.CSTNode) -> Optional[Tuple[str, str, bool]]:
        """(how the loop reads in the message, its kind, whether the per-element work may touch
        device tensors) when it runs over the batch's elements doing tensor work on each; None
        otherwise."""
        scope: Scope = self.ctx.torch.enclosing_function(loop) or self.ctx.module
        parts = _loop_parts(loop)
        if parts is None:
            return None
        it, loop_target, body = parts
        index: Optional[str] = None
        element: Set[str] = set()
        found: Optional[Tuple[str, str]] = None
        sources: List[cst.BaseExpression] = []  # what the elements are read from
        if isinstance(it, cst.Call) and dotted(it.func) == "range":
            args = [a for a in it.args if a.keyword is None]
            if len(args) == 2 and _is_zero(args[0].value):
                args = args[1:]
            if len(args) != 1 or not isinstance(loop_target, cst.Name):
                return None
            index = loop_target.value
            batch = self._batch_size_of(args[0].value, scope)
            if batch is not None:
                found = (f"`{self.ctx.code(it)}`", RANGE)
                if batch is not NAMED:
                    sources.append(cast(cst.BaseExpression, batch))  # (the only string it returns is NAMED)
        else:
            values = self._unique_of(it, scope)
            if values is not None:
                element |= _names(loop_target)
                sources.append(values)
                found = (f"over the values present in `{self.ctx.code(values)}`", VALUES)
            else:
                iterated, targets = _unwrap_iteration(it, loop_target)
                if any(self._layers_or_constants(expr) for expr in iterated):
                    return None  # `zip(xs, self.lins)`, `zip(t, self.mean)`: over layers, or a few fixed items
                for expr, target in zip(iterated, targets):
                    if self._is_tensor(expr, scope):
                        if self._single_sample(loop, expr):
                            return None  # the branch for one sample (`if x.dim() == 1:`): its elements are values
                        if target is not None:
                            element |= _names(target)
                        sources.append(expr)
                        found = found or (f"over `{self.ctx.code(expr)}`", ITEMS)
            if isinstance(it, cst.Call) and dotted(it.func) == "enumerate" and isinstance(loop_target, cst.Tuple):
                first = loop_target.elements[0].value
                if isinstance(first, cst.Name):
                    index = first.value
                    if found is None and isinstance(loop_target.elements[1].value, (cst.Name, cst.Tuple)):
                        element |= _names(loop_target.elements[1].value)
        if isinstance(loop, cst.For) and self._recurrent(loop):
            return None
        derived = _derived(body, index, element)
        if found is None:
            # a mask or target filled row by row from per-sample values (`enumerate(lengths)`)
            if index is None or not (isinstance(it, cst.Call) and dotted(it.func) in ("enumerate", "range")):
                return None
            rows = self._filled_rows(body, index, element | derived, scope)
            if rows is None:
                return None
            return f"`{self.ctx.code(it)}`, one row of `{rows.value}` per element", ROWS, flow(self.ctx).is_tensor(rows)
        tracked = derived | element
        if self._ragged(body, index, tracked):
            return None
        if not self._tensor_work(body, index, tracked, scope):
            return None
        if index is not None and not sources:
            sources = _indexed_bases(body, index)  # `range(batch_size)`: what the index reads
        return found[0], found[1], any(self._on_device(s) for s in sources)

    def _on_device(self, expr: cst.BaseExpression) -> bool:
        """The tracer knows `expr` to be a tensor that may live on the device, and it was not
        last bound to a host copy (`boxes = boxes.cpu()`)."""
        tracer = flow(self.ctx)
        if not tracer.is_tensor(expr):
            return False
        if isinstance(expr, cst.Name):
            order = self.ctx.torch.order
            use = order.get(expr, -1)
            earlier = [b for b in tracer.bindings(expr) if b.kind == "assign" and -1 < order.get(b.site, -1) < use]
            if earlier:
                last = max(earlier, key=lambda b: order.get(b.site, -1))
                return not tracer.is_host_value(tracer.value_at(last))
        return True

    def _layers_or_constants(self, expr: cst.BaseExpression) -> bool:
        """A module list (`self.layers`) or a short literal sequence (`self.mean = [0.485, ...]`)."""
        if isinstance(expr, (cst.List, cst.Tuple)):
            return len(expr.elements) <= _FEW
        if isinstance(expr, cst.Attribute):
            writes = flow(self.ctx).self_writes(expr)
            if any(isinstance(w, (cst.List, cst.Tuple)) and len(w.elements) <= _FEW for w in writes):
                return True
        return isinstance(expr, (cst.Name, cst.Attribute)) and flow(self.ctx).is_model(expr) and not self._is_tensor(expr, self.ctx.module)

    def _single_sample(self, loop: cst.CSTNode, iterated: cst.BaseExpression) -> bool:
        """`loop` runs only in the branch where `iterated` is one-dimensional (`if x.dim() == 1:`,
        `if len(x.shape) == 1:`): the branch for a single sample."""
        text = self.ctx.code(iterated)
        child = loop
        for a in self.ctx.torch.ancestors(loop):
            if isinstance(a, cst.FunctionDef):
                return False
            if isinstance(a, cst.If) and child is a.body and _is_one_dim_test(a.test, text, self.ctx):
                return True
            child = a
        return False

    def _batch_size_of(self, expr: cst.BaseExpression, scope: Scope, depth: int = 0) -> Union[cst.BaseExpression, str, None]:
        """`expr` is a batch size: `x.size(0)`, `x.shape[0]`, `len(x)` of a tensor `x`, a name
        bound to one of those (`B = x.size(0)`, `B, C, H, W = x.shape`, `b, n = x.shape[:2]`):
        the tensor `x`; or a value named the batch size (`batch_size`, `self.batch_size`): NAMED.
        None for anything else."""
        if isinstance(expr, cst.Call):
            func = expr.func
            if isinstance(func, cst.Attribute) and func.attr.value == "size" and len(expr.args) == 1:
                if _is_zero(expr.args[0].value) and isinstance(func.value, (cst.Name, cst.Attribute)):
                    return func.value
                return None
            if dotted(func) == "len" and len(expr.args) == 1:
                return expr.args[0].value if self._is_tensor(expr.args[0].value, scope) else None
            return None
        if isinstance(expr, cst.Subscript) and len(expr.slice) == 1 and isinstance(expr.slice[0].slice, cst.Index):
            if not _is_zero(expr.slice[0].slice.value):
                return None
            return _shape_of(expr.value)
        if isinstance(expr, (cst.Name, cst.Attribute)):
            text = dotted(expr) or ""
            if text.rsplit(".", 1)[-1] in BATCH_SIZE_NAMES:
                return NAMED
            if isinstance(expr, cst.Name) and depth == 0:
                return self._batch_size_name(expr.value, scope)
        return None

    def _batch_size_name(self, name: str, scope: Scope) -> Union[cst.BaseExpression, str, None]:
        """`B` bound once in the function from a batch size: `B = x.size(0)`, `B, C, H, W = x.shape`."""
        found: List[Union[cst.BaseExpression, str, None]] = []
        for stmt in _assignments(scope, name):
            if len(stmt.targets) != 1:
                return None
            target = stmt.targets[0].target
            if isinstance(target, cst.Name):
                found.append(self._batch_size_of(stmt.value, scope, depth=1))
            elif isinstance(target, (cst.Tuple, cst.List)) and target.elements:
                first = target.elements[0].value
                tensor = _shape_of(_leading_dims(stmt.value))
                if isinstance(first, cst.Name) and first.value == name and tensor is not None:
                    found.append(tensor)
                else:
                    return None
            else:
                return None
        return found[0] if len(found) == 1 else None

    def _unique_of(self, it: cst.BaseExpression, scope: Scope) -> Optional[cst.BaseExpression]:
        """`torch.unique(t)`, `np.unique(t.cpu())`, `t.unique()` of a tensor `t` (also `.tolist()`-ed):
        `t`; None for anything else."""
        it = _strip_conversions(it)
        if not isinstance(it, cst.Call):
            return None
        func = it.func
        if isinstance(func, cst.Attribute) and func.attr.value == "unique" and self.ctx.qualname(func) not in _UNIQUE:
            base = _strip_conversions(func.value)
            return base if self._is_tensor(base, scope) else None  # (a pandas column has `.unique()` too)
        if self.ctx.qualname(func) in _UNIQUE and it.args:
            return _strip_conversions(it.args[0].value)
        return None

    def _is_tensor(self, expr: cst.BaseExpression, scope: Scope) -> bool:
        """The code uses `expr` as a tensor or array: a name used with tensor methods (`x.size(0)`,
        `x.to(device)`), annotated or documented as a tensor, or one the value tracer knows."""
        tracer = flow(self.ctx)
        if isinstance(expr, cst.Name):
            if known_not_tensor(self.ctx, expr):
                return False  # the `else` of `isinstance(h, torch.Tensor)`: a tuple of states ...
            known = self._tensor_name(expr.value, scope)
            if known is not None:
                return known
            for b in tracer.reaching(expr):
                if b.kind == "param" and not (isinstance(scope, cst.FunctionDef) and scope in self.ctx.torch.forward_functions):
                    return False  # what callers pass (often a model's outputs) says too little
                value = tracer.value_at(b) if b.kind == "assign" else None
                if isinstance(value, cst.Call) and tracer.is_model(value.func):
                    return False  # a model's output: often a list or tuple (levels, steps)
        return tracer.is_tensor(expr)

    def _tensor_name(self, name: str, scope: Scope) -> Optional[bool]:
        if isinstance(scope, cst.FunctionDef):
            star = scope.params.star_arg
            if isinstance(star, cst.Param) and star.name.value == name:
                return False  # `*inputs`: a tuple
            for p in (*scope.params.posonly_params, *scope.params.params, *scope.params.kwonly_params):
                if p.name.value == name and p.annotation is not None:
                    text = self.ctx.code(p.annotation.annotation)
                    if SEQUENCE_ANNOTATION.search(text):
                        return False
                    if "Tensor" in text or "ndarray" in text:
                        return True
            documented = _documented_type(scope, name)
            if documented is not None:
                return documented
        finder = _TensorUse(self.ctx, name)
        walk.visit((scope.body if isinstance(scope, cst.FunctionDef) else scope), finder)
        if finder.sequence:
            return False
        return True if finder.found else None

    # -- exclusions ------------------------------------------------------------------------
    def _recurrent(self, loop: cst.For) -> bool:
        """A value carried from one iteration to the next (`h = cell(x[t], h)`): a recurrence.
        The loop's own target is bound afresh each iteration (`length = length.item()` is not one)."""
        facts = self.ctx.torch
        collector = _Flow()
        walk.visit(loop.body, collector)
        fresh = _names(loop.target)
        for name, stmts in collector.assigned.items():
            if name in fresh:
                continue
            first = min(stmts, key=lambda s: facts.order.get(s, 0))
            if _is_reduction(first, name):
                continue
            for read in collector.reads.get(name, ()):
                in_value = any(a is first for a in facts.ancestors(read))
                if in_value or facts.order.get(read, 0) < facts.order.get(first, 0):
                    return True
        return False

    def _ragged(self, body: cst.CSTNode, index: Optional[str], tracked: Set[str]) -> bool:
        """Per-sample slice bounds read (`x[i, :lengths[i]].mean()`): ragged data, not a plain
        batch loop. A window of fixed width (`x[i, :, s:s + k]`) is a gather, and a constant
        written into a per-sample slice (`mask[i, n:] = 0`) is a mask: both vectorise."""
        names = ({index} if index else set()) | tracked
        finder = _RaggedSlice(names, _local_sums(body))
        walk.visit(body, finder)
        return finder.found

    def _tensor_work(self, body: cst.CSTNode, index: Optional[str], tracked: Set[str], scope: Scope) -> bool:
        finder = _PerElementWork(self, scope, index, tracked)
        walk.visit(body, finder)
        return finder.found

    def _filled_rows(self, body: cst.CSTNode, index: str, tracked: Set[str], scope: Scope) -> Optional[cst.Name]:
        """The tensor whose rows the loop fills with a constant up to or from a per-sample bound
        (`mask[i, n:] = 0`, `labels[i, :k].fill_(-100)`), as written there; else None."""
        finder = _RowFills(index, tracked | {index})
        walk.visit(body, finder)
        for name in finder.tensors:
            if self._is_tensor(name, scope):
                return name
        return None


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


def _is_constant(expr: cst.BaseExpression) -> bool:
    if isinstance(expr, cst.UnaryOperation):
        return _is_constant(expr.expression)
    if isinstance(expr, cst.Name):
        return expr.value in ("True", "False", "None")
    return isinstance(expr, (cst.Integer, cst.Float))


def _shape_of(expr: cst.BaseExpression) -> Optional[cst.BaseExpression]:
    """`x.shape` / `x.size()`: `x`."""
    if isinstance(expr, cst.Attribute) and expr.attr.value == "shape":
        return expr.value
    if isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute) and expr.func.attr.value == "size" and not expr.args:
        return expr.func.value
    return None


def _leading_dims(expr: cst.BaseExpression) -> cst.BaseExpression:
    """`x.shape[:2]` / `x.size()[0:3]`: `x.shape` (its first dimensions, in order)."""
    if isinstance(expr, cst.Subscript) and len(expr.slice) == 1 and isinstance(expr.slice[0].slice, cst.Slice):
        s = expr.slice[0].slice
        if (s.lower is None or _is_zero(s.lower)) and s.step is None:
            return expr.value
    return expr


def _strip_conversions(expr: cst.BaseExpression) -> cst.BaseExpression:
    """`t.cpu().numpy()`, `t.data`: `t`."""
    while True:
        if isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute) and expr.func.attr.value in _CONVERSIONS and not expr.args:
            expr = expr.func.value
        elif isinstance(expr, cst.Attribute) and expr.attr.value == "data":
            expr = expr.value
        else:
            return expr


def _is_one_dim_test(test: cst.BaseExpression, text: str, ctx: FileContext) -> bool:
    """`x.dim() == 1`, `x.ndim == 1`, `len(x.shape) == 1`, `len(x.size()) == 1` for `x` written `text`."""
    if not (isinstance(test, cst.Comparison) and len(test.comparisons) == 1 and isinstance(test.comparisons[0].operator, cst.Equal)):
        return False
    left, right = test.left, test.comparisons[0].comparator
    if not (isinstance(right, cst.Integer) and right.value == "1"):
        return False
    if isinstance(left, cst.Call) and isinstance(left.func, cst.Attribute) and left.func.attr.value in ("dim", "ndimension") and not left.args:
        return ctx.code(left.func.value) == text
    if isinstance(left, cst.Attribute) and left.attr.value == "ndim":
        return ctx.code(left.value) == text
    if isinstance(left, cst.Call) and dotted(left.func) == "len" and len(left.args) == 1:
        shape = _shape_of(left.args[0].value)
        return shape is not None and ctx.code(shape) == text
    return False


def _indexed_bases(body: cst.CSTNode, index: Optional[str]) -> List[cst.BaseExpression]:
    """The values subscripted by the loop index in `body` (`x` in `x[i]`; every subscripted
    value when `index` is None)."""
    finder = _Subscripts(index)
    walk.visit(body, finder)
    return finder.bases


class _Subscripts(cst.CSTVisitor):
    def __init__(self, index: Optional[str]) -> None:
        super().__init__()
        self.index = index
        self.bases: List[cst.BaseExpression] = []

    def visit_Subscript(self, node: cst.Subscript) -> None:
        if self.index is None or any(_mentions(el, {self.index}) for el in node.slice):
            self.bases.append(node.value)


def _documented_type(fn: cst.FunctionDef, name: str) -> Optional[bool]:
    """What the function's docstring says parameter `name` is: True for a tensor or array, False
    for a list, tuple or other container, None when it does not say."""
    doc = fn.get_docstring(clean=True)
    if not doc:
        return None
    for pattern in _DOC_TYPES:
        m = re.search(pattern.format(name=re.escape(name)), doc, re.M)
        if m:
            text = m.group(1)
            if _DOC_SEQUENCE.search(text):
                return False
            if _DOC_TENSOR.search(text):
                return True
    return None


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
    if isinstance(it, (cst.Name, cst.Attribute)):
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


def _assignments(scope: Scope, name: str) -> List[cst.Assign]:
    finder = _AssignFinder(name)
    walk.visit((scope.body if isinstance(scope, cst.FunctionDef) else scope), finder)
    return finder.found


def _derived(body: cst.CSTNode, index: Optional[str], element: Set[str]) -> Set[str]:
    """Names the loop body binds from an element (`row = x[i]`, `d = (row - c).norm()`)."""
    collector = _Flow()
    walk.visit(body, collector)
    found: Set[str] = set()
    for _ in range(2):  # a chain of two assignments settles most bodies
        for stmt in collector.statements:
            if _ElementFinder.mentions(stmt.value, index, element | found):
                for t in stmt.targets:
                    found |= _names(t.target)
    return found - element


def _local_sums(body: cst.CSTNode) -> Dict[str, Tuple[str, cst.BaseExpression]]:
    """`end = start + width` in the loop body: end -> (start, width)."""
    collector = _Flow()
    walk.visit(body, collector)
    out: Dict[str, Tuple[str, cst.BaseExpression]] = {}
    for stmt in collector.statements:
        value = stmt.value
        if len(stmt.targets) == 1 and isinstance(stmt.targets[0].target, cst.Name) and isinstance(value, cst.BinaryOperation):
            if isinstance(value.operator, cst.Add) and isinstance(value.left, cst.Name):
                out[stmt.targets[0].target.value] = (value.left.value, value.right)
    return out


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
        self.statements: List[cst.Assign] = []
        self._targets: Set[int] = set()

    def visit_Assign(self, node: cst.Assign) -> None:
        self.statements.append(node)
        for t in node.targets:
            for name in _names(t.target):
                self.assigned.setdefault(name, []).append(node)
            self._mark(t.target)

    def visit_AugAssign(self, node: cst.AugAssign) -> None:
        self._mark(node.target)  # `loss += term`: a reduction, not a recurrence

    def visit_For(self, node: cst.For) -> None:
        self._mark(node.target)

    def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
        return False

    def _mark(self, target: cst.BaseExpression) -> None:
        if isinstance(target, cst.Name):
            self._targets.add(id(target))
        elif isinstance(target, (cst.Tuple, cst.List)):
            for el in target.elements:
                self._mark(el.value)

    def visit_Attribute(self, node: cst.Attribute) -> bool:
        walk.visit(node.value, self)
        return False

    def visit_Arg(self, node: cst.Arg) -> bool:
        walk.visit(node.value, self)
        return False

    def visit_Name(self, node: cst.Name) -> None:
        if id(node) not in self._targets:
            self.reads.setdefault(node.value, []).append(node)


class _TensorUse(cst.CSTVisitor):
    def __init__(self, ctx: FileContext, name: str) -> None:
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
    """A slice read with a per-sample bound; constant fills and fixed-width windows aside."""

    def __init__(self, names: Set[str], sums: Dict[str, Tuple[str, cst.BaseExpression]]) -> None:
        super().__init__()
        self.names = names
        self.sums = sums
        self.found = False

    def visit_Assign(self, node: cst.Assign) -> Optional[bool]:
        if _is_constant(node.value):
            return False  # `mask[i, n:] = 0`: a mask built row by row (vectorises as a comparison)
        return None

    def visit_Slice(self, node: cst.Slice) -> None:
        if self._fixed_width(node):
            return
        for bound in (node.lower, node.upper):
            if bound is not None and _mentions(bound, self.names):
                if not _is_index_plus_const(bound, self.names):
                    self.found = True

    def _fixed_width(self, node: cst.Slice) -> bool:
        """`s : s + k` (also through `e = s + k`) with `k` the same for every sample."""
        lower, upper = node.lower, node.upper
        if not isinstance(lower, cst.Name) or upper is None:
            return False
        if isinstance(upper, cst.BinaryOperation) and isinstance(upper.operator, cst.Add):
            start, width = upper.left, upper.right
            return isinstance(start, cst.Name) and start.value == lower.value and not _mentions(width, self.names)
        if isinstance(upper, cst.Name) and upper.value in self.sums:
            start_name, width = self.sums[upper.value]
            return start_name == lower.value and not _mentions(width, self.names)
        return False


def _mentions(expr: cst.CSTNode, names: Set[str]) -> bool:
    finder = _NameFinder(names)
    walk.visit(expr, finder)
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
    """Tensor work on one element: `f(x[i])`, `x[i].sum()`, `xi @ w`, `x[i] * 2`, a write into the
    element's row (`out[i] = x[i, :, s:e]`, `x[i] += shift[i]`); not `print(i)`."""

    def __init__(self, rule: PythonLoopOverBatch, scope: Scope, index: Optional[str], element: Set[str]) -> None:
        super().__init__()
        self.rule = rule
        self.scope = scope
        self.index = index
        self.element = element
        self.found = False

    def _elementy(self, expr: cst.CSTNode) -> bool:
        return _ElementFinder.mentions(expr, self.index, self.element)

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

    def visit_Assign(self, node: cst.Assign) -> None:
        for t in node.targets:
            self._write(t.target, node.value)

    def visit_AugAssign(self, node: cst.AugAssign) -> None:
        self._write(node.target, node.value)

    def _write(self, target: cst.BaseExpression, value: cst.BaseExpression) -> None:
        """`out[i] = ...` / `x[i, :, :] += ...`: one indexed copy per element into a tensor."""
        if not (isinstance(target, cst.Subscript) and self.index and any(_mentions(el, {self.index}) for el in target.slice)):
            return
        if self._elementy(value):
            self.found = True
        elif isinstance(target.value, cst.Name) and self.rule._is_tensor(target.value, self.scope):
            self.found = True


class _ElementFinder(cst.CSTVisitor):
    """The element itself, or a subscript by the loop index (`x[i]`, `x[i, :]`)."""

    def __init__(self, index: Optional[str], element: Set[str]) -> None:
        super().__init__()
        self.index = index
        self.element = element
        self.found = False

    @staticmethod
    def mentions(expr: cst.CSTNode, index: Optional[str], element: Set[str]) -> bool:
        finder = _ElementFinder(index, element)
        walk.visit(expr, finder)
        return finder.found

    def visit_Name(self, node: cst.Name) -> None:
        if node.value in self.element:
            self.found = True

    def visit_Subscript(self, node: cst.Subscript) -> None:
        if self.index and any(_mentions(el, {self.index}) for el in node.slice):
            self.found = True


class _RowFills(cst.CSTVisitor):
    """`t[i, n:] = c`, `t[i, :n] = c`, `t[i, :n].fill_(c)` with `n` from the element: the
    tensors (names) filled row by row."""

    def __init__(self, index: str, tracked: Set[str]) -> None:
        super().__init__()
        self.index = index
        self.tracked = tracked
        self.tensors: List[cst.Name] = []

    def visit_Assign(self, node: cst.Assign) -> None:
        if _is_constant(node.value):
            for t in node.targets:
                self._row(t.target)

    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        if isinstance(func, cst.Attribute) and func.attr.value == "fill_" and node.args and _is_constant(node.args[0].value):
            self._row(func.value)

    def _row(self, target: cst.BaseExpression) -> None:
        if not isinstance(target, cst.Subscript) or not isinstance(target.value, cst.Name) or len(target.slice) < 2:
            return
        first, rest = target.slice[0].slice, target.slice[1:]
        if not (isinstance(first, cst.Index) and isinstance(first.value, cst.Name) and first.value.value == self.index):
            return
        for el in rest:
            s = el.slice
            if isinstance(s, cst.Slice) and any(b is not None and _mentions(b, self.tracked) for b in (s.lower, s.upper)):
                self.tensors.append(target.value)
                return
