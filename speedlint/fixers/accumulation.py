"""The gradient-accumulation codemod (SPD303): step the optimizer every N batches.

For every training-step loop without accumulation:

* an `accumulation_steps` knob: an argparse option `--accumulation-steps` (default N) when the
  script parses arguments where the step can see them, else a module constant
  `ACCUMULATION_STEPS = N` after the imports;
* the loss is divided by it in the backward call only (`(loss / N).backward()`, or
  `scaler.scale(loss / N).backward()`), so logged losses keep their meaning;
* the update statements after the backward (`optimizer.step()`, `scaler.step/update/unscale_`,
  gradient clipping, a per-batch scheduler step, `zero_grad`) run when
  `(batch_idx + 1) % N == 0 or batch_idx + 1 == len(loader)` (every N batches and on the last
  batch of the epoch); a `zero_grad()` before the forward runs when `batch_idx % N == 0`;
* `for batch in loader` (also tqdm-wrapped) becomes `for batch_idx, batch in enumerate(loader)`.

With N = 1 the program computes exactly what it did before (division by 1 is exact, every
condition is always true). Steps that already accumulate are left alone; idempotent.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Dict, List, Optional, Tuple, Union, cast

import libcst as cst
from libcst.codemod import Codemod, CodemodContext

from speedlint.analyzer.context import FileContext
from speedlint.analyzer.providers.names import dotted
from speedlint.analyzer.providers.training import SCHEDULER_HINT
from speedlint.analyzer.providers import walk
from speedlint.fixers._common import (
    Edits,
    Loop,
    block_of,
    calls_in,
    context_for,
    expr_statement,
    fresh_name,
    is_clip,
    is_zero_grad,
    parse_expr,
    parse_stmt,
    receiver,
    scaler_of_backward,
    step_calls,
)

KNOB_CONSTANT = "ACCUMULATION_STEPS"
KNOB_OPTION = "accumulation_steps"


@dataclass
class StepPlan:
    loop: Loop
    accumulates: bool = False
    reason: Optional[str] = None
    edits: List = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.reason is None and not self.accumulates


class _Fail(Exception):
    pass


def plan(ctx: FileContext, steps: int = 1) -> Dict[Loop, StepPlan]:
    """The accumulation rewrite of each training step of the file, for `steps` batches per
    update (made once per file and count)."""
    made = ctx.provider(_plans_by_steps)
    if steps not in made:
        made[steps] = _plan(ctx, steps)
    return made[steps]


def _plans_by_steps(ctx: FileContext) -> Dict[int, Dict[Loop, StepPlan]]:
    return {}


def _plan(ctx: FileContext, steps: int) -> Dict[Loop, StepPlan]:
    plans: Dict[Loop, StepPlan] = {}
    knob = _Knob(ctx, steps)
    for loop in sorted(ctx.torch.step_loops, key=lambda n: ctx.torch.order.get(n, 0)):
        p = StepPlan(loop)
        p.accumulates = _accumulates(ctx, loop)
        if not p.accumulates:
            try:
                _plan_step(ctx, p, knob)
            except _Fail as exc:
                p.reason = str(exc)
        plans[loop] = p
    return plans


def rewrite(module: cst.Module, steps: int = 1, ctx: Optional[FileContext] = None) -> cst.Module:
    if ctx is None or ctx.module is not module:
        ctx = context_for(module)
    edits = Edits()
    for p in plan(ctx, steps).values():
        if p.ok:
            for apply in p.edits:
                apply(edits)
    return edits.apply(module) if edits else module


class AccumulationCodemod(Codemod):
    DESCRIPTION = "Gradient accumulation with an accumulation_steps knob (SPD303)."

    def __init__(self, context: CodemodContext, steps: int = 1) -> None:
        super().__init__(context)
        self.steps = steps

    def transform_module_impl(self, tree: cst.Module) -> cst.Module:
        return rewrite(tree, self.steps)


# -- detection -------------------------------------------------------------------------------------
def _accumulates(ctx: FileContext, loop: Loop) -> bool:
    """An optimizer step under an `if` with `%`, or a loss divided by an accumulation count."""
    facts = ctx.torch
    for c in step_calls(ctx, loop, facts.is_optimizer_step):
        for guard in facts.guarding_ifs(c):
            test = getattr(guard, "test", None)
            if test is not None and _has_modulo(test):
                return True
    for c in step_calls(ctx, loop, facts.is_backward):
        code = ctx.code(c)
        if "accum" in code.lower():
            return True
    return False


def _has_modulo(expr: cst.CSTNode) -> bool:
    found = []

    class V(cst.CSTVisitor):
        def visit_BinaryOperation(self, node: cst.BinaryOperation) -> None:
            if isinstance(node.operator, cst.Modulo):
                found.append(node)

    walk.visit(expr, V())
    return bool(found)


# -- the knob --------------------------------------------------------------------------------------
class _Knob:
    """Where `accumulation_steps` comes from; its definition is added once per file."""

    def __init__(self, ctx: FileContext, steps: int) -> None:
        self.ctx = ctx
        self.steps = steps
        self.parser_stmt: Optional[cst.SimpleStatementLine] = None
        self.parser_name: Optional[str] = None
        self.args_name: Optional[str] = None
        self.args_fn: Optional[cst.FunctionDef] = None
        self.added: set = set()
        facts = ctx.torch
        for call in facts.calls:
            func = call.func
            if isinstance(func, cst.Attribute) and func.attr.value == "add_argument":
                stmt = expr_statement(ctx, call)
                if stmt is not None:
                    self.parser_stmt, self.parser_name = stmt, dotted(func.value)
            if isinstance(func, cst.Attribute) and func.attr.value == "parse_args":
                parent = facts.parent(call)
                if isinstance(parent, cst.Assign) and len(parent.targets) == 1 and isinstance(parent.targets[0].target, cst.Name):
                    self.args_name = parent.targets[0].target.value
                    self.args_fn = facts.enclosing_function(parent)
        self.constant = fresh_name(ctx, KNOB_CONSTANT) if self.parser_stmt is None else KNOB_CONSTANT

    def expr_for(self, loop: Loop) -> str:
        """The knob's expression as seen from `loop`."""
        if self.parser_stmt is not None and self.args_name is not None:
            fn = self.ctx.torch.enclosing_function(loop)
            params = [p.name.value for p in fn.params.params] if fn is not None else []
            if self.args_fn is fn or self.args_fn is None or self.args_name in params:
                return f"{self.args_name}.{KNOB_OPTION}"
        return self.constant

    def define(self, e: Edits, expr: str) -> None:
        kind = "option" if "." in expr else "constant"
        if kind in self.added:
            return
        self.added.add(kind)
        if kind == "option":
            e.after[cast(cst.SimpleStatementLine, self.parser_stmt)].append(  # (an option only when there is a parser)
                parse_stmt(
                    f'{self.parser_name}.add_argument("--accumulation-steps", type=int, default={self.steps}, '
                    f'help="optimizer step every N batches (gradient accumulation)")\n'
                )
            )
            return
        body = list(self.ctx.module.body)
        last_import: Optional[Union[cst.SimpleStatementLine, cst.Try]] = None
        for stmt in body:
            if isinstance(stmt, cst.SimpleStatementLine) and all(isinstance(s, (cst.Import, cst.ImportFrom)) for s in stmt.body):
                last_import = stmt
            elif isinstance(stmt, cst.Try) and last_import is not None and stmt is body[body.index(last_import) + 1]:
                last_import = stmt  # `try: from tqdm import tqdm except ImportError: ...`
        line = parse_stmt(f"{expr} = {self.steps}  # optimizer step every N batches (gradient accumulation)\n")
        if last_import is None:
            e.before[body[0]].append(line)
        else:
            e.after[last_import].append(line.with_changes(leading_lines=[cst.EmptyLine()]))


