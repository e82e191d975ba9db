"""Worker counts taken from the machine: `os.cpu_count()`, `multiprocessing.cpu_count()`,
`len(os.sched_getaffinity(0))` are at least one worker on every machine.

The value tracer (`providers.values`) knows only numbers it can read; a count from the CPU count
is unknown to it, so a rule asking "has this loader workers?" (SPD103) got no answer. This fact
says yes for the forms that cannot be 0 anywhere: the call itself (an `or 1` / `int(...)` /
`round` around it), `min(8, <that>)` and `max(1, ...)` with a positive literal, reached through
local names, argparse defaults (`args.workers` with `default=os.cpu_count()`) and `self`
attributes. `cpu_count() - 1` and `cpu_count() // world_size` may be 0: no answer.
"""

from __future__ import annotations

from typing import Optional

import libcst as cst

from speedlint.analyzer.context import FileContext
from speedlint.analyzer.providers.loaders import LoaderFacts
from speedlint.analyzer.providers.names import dotted


def _positive_literal(expr: cst.BaseExpression) -> bool:
    return isinstance(expr, cst.Integer) and int(expr.value, 0) >= 1


def cpu_count_workers(ctx: FileContext, expr: Optional[cst.BaseExpression], depth: int = 0) -> Optional[str]:
    """The CPU-count call (as written) that makes `expr` a worker count of at least one on
    every machine, else None."""
    if expr is None or depth > 8:
        return None
    if isinstance(expr, cst.Call):
        q = ctx.qualname(expr.func) or ""
        if q in CPU_COUNT:
            return ctx.code(expr)
        name = dotted(expr.func) or ""
        args = [a.value for a in expr.args if not a.star and a.keyword is None]
        if name == "len" and len(args) == 1 and isinstance(args[0], cst.Call) and (ctx.qualname(args[0].func) or "") == "os.sched_getaffinity":
            return ctx.code(expr)
        if name in ("int", "round", "abs") and len(args) == 1:
            return cpu_count_workers(ctx, args[0], depth + 1)
        if name == "min" and len(args) >= 2:  # every argument at least one
            found = [cpu_count_workers(ctx, a, depth + 1) for a in args]
            if all(f is not None or _positive_literal(a) for f, a in zip(found, args)) and any(found):
                return next(f for f in found if f is not None)
            return None
        if name == "max" and len(args) >= 2:  # one argument at least one
            found = [cpu_count_workers(ctx, a, depth + 1) for a in args]
            if any(f is not None for f in found):
                return next(f for f in found if f is not None)
            if any(_positive_literal(a) for a in args):
                return ctx.code(expr)
        return None
    if isinstance(expr, cst.BooleanOperation) and isinstance(expr.operator, cst.Or):  # `os.cpu_count() or 1`
        left = cpu_count_workers(ctx, expr.left, depth + 1)
        if left is not None and (_positive_literal(expr.right) or cpu_count_workers(ctx, expr.right, depth + 1) is not None):
            return left
        return None
    if isinstance(expr, cst.Name):
        key = LoaderFacts.name_key_of(ctx, expr)
        values = [v for v in ctx.values.index.binds.get((key[1], key[2]), []) if isinstance(v, cst.BaseExpression)]
        found = [cpu_count_workers(ctx, v, depth + 1) for v in values]
        return found[0] if found and all(f is not None for f in found) else None
    if isinstance(expr, cst.Attribute):
        if dotted(expr.value) == "self":
            values = [v for v in ctx.values.index.self_attrs.get((ctx.torch.enclosing_class(expr), expr.attr.value), []) if isinstance(v, cst.BaseExpression)]
            found = [cpu_count_workers(ctx, v, depth + 1) for v in values]
            return found[0] if found and all(f is not None for f in found) else None
        calls = ctx.values.index.argparse.get(expr.attr.value, [])
        defaults = [a.value for call in calls for a in call.args if a.keyword is not None and a.keyword.value == "default"]
        if len(calls) == 1 and len(defaults) == 1:  # `args.workers` with `default=os.cpu_count()`
            return cpu_count_workers(ctx, defaults[0], depth + 1)
    return None


# -- workers from the CPU count, uncapped (SPD107) -------------------------------------------------
CPU_COUNT = ("os.cpu_count", "multiprocessing.cpu_count", "psutil.cpu_count", "torch.multiprocessing.cpu_count")


def uncapped_cpu_count(ctx: FileContext, expr: Optional[cst.BaseExpression], depth: int = 0) -> Optional[cst.Call]:
    """The `os.cpu_count()`-style call a worker count may be, not capped (`min(8, ...)`) nor
    divided (`cpu_count() // world_size`): through names, argparse defaults, `or 1`, `max`,
    `int(...)`, `len(os.sched_getaffinity(0))`, `- 1` and conditionals."""
    if expr is None or depth > 8:
        return None
    if isinstance(expr, cst.Call):
        q = ctx.qualname(expr.func) or ""
        if q in CPU_COUNT:
            return expr
        name = dotted(expr.func) or ""
        args = [a.value for a in expr.args if not a.star and a.keyword is None]
        if name == "len" and len(args) == 1 and isinstance(args[0], cst.Call) and (ctx.qualname(args[0].func) or "") == "os.sched_getaffinity":
            return args[0]
        if name in ("int", "max", "round", "abs"):
            for a in args:
                found = uncapped_cpu_count(ctx, a, depth + 1)
                if found is not None:
                    return found
        return None  # `min(8, ...)`, a helper: capped, or not known
    if isinstance(expr, cst.BooleanOperation):  # `os.cpu_count() or 1`
        return uncapped_cpu_count(ctx, expr.left, depth + 1) or uncapped_cpu_count(ctx, expr.right, depth + 1)
    if isinstance(expr, cst.BinaryOperation):
        if isinstance(expr.operator, (cst.Add, cst.Subtract, cst.Multiply)):  # `os.cpu_count() - 1`
            return uncapped_cpu_count(ctx, expr.left, depth + 1) or (
                uncapped_cpu_count(ctx, expr.right, depth + 1) if isinstance(expr.operator, (cst.Add, cst.Multiply)) else None
            )
        return None  # divided by the processes per node: capped
    if isinstance(expr, cst.IfExp):
        return uncapped_cpu_count(ctx, expr.body, depth + 1) or uncapped_cpu_count(ctx, expr.orelse, depth + 1)
    if isinstance(expr, cst.Name):
        key = LoaderFacts.name_key_of(ctx, expr)
        for value in ctx.values.index.binds.get((key[1], key[2]), []):
            if isinstance(value, cst.BaseExpression):
                found = uncapped_cpu_count(ctx, value, depth + 1)
                if found is not None:
                    return found
        return None
    if isinstance(expr, cst.Attribute):  # `args.workers` with `default=os.cpu_count()`
        for call in ctx.values.index.argparse.get(expr.attr.value, []):
            for arg in call.args:
                if arg.keyword is not None and arg.keyword.value == "default":
                    found = uncapped_cpu_count(ctx, arg.value, depth + 1)
                    if found is not None:
                        return found
        if dotted(expr.value) == "self":
            for value in ctx.values.index.self_attrs.get((ctx.torch.enclosing_class(expr), expr.attr.value), []):
                if isinstance(value, cst.BaseExpression):
                    found = uncapped_cpu_count(ctx, value, depth + 1)
                    if found is not None:
                        return found
    return None
