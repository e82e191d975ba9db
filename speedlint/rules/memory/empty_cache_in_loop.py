"""SPD402 empty-cache-in-loop."""

from __future__ import annotations

import re
from typing import Optional, cast

import libcst as cst

from speedlint.analyzer.providers import hot
from speedlint.analyzer.context import FileContext
from speedlint.analyzer.fixes import remove_fix
from speedlint.analyzer.providers.flow import flow
from speedlint.analyzer.rule import DISPLAY_ONLY, HIGH, MEDIUM, SAFE, Fix, Impact, Rule

EMPTY_CACHE = (
    "torch.cuda.empty_cache",
    "torch.cuda.memory.empty_cache",
    "torch.mps.empty_cache",
    "torch.xpu.empty_cache",
)
#: An `if` that makes the call occasional or a reaction to memory pressure: not every step.
_DELIBERATE_GUARD = re.compile(
    r"%|memory_(allocated|reserved|cached|stats|summary)|mem_get_info|max_memory|(^|[^a-z])oom([^a-z]|$)|out_of_memory|OutOfMemory",
    re.I,
)
_MAX_CALLER_DEPTH = 6


class EmptyCacheInLoop(Rule):
    """
    ## What it does
    Flags `torch.cuda.empty_cache()` that runs once per training step, once per evaluation batch
    or once per element of a batch, directly or through a helper function called from such a place
    (in this file or another module; also in per-batch hooks such as a LightningModule's
    `training_step`). Once per epoch (in the epoch loop, or a function it calls) is reported at
    medium impact, as advice.

    ## Why is this slow?
    PyTorch keeps freed GPU memory in its caching allocator so the next step can reuse it without
    asking the driver. `empty_cache()` hands all unused cached blocks back to the driver: the next
    step has to `cudaMalloc` them again, and `cudaMalloc`/`cudaFree` synchronise the device. Called
    every step, this turns a free re-use into slow, synchronising allocations (often 10-40% of the
    step time) and does not lower the peak memory of the step at all: the same tensors are
    allocated again right after. It only helps other processes sharing the GPU, or fragmentation
    after an out-of-memory error.

    ## Example
    ```python
    def train(model, loader, optimizer):
        for x, y in loader:
            optimizer.zero_grad()
            loss = F.cross_entropy(model(x.cuda()), y.cuda())
            loss.backward()
            optimizer.step()
            torch.cuda.empty_cache()
    ```

    ## Use instead
    ```python
    def train(model, loader, optimizer):
        for x, y in loader:
            optimizer.zero_grad()
            loss = F.cross_entropy(model(x.cuda()), y.cuda())
            loss.backward()
            optimizer.step()
        torch.cuda.empty_cache()  # once, after training, if another process needs the memory
    ```

    ## Fix safety
    Safe: the call is removed (a `pass` is left where the block would be empty). Emptying the
    cache never changes results; it only releases memory the allocator would have reused. When the
    call sits in a helper that does nothing but clean up, the call of the helper at the hot site is
    removed instead; when the helper does more and is also called from cold code, the finding is
    advice only.

    Not flagged: calls in `except` blocks (out-of-memory recovery), calls guarded by a periodic
    test (`if step % 500 == 0`), by a memory-pressure test (`torch.cuda.memory_reserved() > ...`) or
    by an out-of-memory flag, once per epoch or after validation, and top-level script code. Nor
    one-off cleanup of a whole training run: a function with its own epoch loop (around the step
    loop, or around a one-epoch function) is a run, and a loop that calls it (hyper-parameter
    evolution, a sweep, repeated experiments, also from another module) loops over runs, not
    epochs: the run's code outside its own loops, and what it calls from there (start-up batch
    size probing), runs once per run.

    ## References
    - PyTorch docs, CUDA semantics: "Memory management" (the caching allocator and `empty_cache`)
    """

    code = "SPD402"
    name = "empty-cache-in-loop"
    impact = Impact(
        wastes="device time (re-allocating GPU memory with synchronising cudaMalloc/cudaFree)",
        when="GPU",
        typical="5-40% step time",
        evidence="PyTorch docs, CUDA semantics: memory management",
        level=HIGH,
    )
    fixes = (SAFE, DISPLAY_ONLY)
    triggers = ("empty_cache",)
    per_epoch = True
    ast_precondition = staticmethod(
        lambda facts: facts.calls_any("empty_cache") and (facts.may_run_hot or facts.may_have_hook)
    )

    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        if not self.ctx.matches(func, *EMPTY_CACHE) and not (
            # `acc = getattr(torch, device_type, torch.cuda)`, then `acc.empty_cache()`
            isinstance(func, cst.Attribute) and func.attr.value == "empty_cache" and flow(self.ctx).is_accelerator_module(func.value)
        ):
            return
        where = self._hot(node)
        if where is None:
            self._per_epoch(node)
            return
        facts = self.ctx.torch
        call_text = self.ctx.code(node.func)
        fn = facts.enclosing_function(node)
        if fn is not None and not hot.is_direct(self.ctx, node, hooks=True) and hot.only_cleanup(fn):
            sites = [c for c in hot.callers(self.ctx, fn) if self._hot(c)]
            if sites:
                for site in sites:
                    self.report(
                        site,
                        f"`{fn.name.value}()` only empties caches, and it is called {self._hot(site)}: "
                        "the next step re-allocates GPU memory from the driver",
                        fix=hot_site_fix(self, site, fn),
                        impact=self._impact(self._hot(site) or ""),
                    )
                return
        fix: Optional[Fix] = None
        if hot.is_direct(self.ctx, node, hooks=True) or (fn is not None and self._all_callers_hot(fn)):
            fix = removal_with_guard(self.ctx, node, f"Remove `{call_text}()`")
        self.report(
            node,
            f"`{call_text}()` runs {where}: cached GPU memory is handed back to the driver and "
            "re-allocated (with device synchronisation) right after",
            fix=fix or Fix.advice("Empty the cache at most once per epoch, or only after an out-of-memory error"),
            impact=self._impact(where),
        )

    def _per_epoch(self, node: cst.Call) -> None:
        """Once per epoch (in the epoch loop, or a function it calls, also from another module):
        every epoch starts by re-allocating what the cache held. Medium; advice only."""
        facts = self.ctx.torch
        if facts.epoch_of(node) is None or hot.in_handler(self.ctx, node) or self._deliberately_guarded(node):
            return
        call_text = self.ctx.code(node.func)
        self.report(
            node,
            f"`{call_text}()` runs once per epoch: the next epoch re-allocates GPU memory from the driver",
            fix=Fix.advice("Drop it, or empty the cache only after an out-of-memory error"),
            impact=self.impact.with_level(MEDIUM, "GPU; once per epoch"),
        )

    # -- context ---------------------------------------------------------------------------
    def _impact(self, where: str) -> Impact:
        if "evaluation" in where:
            return self.impact.with_level(MEDIUM)
        return self.impact

    def _hot(self, node: cst.CSTNode, depth: int = 0) -> Optional[str]:
        """Like `hot.hot_context`, but not behind a periodic / memory-pressure / OOM guard."""
        where = hot.hot_context(self.ctx, node, hooks=True)
        if where is None or self._deliberately_guarded(node):
            return None
        facts = self.ctx.torch
        fn = facts.enclosing_function(node)
        if fn is None or hot.is_direct(self.ctx, node, hooks=True) or depth >= _MAX_CALLER_DEPTH:
            return where
        sites = hot.callers(self.ctx, fn)
        if sites and not any(self._hot(c, depth + 1) for c in sites):
            return None  # every hot call of this helper is itself guarded
        return where

    def _all_callers_hot(self, fn: cst.FunctionDef) -> bool:
        sites = hot.callers(self.ctx, fn)
        return bool(sites) and all(self._hot(c) for c in sites)

    def _deliberately_guarded(self, node: cst.CSTNode) -> bool:
        child = node
        for a in self.ctx.torch.ancestors(node):
            if isinstance(a, (cst.For, cst.While, cst.FunctionDef, cst.ClassDef)):
                return False
            if isinstance(a, (cst.If, cst.IfExp)) and child is a.body:  # not the `else` branch
                if _DELIBERATE_GUARD.search(self.ctx.code(a.test)):
                    return True
            child = a
        return False