# -- planning one step -----------------------------------------------------------------------------
def _plan_step(ctx: FileContext, p: StepPlan, knob: _Knob) -> None:
    facts = ctx.torch
    loop = p.loop
    if not isinstance(loop, cst.For):
        raise _Fail("a `while` step loop has no batch index")
    backwards = step_calls(ctx, loop, facts.is_backward)
    if len(backwards) != 1:
        raise _Fail("several backward passes per step (GAN-style): choose accumulation by hand")
    back = backwards[0]
    stmt = expr_statement(ctx, back)
    if stmt is None or facts.step_of(back) is not loop:
        raise _Fail("the backward call is not a statement of the loop body")
    block = block_of(ctx, stmt)
    if not isinstance(block, cst.IndentedBlock) or facts.parent(block) is not loop and not _in_plain_body(ctx, block, loop):
        raise _Fail("the backward call is nested inside other statements")
    if not isinstance(back.func, cst.Attribute) or back.func.attr.value != "backward" or any(a.keyword is None for a in back.args):
        raise _Fail("the backward call is not `loss.backward()`")
    body = list(block.body)
    k = body.index(stmt)

    # the update statements after the backward, in contiguous runs
    runs: List[List[cst.CSTNode]] = []
    current: List[cst.CSTNode] = []
    for s in body[k + 1 :]:
        if _is_update(ctx, s):
            current.append(s)
        else:
            if current:
                runs.append(current)
            current = []
    if current:
        runs.append(current)
    steps_in_runs = [c for run in runs for s in run for c in calls_in(ctx, s) if facts.is_optimizer_step(c) and not _is_scheduler(ctx, c)]
    all_steps = [c for c in step_calls(ctx, loop, facts.is_optimizer_step) if not _is_scheduler(ctx, c)]
    if not steps_in_runs or set(all_steps) != set(steps_in_runs):
        raise _Fail("the optimizer step is not a plain statement after the backward call")
    early_zero = [s for s in body[:k] if _is_zero_grad_stmt(s)]

    # the batch index and the loader
    index, sized, new_loop = _index_of(ctx, loop)
    acc = knob.expr_for(loop)

    def apply(e: Edits) -> None:
        knob.define(e, acc)
        sc = scaler_of_backward(back)

        def divide(node: cst.CSTNode) -> cst.CSTNode:
            new = cast(cst.Call, node)  # `loss.backward()` or `scaler.scale(loss).backward()` (checked above)
            func = cast(cst.Attribute, new.func)
            if sc is not None:
                scale = cast(cst.Call, func.value)
                arg = scale.args[0]
                div = cst.BinaryOperation(_paren(arg.value), cst.Divide(), parse_expr(acc))
                scale = scale.with_changes(args=[arg.with_changes(value=div)])
                return new.with_changes(func=func.with_changes(value=scale))
            div = cst.BinaryOperation(_paren(func.value), cst.Divide(), parse_expr(acc))
            return new.with_changes(func=func.with_changes(value=div.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])))

        e.replace[back] = divide
        cond = f"({index} + 1) % {acc} == 0 or {index} + 1 == len({sized})"

        def on_step(b: List[cst.BaseStatement]) -> cst.BaseStatement:
            return _if(cond, b)

        for run in runs:
            e.wrap(block, run[0], run[-1], on_step)
        for z in early_zero:
            e.wrap(block, z, z, lambda b: _if(f"{index} % {acc} == 0", b))
        if new_loop is not None:
            e.replace[loop] = lambda new: new.with_changes(target=new_loop[0], iter=new_loop[1])

    p.edits.append(apply)


