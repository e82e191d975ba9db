"""SPD105 dataloader-materialized."""

from __future__ import annotations

from typing import TYPE_CHECKING, List, Optional, cast

import libcst as cst

from speedlint.analyzer.rule import DISPLAY_ONLY, HIGH, MEDIUM, SAFE, Fix, Impact, Rule
from speedlint.analyzer.providers.loaders import loader_facts
from speedlint.analyzer.providers import walk

if TYPE_CHECKING:  # pragma: no cover
    from speedlint.analyzer.context import FileContext

_SIZE_ATTRS = ("shape", "size", "dtype", "ndim", "dim", "numel")


class DataLoaderMaterialized(Rule):
    """
    ## What it does
    Flags reading a loader's size by running it, once per epoch or per step: `len(list(loader))`,
    `n = len(list(loader))`-style `list(loader)` used only for its length, and
    `next(iter(loader))` whose batch is only used for its shape. The loader is a known
    `DataLoader` or the iterable the training loop runs over. `len(loader)` and one-off checks at
    start-up are not flagged.

    ## Why is this slow?
    `list(loader)` loads, decodes and collates every batch of the epoch (and keeps them all in
    memory) only to count them: a whole extra epoch of input work. `next(iter(loader))` starts the
    worker processes and prefetches several batches to produce one. `len(loader)` answers from the
    sampler without loading anything.

    ## Example
    ```python
    for epoch in range(10):
        steps = len(list(loader))
        for x, y in loader:
            loss = model(x).sum()
            loss.backward()
            optimizer.step()
    ```

    ## Use instead
    ```python
    for epoch in range(10):
        steps = len(loader)
        for x, y in loader:
            loss = model(x).sum()
            loss.backward()
            optimizer.step()
    ```

    ## Fix safety
    `len(list(x))` becomes `len(x)`: safe when `x` is known to be a `DataLoader` over a map-style
    dataset (its length is the number of batches it yields). Otherwise, and for `list(...)` and
    `next(iter(...))` used for sizes, the finding is advice: read the size with `len(loader)` /
    `len(loader.dataset)`, or the shapes once before the loop.
    """

    code = "SPD105"
    name = "dataloader-materialized"
    impact = Impact(
        wastes="input pipeline (a whole epoch of batches loaded only to count them)",
        when="always; worst with file-backed datasets",
        typical="up to 2x epoch time",
        evidence="DataLoader.__len__ returns the number of batches without loading them",
        level=MEDIUM,
    )
    fixes = (SAFE, DISPLAY_ONLY)
    triggers = ("list(", "next(")
    ast_precondition = staticmethod(lambda facts: facts.may_have_training_step and facts.calls_any("list", "next"))

    def visit_Call(self, node: cst.Call) -> None:
        name = node.func.value if isinstance(node.func, cst.Name) else None
        if name == "len" and len(node.args) == 1:
            inner = node.args[0].value
            if _is_call(inner, "list"):
                self._len_of_list(node, cast(cst.Call, inner))  # (`_is_call`: a Call)
        elif name == "list" and len(node.args) == 1:
            parent = self.ctx.torch.parent(node)
            if not (isinstance(parent, cst.Arg) and _is_call(self.ctx.torch.parent(parent), "len")):
                self._list_for_len(node)
        elif name == "next" and len(node.args) == 1 and _is_call(node.args[0].value, "iter"):
            self._peek(node)

    # -- context -----------------------------------------------------------------------------
    def _when(self, node: cst.CSTNode) -> Optional[str]:
        facts = self.ctx.torch
        if facts.in_training_step(node):
            return "every training step"
        if facts.epoch_of(node) is not None:
            return "every epoch"
        fn = facts.enclosing_function(node)
        if fn is not None and facts.in_loop(node) is None:
            # a function that runs one epoch per call (`train_epoch(...)`): its step loop is here,
            # and no epoch loop around it
            steps = [l for l in facts.step_loops if facts.enclosing_function(l) is fn]
            epochs = [l for l in facts.epoch_loops if facts.enclosing_function(l) is fn]
            if steps and not epochs:
                return f"every epoch (each call of `{fn.name.value}()`)"
        return None

    def _loader(self, expr: cst.BaseExpression) -> Optional[str]:
        """"known" (a DataLoader of this file), "loop" (what a training loop iterates), or None."""
        facts = loader_facts(self.ctx)
        calls = facts.origins(expr)
        if calls:
            if any(facts.iterable_dataset(facts.dataset_expr(c)) for c in calls):
                return "loop"
            return "known"
        if isinstance(expr, (cst.Name, cst.Attribute)):
            code = self.ctx.code(expr)
            fn = self.ctx.torch.enclosing_function(expr)
            for loop in self.ctx.torch.step_loops:
                if not isinstance(loop, cst.For) or self.ctx.torch.enclosing_function(loop) is not fn:
                    continue
                if any(self.ctx.code(e) == code for e in facts.unwrap(loop.iter)):
                    return "loop"
        return None

    # -- patterns ----------------------------------------------------------------------------
    def _len_of_list(self, node: cst.Call, inner: cst.Call) -> None:
        if len(inner.args) != 1 or inner.args[0].star:
            return
        target = inner.args[0].value
        kind = self._loader(target)
        when = self._when(node)
        if kind is None or when is None:
            return
        message = f"`{self.ctx.code(node)}` loads every batch of the epoch to count them, {when}"
        if kind == "known":
            new = node.with_changes(args=[node.args[0].with_changes(value=target)])
            fix = Fix.replace(node, new, f"Use `len({self.ctx.code(target)})`", SAFE)
        else:
            fix = Fix.advice("Use `len(loader)` (the number of batches)")
        self.report(node, message, fix=fix, impact=self._impact(when))

    def _list_for_len(self, node: cst.Call) -> None:
        target = node.args[0].value
        if node.args[0].star or self._loader(target) is None:
            return
        when = self._when(node)
        parent = self.ctx.torch.parent(node)
        if when is None or not isinstance(parent, cst.Assign) or len(parent.targets) != 1:
            return
        var = parent.targets[0].target
        if not isinstance(var, cst.Name):
            return
        uses = self._uses(var, parent)
        if uses and all(_in_len(self.ctx, u) for u in uses):
            self.report(
                node,
                f"`{self.ctx.code(node)}` loads every batch of the epoch only to count them, {when}",
                fix=Fix.advice(f"Use `len({self.ctx.code(target)})` (the number of batches)"),
                impact=self._impact(when),
            )

    def _peek(self, node: cst.Call) -> None:
        inner = node.args[0].value
        assert isinstance(inner, cst.Call)
        if len(inner.args) != 1 or self._loader(inner.args[0].value) is None:
            return
        when = self._when(node)
        if when is None:
            return
        parent = self.ctx.torch.parent(node)
        sizes_only = _size_read(self.ctx, node)
        if not sizes_only and isinstance(parent, cst.Assign) and len(parent.targets) == 1:
            names = _names(parent.targets[0].target)
            uses = [u for n in names for u in self._uses(n, parent)]
            sizes_only = bool(uses) and all(_size_read(self.ctx, u) for u in uses)
        if not sizes_only:
            return
        self.report(
            node,
            f"`{self.ctx.code(node)}` starts the loader and loads a batch only to read its shape, {when}",
            fix=Fix.advice("Read the shapes once before the loop (or from the dataset)"),
            impact=self._impact(when),
        )

    def _impact(self, when: str) -> Impact:
        return self.impact.with_level(HIGH) if "step" in when else self.impact

    def _uses(self, var: cst.Name, assign: cst.CSTNode) -> List[cst.Name]:
        """Reads of `var` in the same function as `assign` (not the assignment itself)."""
        facts = self.ctx.torch
        fn = facts.enclosing_function(assign)
        scope = fn.body if fn is not None else self.ctx.module
        finder = _NameFinder(var.value)
        walk.visit(scope, finder)
        targets = {id(n) for n in _names(assign.targets[0].target)} if isinstance(assign, cst.Assign) else set()
        return [n for n in finder.found if id(n) not in targets and facts.enclosing_function(n) is fn]