def hot_site_fix(rule: Rule, site: cst.Call, fn: cst.FunctionDef) -> Fix:
    return removal_with_guard(rule.ctx, site, f"Remove the call of `{fn.name.value}()` here") or Fix.advice(
        "Remove this call"
    )


_PURE_GUARD_CALLS = ("torch.cuda.is_available", "torch.backends.mps.is_available", "torch.xpu.is_available")


def _pure_test(ctx: FileContext, expr: cst.BaseExpression) -> bool:
    """A guard whose evaluation has no side effects (`torch.cuda.is_available()`, `args.cuda`, ...)."""
    if isinstance(expr, (cst.Name, cst.Attribute, cst.SimpleString, cst.Integer)):
        return True
    if isinstance(expr, cst.Call):
        return ctx.matches(expr.func, *_PURE_GUARD_CALLS) and not expr.args
    if isinstance(expr, cst.UnaryOperation):
        return _pure_test(ctx, expr.expression)
    if isinstance(expr, cst.BooleanOperation):
        return _pure_test(ctx, expr.left) and _pure_test(ctx, expr.right)
    if isinstance(expr, cst.Comparison):
        return _pure_test(ctx, expr.left) and all(_pure_test(ctx, c.comparator) for c in expr.comparisons)
    return False


def removal_with_guard(ctx: FileContext, node: cst.CSTNode, title: str) -> Optional[Fix]:
    """Remove the call's statement; when it is all an `if torch.cuda.is_available():` does, remove the `if`."""
    fix = remove_fix(ctx, node, title)
    if fix is None:
        return None
    facts = ctx.torch
    expr = facts.parent(node)
    line = facts.parent(expr) if expr is not None else None  # Call -> Expr -> SimpleStatementLine
    block = facts.parent(line) if isinstance(line, cst.SimpleStatementLine) else None
    guard = facts.parent(block) if isinstance(block, cst.IndentedBlock) else None
    if (
        isinstance(guard, cst.If)
        and guard.orelse is None
        and len(cast(cst.IndentedBlock, block).body) == 1  # (a guard only above a block)
        and _pure_test(ctx, guard.test)
    ):
        outer = facts.parent(guard)
        if isinstance(outer, cst.IndentedBlock) and len(outer.body) > 1:
            return Fix.many([(guard, cst.RemoveFromParent())], title, SAFE)
    return fix