def _in_plain_body(ctx: FileContext, block: cst.CSTNode, loop: Loop) -> bool:
    """`block` is the loop body or the body of a `with` in it (e.g. autocast, a profiler)."""
    node = ctx.torch.parent(block)
    while isinstance(node, cst.With):
        outer = ctx.torch.parent(node)
        if outer is loop.body:
            return True
        node = ctx.torch.parent(outer) if isinstance(outer, cst.IndentedBlock) else None
    return False


def _paren(expr: cst.BaseExpression) -> cst.BaseExpression:
    if isinstance(expr, (cst.BinaryOperation, cst.IfExp, cst.BooleanOperation, cst.Lambda, cst.UnaryOperation)) and not expr.lpar:
        return expr.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])
    return expr


def _if(cond: str, body: List[cst.BaseStatement]) -> cst.If:
    return cst.If(test=parse_expr(cond), body=cst.IndentedBlock(body=body))


def _is_scheduler(ctx: FileContext, call: cst.Call) -> bool:
    name = receiver(call) or ""
    return name in ctx.torch._scheduler_names or bool(SCHEDULER_HINT.search(name.rsplit(".", 1)[-1]))


def _is_zero_grad_stmt(stmt: cst.CSTNode) -> bool:
    return (
        isinstance(stmt, cst.SimpleStatementLine)
        and len(stmt.body) == 1
        and isinstance(stmt.body[0], cst.Expr)
        and isinstance(stmt.body[0].value, cst.Call)
        and is_zero_grad(stmt.body[0].value)
    )