def _is_call(node: Optional[cst.CSTNode], name: str) -> bool:
    return isinstance(node, cst.Call) and isinstance(node.func, cst.Name) and node.func.value == name


def _names(target: cst.BaseExpression) -> List[cst.Name]:
    if isinstance(target, cst.Name):
        return [target]
    if isinstance(target, (cst.Tuple, cst.List)):
        return [n for el in target.elements for n in _names(el.value)]
    return []


def _in_len(ctx: FileContext, name: cst.Name) -> bool:
    parent = ctx.torch.parent(name)
    return isinstance(parent, cst.Arg) and _is_call(ctx.torch.parent(parent), "len")


def _size_read(ctx: FileContext, node: cst.CSTNode) -> bool:
    """`node` (after indexing) is only read for `.shape`/`.size()`/`len(...)`."""
    child = node
    for _ in range(6):
        parent = ctx.torch.parent(child)
        if isinstance(parent, cst.Subscript) and parent.value is child:
            child = parent
            continue
        if isinstance(parent, cst.Attribute) and parent.value is child:
            return parent.attr.value in _SIZE_ATTRS
        if isinstance(parent, cst.Arg) and _is_call(ctx.torch.parent(parent), "len"):
            return True
        return False
    return False


class _NameFinder(cst.CSTVisitor):
    def __init__(self, name: str) -> None:
        super().__init__()
        self.name = name
        self.found: List[cst.Name] = []

    def visit_Name(self, node: cst.Name) -> None:
        if node.value == self.name:
            self.found.append(node)

    def visit_Attribute(self, node: cst.Attribute) -> bool:
        walk.visit(node.value, self)
        return False
