"""SPD404 cat-in-loop."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Dict, List, Optional, Sequence, Set, Tuple, Union, cast

import libcst as cst

from speedlint.analyzer.context import FileContext
from speedlint.analyzer.providers.names import dotted
from speedlint.analyzer.rule import DISPLAY_ONLY, MEDIUM, SAFE, Fix, Impact, Rule
from speedlint.analyzer.providers import walk

if TYPE_CHECKING:  # pragma: no cover
    from speedlint.analyzer.providers.training import TorchFacts

#: Concatenations whose `f([x, y]) ... f([x, z])` chain equals one `f([x, y, z])`.
CONCAT = (
    "torch.cat",
    "torch.concat",
    "torch.concatenate",
    "torch.vstack",
    "torch.hstack",
    "torch.row_stack",
    "numpy.concatenate",
    "numpy.vstack",
    "numpy.hstack",
    "numpy.row_stack",
)
#: Stacking grows the rank: detected, never rewritten.
STACK = ("torch.stack", "numpy.stack")
#: `np.append(x, y)`: the accumulator is the first argument; without `axis` it also flattens,
#: so it is detected, never rewritten.
APPEND = ("numpy.append",)
#: Their last parts (what the `ast` pre-look sees at the call).
_GROW_NAMES = tuple(sorted({q.rsplit(".", 1)[-1] for q in (*CONCAT, *STACK, *APPEND)}))
#: Reads of a tensor's metadata: they do not need the data, a counter could replace them.
META_ATTRS = frozenset({"shape", "dtype", "device", "ndim", "size", "numel", "dim", "nbytes", "itemsize"})
_TINY_RANGE = 4

Target = Union[cst.Name, cst.Attribute]


@dataclass
class _Occurrence:
    node: cst.CSTNode
    kind: str  # grow-write | grow-read | guard | guarded-init | meta | other-grow | write | read


class CatInLoop(Rule):
    """
    ## What it does
    Flags a tensor or array that is grown inside a loop by concatenating it with a new piece each
    iteration: `x = torch.cat([x, y])`, `torch.concat`, `torch.vstack`/`hstack`, `np.concatenate`,
    `np.vstack`/`hstack`, `x = np.append(x, y)` (and the rank-growing `torch.stack`/`np.stack`), also the
    `x = y if x is None else torch.cat([x, y])` and `if i == 0: x = y` / `else: x = torch.cat([x, y])`
    forms. A value that the loop also transforms each iteration (U-Net skip connections) is what
    the loop computes, not an accumulation, and so is one it consumes whole over a few fixed
    iterations (DenseNet blocks over its layers). A sequence grown and read whole over a length
    known only at run time (an autoregressive decode that feeds `ys` back to the model every step)
    is still quadratic: reported at medium impact, as advice.

    ## Why is this slow?
    Each `torch.cat` allocates a new tensor and copies everything accumulated so far. After `n`
    iterations that is `1 + 2 + ... + n` pieces copied: quadratic time and memory traffic, plus
    allocator churn on the GPU. Collecting the predictions of a 2,000-batch evaluation this way
    copies about 1,000 times more data than concatenating once at the end.

    ## Example
    ```python
    def predict(model, loader):
        preds = torch.empty(0, 10)
        with torch.no_grad():
            for x, _ in loader:
                preds = torch.cat([preds, model(x)], dim=0)
        return preds
    ```

    ## Use instead
    ```python
    def predict(model, loader):
        preds = torch.empty(0, 10)
        preds_parts = [preds]
        with torch.no_grad():
            for x, _ in loader:
                preds_parts.append(model(x))
        preds = torch.cat(preds_parts, dim=0)
        return preds
    ```

    ## Fix safety
    Safe for the append form `x = torch.cat([x, y], dim)` when `x` is a local name that the loop
    does not otherwise read or write, the loop has no `else`, the other arguments do not change in
    the loop, and the appended pieces are not modified in place later in the loop (the list keeps
    references where `cat` copied). The fix creates `x_parts = [x]` before the loop (keeping the
    initial value, so an empty start, dtype promotion and a loop that never runs behave as before),
    appends inside the loop, and concatenates once after it. Prepending (`torch.cat([y, x])`),
    `None`-guarded accumulators, attributes (`self.x`), stacking, and loops that also read the
    shape of `x` get advice only.

    ## References
    - PyTorch docs, `torch.cat`: returns a new tensor (every call copies all inputs)
    """

    code = "SPD404"
    name = "cat-in-loop"
    impact = Impact(
        wastes="memory bandwidth and allocations (quadratic re-copying)",
        when="always; grows with the number of iterations",
        typical="O(n^2) copying: seconds to minutes over thousands of iterations",
        evidence="torch.cat copies all inputs on every call",
        level=MEDIUM,
    )
    fixes = (SAFE, DISPLAY_ONLY)
    triggers = ("cat(", "concat", "stack(", "cat (", "append(")
    ast_precondition = staticmethod(
        lambda facts: facts.text_has_word(*_GROW_NAMES)
        and facts.text_may_grow(*_GROW_NAMES)
        and facts.has_stmt_loop
        and not facts.grows_only(META_ATTRS).isdisjoint(_GROW_NAMES)
    )

    def visit_Assign(self, node: cst.Assign) -> None:
        if len(node.targets) != 1:
            return
        target = node.targets[0].target
        if not isinstance(target, (cst.Name, cst.Attribute)) or dotted(target) is None:
            return
        found = self._grow_call(node.value, target)
        if found is None:
            return
        call, guarded = found
        facts = self.ctx.torch
        loop = facts.in_loop(node)
        if loop is None or _tiny_loop(loop):
            return
        occurrences = self._occurrences(loop, target, node, call)
        if any(o.kind == "write" for o in occurrences):
            return  # transformed each iteration: what the loop computes, not an accumulation
        func_text = self.ctx.code(call.func)
        name = self.ctx.code(target)
        if any(o.kind == "read" for o in occurrences):
            # consumed whole each iteration (DenseNet features over a few layers: what the loop
            # computes); over a sequence of a length given at run time (a decode loop that feeds
            # `ys` back to the model) the copying is still quadratic, at medium impact
            if _runtime_length(loop) and not self.ctx.matches(call.func, *APPEND):
                self.report(
                    node,
                    f"`{name}` is re-concatenated with `{func_text}` on every step of this loop while the loop "
                    "reads it whole: each call copies the sequence so far (quadratic in its length)",
                    fix=Fix.advice(f"Preallocate `{name}` at its final length and write each step into it (or keep a cache of the steps)"),
                    impact=self.impact.with_level(MEDIUM),
                )
            return
        stacking = self.ctx.matches(call.func, *STACK)
        appending = self.ctx.matches(call.func, *APPEND)
        fix: Optional[Fix] = None
        if not guarded and not stacking and not appending:
            fix = self._fix(node, call, target, loop, occurrences)
        if stacking:
            message = f"`{name}` is re-stacked with `{func_text}` on every iteration: each call copies everything so far"
        else:
            message = (
                f"`{name}` grows by `{func_text}` on every iteration: each call copies everything "
                "accumulated so far (quadratic)"
            )
        self.report(
            node,
            message,
            fix=fix or Fix.advice(
                "Append the pieces to a list in the loop and call "
                + ("`np.concatenate` (on the flattened pieces when `np.append` has no `axis`)" if appending else f"`{func_text}`")
                + " once after it"
            ),
        )

    # -- detection -------------------------------------------------------------------------
    def _grow_call(self, value: cst.BaseExpression, target: Target) -> Optional[Tuple[cst.Call, bool]]:
        """The concatenation that grows `target` in `value`, and whether it is `None`-guarded."""
        call = self._concat_with(value, target)
        if call is not None:
            return call, False
        if isinstance(value, cst.IfExp) and _none_test(value.test, target):
            for branch in (value.body, value.orelse):
                call = self._concat_with(branch, target)
                if call is not None:
                    return call, True
        return None

    def _concat_with(self, value: cst.BaseExpression, target: Target) -> Optional[cst.Call]:
        if isinstance(value, cst.Call) and self.ctx.matches(value.func, *APPEND):
            positional = [a for a in value.args if a.keyword is None and not a.star]
            if len(positional) >= 2 and self.ctx.code(positional[0].value) == self.ctx.code(target):
                return value
            return None
        if not isinstance(value, cst.Call) or not self.ctx.matches(value.func, *CONCAT, *STACK):
            return None
        seq = _sequence_arg(value)
        if seq is None:
            return None
        text = self.ctx.code(target)
        elements = [e.value for e in seq.elements]
        if any(isinstance(e, cst.StarredElement) for e in seq.elements):
            return None
        if len(elements) >= 2 and any(self.ctx.code(e) == text for e in (elements[0], elements[-1])):
            return value
        return None

    def _occurrences(self, loop: cst.CSTNode, target: Target, assign: cst.Assign, call: cst.Call) -> List[_Occurrence]:
        text = self.ctx.code(target)
        found: List[_Occurrence] = []
        collector = _Collector(self.ctx, text, isinstance(target, cst.Name))
        walk.visit(loop, collector)
        if self.ctx.matches(call.func, *APPEND):
            operands = {id(call.args[0].value)}
        else:
            seq = _sequence_arg(call)
            operands = {id(e.value) for e in seq.elements} if seq is not None else set()
        facts = self.ctx.torch
        for occ in collector.found:
            if occ is target:
                found.append(_Occurrence(occ, "grow-write"))
            elif id(occ) in operands:
                found.append(_Occurrence(occ, "grow-read"))
            else:
                found.append(_Occurrence(occ, self._kind(occ, target, facts)))
        return found

    def _kind(self, occ: cst.CSTNode, target: Target, facts: TorchFacts) -> str:
        parent = facts.parent(occ)
        if self._operand_of_another_grow(occ, target, facts):
            return "other-grow"  # grown in several branches of the loop
        if isinstance(parent, cst.Comparison) and _none_test(parent, target):
            return "guard"
        if isinstance(parent, cst.UnaryOperation) and isinstance(parent.operator, cst.Not):
            return "guard"
        if isinstance(parent, cst.AssignTarget) and parent.target is occ:
            assign = facts.parent(parent)
            if isinstance(assign, cst.Assign) and len(assign.targets) == 1:
                if self._grow_call(assign.value, target) is not None:
                    return "other-grow"
                if self._under_none_guard(assign, target):
                    return "guarded-init"
            return "write"
        if isinstance(parent, (cst.AugAssign, cst.AnnAssign, cst.For, cst.CompFor, cst.NamedExpr, cst.Param, cst.AsName)):
            return "write"
        if isinstance(parent, cst.Del) or isinstance(parent, (cst.Element,)) and isinstance(facts.parent(parent), (cst.Tuple, cst.List)) and _is_store(facts, parent):
            return "write"
        if isinstance(parent, cst.Attribute) and parent.value is occ and parent.attr.value in META_ATTRS:
            return "meta"
        if isinstance(parent, cst.Arg):
            call = facts.parent(parent)
            if isinstance(call, cst.Call) and dotted(call.func) == "len":
                return "meta"
        return "read"

    def _operand_of_another_grow(self, occ: cst.CSTNode, target: Target, facts: TorchFacts) -> bool:
        """`x` read by another `x = cat([x, y])` / `x = np.append(x, y)` of the same loop."""
        node: Optional[cst.CSTNode] = occ
        for _ in range(4):  # Name -> Element -> List -> Arg -> Call
            node = facts.parent(cast(cst.CSTNode, node))  # (a node: the test below returns on anything else)
            if isinstance(node, cst.Call):
                assign = facts.parent(node)
                return (
                    isinstance(assign, cst.Assign)
                    and len(assign.targets) == 1
                    and self.ctx.code(assign.targets[0].target) == self.ctx.code(target)
                    and self._concat_with(node, target) is not None
                )
            if not isinstance(node, (cst.Element, cst.List, cst.Tuple, cst.Arg)):
                return False
        return False

    def _under_none_guard(self, node: cst.CSTNode, target: Target) -> bool:
        """The first value: under `if x is None:`, or under `if i == 0:` (the first iteration)."""
        child = node
        for a in self.ctx.torch.ancestors(node):
            if isinstance(a, (cst.For, cst.While, cst.FunctionDef)):
                return False
            if isinstance(a, cst.If) and child is a.body and (_none_test(a.test, target) or _first_iteration_test(a.test)):
                return True
            child = a
        return False

    # -- the fix ---------------------------------------------------------------------------
    def _fix(
        self,
        assign: cst.Assign,
        call: cst.Call,
        target: Target,
        loop: Union[cst.For, cst.While],
        occurrences: Sequence[_Occurrence],
    ) -> Optional[Fix]:
        ctx = self.ctx
        facts = ctx.torch
        if not isinstance(target, cst.Name):
            return None
        if any(o.kind not in ("grow-write", "grow-read") for o in occurrences):
            return None
        if loop.orelse is not None:
            return None
        seq = _sequence_arg(call)
        assert seq is not None
        elements = [e.value for e in seq.elements]
        if ctx.code(elements[0]) != target.value:
            return None  # prepending: not the append form
        pieces = elements[1:]
        if any(ctx.code(p) == target.value for p in pieces):
            return None
        assigned = _names_assigned_in(loop)
        for arg in call.args:
            if arg.value is seq:
                continue
            if arg.keyword is not None and arg.keyword.value == "out":
                return None
            if not _invariant(arg.value, assigned):
                return None
        if any(not self._stable_piece(p, loop) for p in pieces):
            return None
        if not self._bound_before(target, loop):
            return None
        container = facts.parent(loop)
        if not isinstance(container, (cst.IndentedBlock, cst.Module)):
            return None
        parts = self._parts_name(target.value)
        if parts is None:
            return None
        statement = facts.parent(assign)
        if not isinstance(statement, cst.SimpleStatementLine):
            return None

        parts_name = cst.Name(parts)
        if len(pieces) == 1:
            grow = cst.Call(cst.Attribute(parts_name, cst.Name("append")), [cst.Arg(pieces[0])])
        else:
            grow = cst.Call(
                cst.Attribute(parts_name, cst.Name("extend")),
                [cst.Arg(cst.List([cst.Element(p) for p in pieces]))],
            )
        new_loop = loop.visit(_Swap({assign: cst.Expr(grow)}))
        assert isinstance(new_loop, (cst.For, cst.While))
        init = cst.SimpleStatementLine(
            [cst.Assign([cst.AssignTarget(parts_name)], cst.List([cst.Element(cst.Name(target.value))]))],
            leading_lines=loop.leading_lines,
        )
        final_args = [
            arg.with_changes(value=parts_name) if arg.value is seq else arg for arg in call.args
        ]
        final = cst.SimpleStatementLine(
            [cst.Assign([cst.AssignTarget(cst.Name(target.value))], call.with_changes(args=final_args))]
        )
        replacement = cst.FlattenSentinel([init, new_loop.with_changes(leading_lines=[]), final])
        return Fix.replace(
            loop,
            replacement,
            f"Append to `{parts}` in the loop and concatenate once after it",
            SAFE,
        )

    def _stable_piece(self, piece: cst.BaseExpression, loop: cst.CSTNode) -> bool:
        """No in-place write in the loop to the object the piece may alias."""
        root = _root(piece)
        if root is None:
            return isinstance(piece, (cst.Call, cst.BinaryOperation, cst.UnaryOperation))
        checker = _InPlaceWrites(self.ctx, root)
        walk.visit(loop, checker)
        return not checker.found

    def _bound_before(self, target: cst.Name, loop: cst.CSTNode) -> bool:
        facts = self.ctx.torch
        fn = facts.enclosing_function(loop)
        scope: cst.CSTNode = fn if fn is not None else self.ctx.module
        binder = _Binders(target.value)
        walk.visit(scope, binder)
        if fn is not None and any(
            p.name.value == target.value for p in (*fn.params.posonly_params, *fn.params.params, *fn.params.kwonly_params)
        ):
            return True
        return any(
            facts.is_before(b, loop) and facts.enclosing_function(b) is fn and loop not in set(facts.ancestors(b))
            for b in binder.found
        )

    def _parts_name(self, base: str) -> Optional[str]:
        used = _all_names(self.ctx)
        for candidate in (f"{base}_parts", f"{base}_chunks", f"{base}_pieces"):
            if candidate not in used:
                return candidate
        return None


# -- helpers ---------------------------------------------------------------------------------
def _sequence_arg(call: cst.Call) -> Optional[Union[cst.List, cst.Tuple]]:
    for arg in call.args:
        if arg.keyword is None or arg.keyword.value in ("tensors", "tup", "arrays"):
            if isinstance(arg.value, (cst.List, cst.Tuple)) and not arg.star:
                return arg.value
            return None
    return None


def _none_test(test: cst.BaseExpression, target: Target) -> bool:
    """`x is None` / `x is not None` (also `not x`-free forms only)."""
    if not isinstance(test, cst.Comparison) or len(test.comparisons) != 1:
        return False
    comp = test.comparisons[0]
    if not isinstance(comp.operator, (cst.Is, cst.IsNot)):
        return False
    if not (isinstance(comp.comparator, cst.Name) and comp.comparator.value == "None"):
        return False
    return dotted(test.left) == dotted(target)


def _first_iteration_test(test: cst.BaseExpression) -> bool:
    """`i == 0`, `step == 0`, `0 == i`: true on the first iteration only."""
    if not isinstance(test, cst.Comparison) or len(test.comparisons) != 1:
        return False
    comp = test.comparisons[0]
    if not isinstance(comp.operator, cst.Equal):
        return False
    pair = (test.left, comp.comparator)
    return any(isinstance(x, cst.Integer) and x.value == "0" for x in pair) and any(isinstance(x, cst.Name) for x in pair)


def _runtime_length(loop: cst.CSTNode) -> bool:
    """`for t in range(max_len)` with a length known at run time only, or a `while` loop."""
    if isinstance(loop, cst.While):
        return True
    it = loop.iter if isinstance(loop, cst.For) else None
    if isinstance(it, cst.Call) and dotted(it.func) == "range" and it.args:
        return not all(isinstance(a.value, (cst.Integer, cst.UnaryOperation)) for a in it.args)
    return False


def _tiny_loop(loop: cst.CSTNode) -> bool:
    if not isinstance(loop, cst.For):
        return False
    it = loop.iter
    if isinstance(it, cst.Call) and dotted(it.func) == "range" and len(it.args) == 1:
        value = it.args[0].value
        return isinstance(value, cst.Integer) and int(value.value, 0) <= _TINY_RANGE
    if isinstance(it, (cst.List, cst.Tuple)):
        return len(it.elements) <= _TINY_RANGE
    return False


def _is_store(facts: TorchFacts, element: cst.CSTNode) -> bool:
    node = element
    for a in facts.ancestors(element):
        if isinstance(a, cst.AssignTarget):
            return True
        if isinstance(a, cst.For) and node is a.target:
            return True
        if not isinstance(a, (cst.Tuple, cst.List, cst.Element, cst.StarredElement)):
            return False
        node = a
    return False


def _root(expr: cst.BaseExpression) -> Optional[str]:
    """The variable (or `self.attr`) a piece may alias: `out` for `out[:, 0]`, `out.detach()`."""
    node = expr
    while True:
        if isinstance(node, cst.Subscript):
            node = node.value
        elif isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute):
            node = node.func.value
        elif isinstance(node, cst.Attribute) and dotted(node) is None:
            node = node.value
        else:
            break
    if isinstance(node, cst.Attribute):
        name = dotted(node)
        return name if name and name.startswith("self.") else name
    if isinstance(node, cst.Name):
        return node.value
    return None


def _invariant(expr: cst.BaseExpression, assigned: Set[str]) -> bool:
    if isinstance(expr, (cst.Integer, cst.SimpleString)):
        return True
    if isinstance(expr, cst.UnaryOperation) and isinstance(expr.expression, cst.Integer):
        return True
    name = dotted(expr)
    if name is None:
        return False
    return name.split(".")[0] not in assigned


def _names_assigned_in(node: cst.CSTNode) -> Set[str]:
    collector = _Assigned()
    walk.visit(node, collector)
    return collector.names


def _all_names(ctx: FileContext) -> Set[str]:
    return {n.value for n in ctx.torch.order if isinstance(n, cst.Name)}


class _Collector(cst.CSTVisitor):
    """Occurrences of a variable (`x`) or an attribute chain (`self.x`) in a subtree."""

    def __init__(self, ctx: FileContext, text: str, is_name: bool) -> None:
        super().__init__()
        self.ctx = ctx
        self.text = text
        self.is_name = is_name
        self.found: List[cst.CSTNode] = []

    def visit_Name(self, node: cst.Name) -> None:
        if not self.is_name or node.value != self.text:
            return
        parent = self.ctx.torch.parent(node)
        if isinstance(parent, cst.Attribute) and parent.attr is node:
            return
        if isinstance(parent, cst.Arg) and parent.keyword is node:
            return
        self.found.append(node)

    def visit_Attribute(self, node: cst.Attribute) -> Optional[bool]:
        if not self.is_name and dotted(node) == self.text:
            self.found.append(node)
            return False
        return None


class _Swap(cst.CSTTransformer):
    def __init__(self, mapping: Dict[cst.CSTNode, cst.CSTNode]) -> None:
        super().__init__()
        self.mapping = mapping

    def on_leave(
        self, original_node: cst.CSTNodeT, updated_node: cst.CSTNodeT
    ) -> Union[cst.CSTNodeT, cst.RemovalSentinel, cst.FlattenSentinel[cst.CSTNodeT]]:
        # (a swapped node may be of another kind, an `Expr` for an `Assign`: libcst's typing cannot say so)
        return cast(cst.CSTNodeT, self.mapping.get(original_node, updated_node))


class _Assigned(cst.CSTVisitor):
    def __init__(self) -> None:
        super().__init__()
        self.names: Set[str] = set()

    def _add(self, target: cst.BaseExpression) -> None:
        if isinstance(target, cst.Name):
            self.names.add(target.value)
        elif isinstance(target, (cst.Tuple, cst.List)):
            for el in target.elements:
                self._add(el.value)
        elif isinstance(target, cst.StarredElement):
            self._add(target.value)

    def visit_AssignTarget(self, node: cst.AssignTarget) -> None:
        self._add(node.target)

    def visit_AugAssign(self, node: cst.AugAssign) -> None:
        self._add(node.target)

    def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
        self._add(node.target)

    def visit_For(self, node: cst.For) -> None:
        self._add(node.target)

    def visit_NamedExpr(self, node: cst.NamedExpr) -> None:
        self._add(node.target)

    def visit_AsName(self, node: cst.AsName) -> None:
        self._add(node.name)


class _Binders(cst.CSTVisitor):
    """Statements that bind `name` (assignments, loop targets, with-as)."""

    def __init__(self, name: str) -> None:
        super().__init__()
        self.name = name
        self.found: List[cst.CSTNode] = []

    def _check(self, node: cst.CSTNode, target: cst.BaseExpression) -> None:
        collector = _Assigned()
        collector._add(target)
        if self.name in collector.names:
            self.found.append(node)

    def visit_Assign(self, node: cst.Assign) -> None:
        for t in node.targets:
            self._check(node, t.target)

    def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
        if node.value is not None:
            self._check(node, node.target)

    def visit_For(self, node: cst.For) -> None:
        self._check(node, node.target)


class _InPlaceWrites(cst.CSTVisitor):
    """In-place writes to `root` (or anything under it): `root.add_(..)`, `root[i] = ..`, `root += ..`, `out=root`."""

    def __init__(self, ctx: FileContext, root: str) -> None:
        super().__init__()
        self.ctx = ctx
        self.root = root
        self.found = False

    def _under(self, expr: cst.BaseExpression) -> bool:
        return _root(expr) == self.root

    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        if isinstance(func, cst.Attribute):
            attr = func.attr.value
            if attr.endswith("_") and not attr.endswith("__") and self._under(func.value):
                self.found = True
            if attr in ("copy_", "fill_", "zero_") and self._under(func.value):
                self.found = True
        for arg in node.args:
            if arg.keyword is not None and arg.keyword.value == "out" and self._under(arg.value):
                self.found = True

    def visit_AugAssign(self, node: cst.AugAssign) -> None:
        if self._under(node.target):
            self.found = True

    def visit_AssignTarget(self, node: cst.AssignTarget) -> None:
        if isinstance(node.target, (cst.Subscript, cst.Attribute)) and self._under(node.target):
            self.found = True