def _is_update(ctx: FileContext, stmt: cst.CSTNode) -> bool:
    if not isinstance(stmt, cst.SimpleStatementLine):
        return False
    for small in stmt.body:
        value = small.value if isinstance(small, (cst.Expr, cst.Assign)) else None
        if not isinstance(value, cst.Call):
            return False
        func = value.func
        if is_zero_grad(value) or is_clip(ctx, value) or ctx.torch.is_optimizer_step(value):
            continue
        if isinstance(func, cst.Attribute) and func.attr.value in ("step", "update", "unscale_"):
            continue  # scaler.step/update/unscale_, scheduler.step
        return False
    return True


def _index_of(ctx: FileContext, loop: cst.For) -> Tuple[str, str, Optional[Tuple[cst.Tuple, cst.Call]]]:
    """(index name, sized loader expression code, new (target, iter) or None)."""
    it = loop.iter
    tq = _unwrap_tqdm(ctx, it)
    if _is_enumerate(ctx, it) or (tq is not None and _is_enumerate(ctx, tq)):
        en = it if _is_enumerate(ctx, it) else tq
        assert isinstance(en, cst.Call)
        if len(en.args) != 1 or en.args[0].keyword is not None:
            raise _Fail("enumerate(...) with a start value")
        target = loop.target
        if not isinstance(target, cst.Tuple) or len(target.elements) != 2 or not isinstance(target.elements[0].value, cst.Name):
            raise _Fail("cannot read the batch index of the loop")
        inner = _unwrap_tqdm(ctx, en.args[0].value) or en.args[0].value
        return target.elements[0].value.value, _sized(ctx, inner), None
    inner = tq if tq is not None else it
    sized = _sized(ctx, inner)
    index = fresh_name(ctx, "batch_idx", ctx.torch.enclosing_function(loop))
    target = loop.target
    if isinstance(target, cst.Tuple) and not target.lpar:
        target = target.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])
    new_target = cst.Tuple([cst.Element(cst.Name(index)), cst.Element(target)], lpar=[], rpar=[])
    new_iter = cst.Call(func=cst.Name("enumerate"), args=[cst.Arg(it)])
    return index, sized, (new_target, new_iter)


def _is_enumerate(ctx: FileContext, expr: cst.BaseExpression) -> bool:
    return isinstance(expr, cst.Call) and isinstance(expr.func, cst.Name) and expr.func.value == "enumerate"


def _unwrap_tqdm(ctx: FileContext, expr: cst.BaseExpression) -> Optional[cst.BaseExpression]:
    if isinstance(expr, cst.Call) and expr.args and expr.args[0].keyword is None:
        name = dotted(expr.func) or ""
        if name.rsplit(".", 1)[-1] in ("tqdm", "track", "progress_bar"):
            return expr.args[0].value
    return None


def _sized(ctx: FileContext, expr: cst.BaseExpression) -> str:
    if isinstance(expr, (cst.Name, cst.Attribute)) and dotted(expr):
        return ctx.code(expr)
    raise _Fail("the loop does not iterate a loader whose length is known")
