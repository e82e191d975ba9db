"""Where code runs often: "hot" contexts shared by the rules about per-step / per-batch work.

A node is hot when it runs once per training step (in a step loop or a same-file function called
from one), once per evaluation batch, once per element of a batch (a loop inside a step), or once
per sample (`Dataset.__getitem__`, `collate_fn` and their callees, when the rule asks for it).
Out-of-memory / error handlers (`except` blocks) are never hot: they run when something failed.

Framework hooks that run once per batch (`training_step` of a LightningModule, a
`transformers.Trainer` subclass's `training_step`, `on_train_batch_end` of a callback ...) count as
step functions when `hooks=True`.
"""

from __future__ import annotations

from typing import List, Optional

import libcst as cst

from speedlint.analyzer.context import FileContext
from speedlint.analyzer.frameworks.hooks import batch_hook

def in_handler(ctx: FileContext, node: cst.CSTNode) -> bool:
    """Inside an `except` block (out-of-memory / error recovery)."""
    return any(isinstance(a, (cst.ExceptHandler, cst.ExceptStarHandler)) for a in ctx.torch.ancestors(node))


def hook_of(ctx: FileContext, node: cst.CSTNode) -> Optional[str]:
    """"step" / "eval" when `node` is directly in a framework per-batch hook method."""
    facts = ctx.torch
    fn = facts.enclosing_function(node)
    if fn is None:
        return None
    cls = facts.function_class.get(fn)
    if cls is None:
        return None
    bases = [q for q in (ctx.qualname(base.value) for base in cls.bases) if q]
    return batch_hook(bases, fn.name.value)  # (the hook tables of `frameworks.hooks`)


def hot_context(
    ctx: FileContext,
    node: cst.CSTNode,
    *,
    per_sample: bool = True,
    hooks: bool = False,
) -> Optional[str]:
    """How often `node` runs, when that is "per step/batch/sample"; None when it is not hot."""
    facts = ctx.torch
    if in_handler(ctx, node):
        return None  # out-of-memory / error recovery
    if per_sample and facts.sample_function_of(node) is not None:
        return "per sample (in the dataset / collate path)"
    if facts.in_training_step(node):
        return "once per training step"
    if facts.eval_loop_of(node) is not None or facts.eval_function_of(node) is not None:
        return "once per evaluation batch"
    loop = facts.in_loop(node)
    if loop is not None and facts.in_training_step(loop):
        return "once per batch element"
    if hooks:
        kind = hook_of(ctx, node)
        if kind == "step":
            return "once per training step (in a per-batch hook)"
        if kind == "eval":
            return "once per evaluation batch (in a per-batch hook)"
    return None


def callers(ctx: FileContext, fn: cst.FunctionDef) -> List[cst.Call]:
    """Same-file calls that run `fn`."""
    facts = ctx.torch
    return [c for c in facts.calls if fn in facts.resolve_call(c)]


def is_direct(ctx: FileContext, node: cst.CSTNode, *, hooks: bool = False) -> bool:
    """The hot context is visible in the function holding `node` (a loop there, a per-sample root)."""
    facts = ctx.torch
    unit = facts.step_of(node)
    if isinstance(unit, (cst.For, cst.While)):
        return True
    if facts.eval_loop_of(node) is not None:
        return True
    if hooks and hook_of(ctx, node) is not None:
        return True
    fn = facts.enclosing_function(node)
    return fn is not None and fn.name.value in ("__getitem__", "__getitems__", "__call__") or (
        # a per-sample root of this file (not one another module's dataset reaches: cold code
        # elsewhere may call it too)
        fn is not None and fn in facts.local_sample_functions and not callers(ctx, fn)
    )


def all_callers_hot(ctx: FileContext, fn: cst.FunctionDef, *, per_sample: bool = True, hooks: bool = False) -> bool:
    found = callers(ctx, fn)
    return bool(found) and all(hot_context(ctx, c, per_sample=per_sample, hooks=hooks) for c in found)


CLEANUP_CALLS = ("collect", "empty_cache", "ipc_collect")


def only_cleanup(fn: cst.FunctionDef, names: tuple = CLEANUP_CALLS) -> bool:
    """The function body is only gc/cache-clearing calls (and a docstring / pass)."""
    body = fn.body.body
    for stmt in body:
        smalls = stmt.body if isinstance(stmt, cst.SimpleStatementLine) else [stmt]
        for small in smalls:
            if isinstance(small, cst.Pass):
                continue
            if isinstance(small, cst.Expr) and isinstance(small.value, (cst.SimpleString, cst.ConcatenatedString)):
                continue
            if isinstance(small, cst.Expr) and isinstance(small.value, cst.Call):
                func = small.value.func
                if isinstance(func, cst.Attribute) and func.attr.value in names:
                    continue
            return False
    return True


