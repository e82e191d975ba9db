"""The AMP codemod (SPD301): run each FP32 training step's forward and loss under `torch.autocast`.

For every training step whose forward is not already under an enabled autocast:

* the statements from the forward to the loss (just before `backward()`) go into
  `with torch.autocast(device_type=..., dtype=...):`; the device type comes from the script's own
  device expression (`device.type`, a `"cuda"` literal, `torch.device(args.device).type` ...);
* float16 with a `torch.amp.GradScaler` on CUDA, bfloat16 without a scaler on CPU. When the device
  is only known at run time the code decides at run time:
  `amp_dtype = torch.float16 if device.type == "cuda" else torch.bfloat16` and
  `scaler = torch.amp.GradScaler(device.type, enabled=device.type == "cuda")`;
* the scaler is created once, next to the optimizer (`self.scaler` in a trainer class; passed as a
  `scaler` argument when the step function receives the optimizer as a parameter);
* `scaler.scale(loss).backward()`, `scaler.step(opt)` for every optimizer (GANs share one scaler),
  one `scaler.update()` after the last step, `scaler.unscale_(opt)` before gradient clipping;
* where the script checkpoints the optimizer, the scaler state is saved and loaded with it;
* a step that already has a `GradScaler` gets the autocast only (tied to `scaler.is_enabled()`);
* deprecated `torch.cuda.amp` spellings become `torch.amp`.

Steps already under autocast, eval loops and `no_grad` code are left alone; running it twice
changes nothing. `plan(ctx)` says per step loop whether (and why not) the rewrite is possible.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, FrozenSet, List, Literal, Optional, Sequence, Set, Tuple, Union, cast

import libcst as cst
from libcst.codemod import Codemod, CodemodContext

from speedlint.analyzer.context import FileContext
from speedlint.analyzer.fixes import with_keyword
from speedlint.analyzer.providers.flow import flow
from speedlint.analyzer.providers.amp_api import deprecated_sites
from speedlint.analyzer.providers.names import dotted
from speedlint.analyzer.providers import walk
from speedlint.analyzer.providers.branches import off_cuda_branch
from speedlint.analyzer.providers.tensor_aliases import tensor_type_alias
from speedlint.fixers._common import (
    SCALER_NAMES,
    DeviceType,
    Edits,
    Loop,
    bindings,
    block_of,
    calls_in,
    contains,
    context_for,
    device_candidates,
    device_type,
    expr_statement,
    fresh_name,
    is_clip,
    is_zero_grad,
    name_available,
    names_in,
    parse_expr,
    parse_stmt,
    receiver,
    scaler_of_backward,
    self_bindings,
    statement_line,
    step_calls,
    step_coverage,
    with_block,
)

FLOAT16, BFLOAT16 = "torch.float16", "torch.bfloat16"
Range = Tuple[cst.IndentedBlock, cst.CSTNode, cst.CSTNode]  # (block, first, last): statements to run under autocast


@dataclass
class StepPlan:
    loop: Loop
    reason: Optional[str] = None  # why the step cannot be rewritten (None: it can)
    covered: bool = False
    disabled_autocast: Optional[cst.Call] = None
    existing_scaler: Optional[str] = None
    edits: List = field(default_factory=list)  # callables(Edits) applying this step's part
    #: the first forward/loss statement (what the rewrite wraps first): where SPD301 reports
    anchor: Optional[cst.CSTNode] = None
    opt_in: Optional[str] = None  # autocast only behind this option, off by default
    opt_in_value: Any = None  # its traced value (where its default is written)
    config_site: Any = None  # autocast switched off by this config-file value
    remote: bool = False  # a distributed-autograd step: the forward runs on other processes

    @property
    def ok(self) -> bool:
        return self.reason is None and not self.covered


class _Fail(Exception):
    pass


def plan(ctx: FileContext) -> Dict[Loop, StepPlan]:
    """The AMP rewrite of each training step of the file (a provider: made once per file)."""
    return ctx.provider(_plan)


def _plan(ctx: FileContext) -> Dict[Loop, StepPlan]:
    plans: Dict[Loop, StepPlan] = {}
    scaler_names: Dict[int, str] = {}  # id(class) -> its scaler attribute
    for loop in sorted(ctx.torch.step_loops, key=lambda n: ctx.torch.order.get(n, 0)):
        p = StepPlan(loop)
        backwards = step_calls(ctx, loop, ctx.torch.is_backward)
        if backwards and all(ctx.matches(b.func, "torch.distributed.autograd.backward") for b in backwards):
            # RPC training: the forward runs in the workers' RPC handlers, beyond any autocast
            # written around this loop (the workers' own code decides their precision)
            p.remote = True
            p.reason = "the forward runs on remote workers (distributed autograd over RPC)"
            plans[loop] = p
            continue
        cov = step_coverage(ctx, loop, backwards)
        p.covered, p.disabled_autocast, p.opt_in, p.config_site = cov.covered, cov.disabled, cov.opt_in, cov.config_site
        p.opt_in_value = cov.opt_in_value
        if p.config_site is not None:
            p.reason = "AMP is there, switched off in the config file"
            p.anchor = _forward_anchor(ctx, loop, loop.body)  # the code side of the finding
        elif p.opt_in is not None:
            p.reason = f"AMP is there behind `{p.opt_in}`: turn the option on (or its default) instead"
            p.anchor = _forward_anchor(ctx, loop, loop.body)  # (the backward may sit in an `if` on the option)
            branch: Optional[cst.CSTNode] = p.anchor
            if isinstance(branch, cst.If) and ctx.code(branch.test) == p.opt_in and isinstance(branch.orelse, cst.Else):
                p.anchor = _forward_anchor(ctx, branch, branch.orelse.body)  # the FP32 forward that runs by default
        elif not p.covered:
            try:
                _plan_step(ctx, p, backwards, scaler_names)
            except _Fail as exc:
                p.reason = str(exc)
            if p.anchor is None and not backwards:  # backward and step in a callee elsewhere
                p.anchor = _forward_anchor(ctx, loop, loop.body)
            branch = p.anchor
            if isinstance(branch, cst.If) and isinstance(branch.orelse, cst.Else) and (
                (p.disabled_autocast is not None and ctx.torch.contains(branch.body, p.disabled_autocast))
                or off_cuda_branch(ctx, branch.test, True)
            ):
                p.anchor = _forward_anchor(ctx, branch, branch.orelse.body)  # the FP32 forward that runs on the GPU
        plans[loop] = p
    return plans


def rewrite(module: cst.Module, ctx: Optional[FileContext] = None) -> cst.Module:
    """The AMP rewrite of every FP32 training step in `module`."""
    if ctx is None or ctx.module is not module:
        ctx = context_for(module)
    edits = Edits()
    any_step = False
    for p in plan(ctx).values():
        if p.ok:
            any_step = True
            for apply in p.edits:
                apply(edits)
    if not any_step:
        return module
    _deprecated_edits(ctx, edits)
    return edits.apply(module)


def _deprecated_edits(ctx: FileContext, edits: Edits) -> None:
    """The `torch.amp` rewrites of the deprecated spellings (SPD302's sites), with the AMP edits."""
    for site in deprecated_sites(ctx):
        if site.pairs is None:
            continue
        for old, new in site.pairs:
            if old not in edits.replace:
                edits.replace[old] = new
        edits.imports.extend(site.imports)


class AmpCodemod(Codemod):
    """`libcst.codemod` form of the rewrite (for `python -m libcst.tool codemod` style use)."""

    DESCRIPTION = "Run FP32 training steps under torch.autocast with a GradScaler (SPD301)."

    def __init__(self, context: CodemodContext) -> None:
        super().__init__(context)

    def transform_module_impl(self, tree: cst.Module) -> cst.Module:
        return rewrite(tree)


# -- planning one step -----------------------------------------------------------------------------
def _plan_step(ctx: FileContext, p: StepPlan, backwards: List[cst.Call], scaler_names: Dict[int, str]) -> None:
    facts = ctx.torch
    if not backwards:
        raise _Fail("no backward() found in the step")
    stmts = []
    existing = set()
    for b in backwards:
        if not isinstance(b.func, cst.Attribute) or b.func.attr.value != "backward" or any(a.keyword is None for a in b.args):
            raise _Fail("the backward call is not `loss.backward()`")
        stmt = expr_statement(ctx, b)
        if stmt is None or not isinstance(block_of(ctx, stmt), cst.IndentedBlock):
            raise _Fail("the backward call is not a statement of its own")
        sc = scaler_of_backward(b)
        existing.add(sc[0] if sc else None)
        stmts.append(stmt)
        if p.anchor is None:
            p.anchor = _forward_anchor(ctx, stmt)
    if len(existing) != 1:
        raise _Fail("some backward calls are scaled and some are not")
    scaler = existing.pop()
    step_fns = {facts.enclosing_function(s) for s in stmts}
    if len(step_fns) != 1:
        raise _Fail("the backward calls are in different functions")
    step_fn = step_fns.pop()
    cls = facts.enclosing_class(stmts[0])

    # the statements to run under autocast, per backward
    ranges = [_forward_range(ctx, s) for s in stmts]

    opt_steps = [c for c in step_calls(ctx, p.loop, facts.is_optimizer_step) if not _is_scaler_call(c)]
    if scaler is None and not opt_steps:
        raise _Fail("no optimizer step found")
    for c in opt_steps:
        if c.args or expr_statement(ctx, c) is None or receiver(c) is None:
            raise _Fail("an optimizer step is not a plain `optimizer.step()` statement")
    if scaler is not None:
        p.existing_scaler = scaler
        if opt_steps:
            raise _Fail("a GradScaler is used, but some optimizer steps bypass it")
        existing_dev = _existing_scaler_device(ctx, scaler, cls)
        dtype = FLOAT16
        enabled = f"{scaler}.is_enabled()"
        p.edits.append(lambda e, r=ranges, d=existing_dev, en=enabled: _wrap_ranges(ctx, e, r, d.code, dtype, en))
        return

    # device of the step
    first = ranges[0][1]
    dev = _device_for(ctx, step_fn, cls, first, p.loop)
    if dev is None:
        raise _Fail("cannot tell which device the step runs on")
    if dev.static == "cpu":
        p.edits.append(lambda e, r=ranges: _wrap_ranges(ctx, e, r, '"cpu"', BFLOAT16, None))
        return

    # the scaler: created once, next to the optimizer
    opts = cast(List[str], list(dict.fromkeys(receiver(c) for c in opt_steps)))  # (each has one: checked above)
    site = _scaler_site(ctx, opts, step_fn, cls, scaler_names)
    scaler_dev = dev if site.scope_fn is step_fn and not site.threaded else _device_for(ctx, site.scope_fn, site.cls, site.after, None)
    if scaler_dev is None:
        raise _Fail("cannot tell which device the optimizer's scope uses")
    if scaler_dev.static == "cpu":
        raise _Fail("the step and the optimizer disagree on the device")

    ref = site.ref
    device_stmt = None
    # where the `amp_dtype` variable is set: (next to the scaler, code) or (before this loop, code, the loop)
    dtype_stmt: Optional[Union[Tuple[Literal["site"], str], Tuple[Literal["loop"], str, cst.CSTNode]]]
    if (
        dev.expr is not None
        and dev.expr.startswith("torch.device(")
        and scaler_dev == dev
        and site.scope_fn is step_fn
        and not site.threaded
        and site.cls is None
        and facts.is_before(site.after, p.loop)
    ):
        name = fresh_name(ctx, "device_type", step_fn)
        device_stmt = f"{name} = {dev.expr}"
        dev = scaler_dev = DeviceType(expr=name)
    if dev.static == "cuda":
        dtype_code = FLOAT16
        dtype_stmt = None
    else:
        dtype_value = f'{FLOAT16} if {dev.cuda_test} else {BFLOAT16}'
        if site.cls is not None and site.ref.startswith("self."):
            dtype_code = "self." + _fresh_attr(ctx, site.cls, "amp_dtype")
            dtype_stmt = ("site", f"{dtype_code} = {_scaler_dtype_value(scaler_dev)}")
        elif site.scope_fn is step_fn and not site.threaded and facts.is_before(site.after, p.loop):
            dtype_code = fresh_name(ctx, "amp_dtype", step_fn)
            dtype_stmt = ("site", f"{dtype_code} = {_scaler_dtype_value(scaler_dev)}")
        else:
            outer = _outermost_loop_in(ctx, stmts[0], step_fn)
            if outer is not None:
                dtype_code = fresh_name(ctx, "amp_dtype", step_fn)
                dtype_stmt = ("loop", f"{dtype_code} = {dtype_value}", outer)
            else:
                dtype_code, dtype_stmt = dtype_value, None
    if scaler_dev.static == "cuda":
        scaler_code = f'{ref} = torch.amp.GradScaler("cuda")'
    else:
        scaler_code = f"{ref} = torch.amp.GradScaler({scaler_dev.expr}, enabled={scaler_dev.cuda_test})"

    clips = [c for c in step_calls(ctx, p.loop, lambda c: is_clip(ctx, c))]
    for c in clips:
        clip_line = statement_line(ctx, c)
        if clip_line is None or not isinstance(block_of(ctx, clip_line), cst.IndentedBlock):
            raise _Fail("gradient clipping is not a statement of its own")
    early, covered = _gradient_users(ctx, stmts, opt_steps)
    clips = [c for c in clips if not _runs_in(ctx, c, covered)]
    use_ref = site.use_ref

    def scaled(new: cst.CSTNode) -> cst.CSTNode:
        func = cast(cst.Attribute, cast(cst.Call, new).func)  # a plain `loss.backward()` (checked above)
        return new.with_changes(
            func=func.with_changes(
                value=cst.Call(func=parse_expr(f"{use_ref}.scale"), args=[cst.Arg(_strip(func.value))])
            )
        )

    def apply(e: Edits) -> None:
        _wrap_ranges(ctx, e, ranges, dev.code, dtype_code, None)
        e.imports.append(("torch", None))
        for b in backwards:
            e.replace[b] = scaled
        for c in opt_steps:
            opt = receiver(c)
            e.replace[c] = parse_expr(f"{use_ref}.step({opt})")
        last = opt_steps[-1]
        e.after[cast(cst.SimpleStatementLine, expr_statement(ctx, last))].append(parse_stmt(f"{use_ref}.update()\n"))
        for c in clips:
            nxt = [s for s in opt_steps if ctx.torch.is_before(c, s)]
            opt = receiver(nxt[0] if nxt else opt_steps[-1])
            e.before[cast(cst.BaseStatement, statement_line(ctx, c))].append(parse_stmt(f"{use_ref}.unscale_({opt})\n"))
        for stmt, opt in early:
            e.before[stmt].append(parse_stmt(f"{use_ref}.unscale_({opt})\n"))
        new_lines = [parse_stmt(device_stmt + "\n")] if device_stmt else []
        if dtype_stmt is not None and dtype_stmt[0] == "site":
            new_lines.append(parse_stmt(dtype_stmt[1] + "\n"))
        new_lines.append(parse_stmt(scaler_code + "\n"))
        e.after[site.after].extend(new_lines)
        if dtype_stmt is not None and dtype_stmt[0] == "loop":
            e.before[dtype_stmt[2]].append(parse_stmt(dtype_stmt[1] + "\n"))
        site.thread(ctx, e)
        _checkpoint_edits(ctx, e, opts, site)

    p.edits.append(apply)


def _scaler_dtype_value(dev: DeviceType) -> str:
    return f"{FLOAT16} if {dev.cuda_test} else {BFLOAT16}"


def _strip(expr: cst.BaseExpression) -> cst.BaseExpression:
    return expr.with_changes(lpar=(), rpar=()) if not isinstance(expr, (cst.BinaryOperation, cst.IfExp)) else expr


def _is_scaler_call(call: cst.Call) -> bool:
    """`scaler.step(opt)`: a step through a GradScaler (it has the optimizer as argument)."""
    return bool(call.args) and isinstance(call.func, cst.Attribute) and call.func.attr.value == "step"


def _existing_scaler_device(ctx: FileContext, scaler: str, cls: Optional[cst.ClassDef]) -> DeviceType:
    creations: List[cst.BaseExpression] = []
    if scaler.startswith("self."):
        creations = [a.value for a in self_bindings(ctx, cls, scaler[5:])]
    else:
        creations = [b.value for _, b in bindings(ctx, scaler) if isinstance(b, (cst.Assign, cst.AnnAssign)) and b.value is not None]
    for value in creations:
        if isinstance(value, cst.Call) and ctx.matches(value.func, *SCALER_NAMES):
            if ctx.qualname(value.func) == "torch.cuda.amp.GradScaler":
                return DeviceType(static="cuda")
            args = [a for a in value.args if a.keyword is None or a.keyword.value == "device"]
            if args and (args[0].keyword is not None or not args[0].star):
                dev = device_type(ctx, args[0].value)
                if dev is not None and args[0].keyword is None and isinstance(args[0].value, cst.SimpleString):
                    return dev
                if dev is not None and dev.static:
                    return dev
                if args:
                    return DeviceType(expr=ctx.code(args[0].value))
    return DeviceType(static="cuda")


def _forward_anchor(ctx: FileContext, backward: cst.CSTNode, block: Optional[cst.CSTNode] = None) -> cst.CSTNode:
    """The first statement before `backward` in its block (or in `block`, a loop's body, when the
    backward is in a callee) that runs the model (or the loss, `_may_run_forward`) outside a
    grad-off block (a target network's `no_grad` forward is not the one to autocast first).
    When the backward's own block has none (`if accumulate: loss = criterion(out, y) ...`
    after `out = model(x)`), the blocks around it are searched, up to the loop or function.
    `backward` when there is none."""
    stmt = backward
    while True:
        found = _forward_in(ctx, stmt, block if block is not None else block_of(ctx, stmt))
        if found is not None or block is not None:
            return found if found is not None else backward
        owner = next((a for a in ctx.torch.ancestors(stmt) if isinstance(block_of(ctx, a), cst.IndentedBlock)), None)
        if owner is None or isinstance(owner, (cst.For, cst.While, cst.FunctionDef, cst.ClassDef)):
            return backward
        stmt = owner  # the `if`/`with`/`try` holding the backward: look before it


def _forward_in(ctx: FileContext, stmt: cst.CSTNode, block: Optional[cst.CSTNode]) -> Optional[cst.CSTNode]:
    """The first statement of `block` before `stmt` (all of it when `stmt` is not one of its
    statements) that runs the forward."""
    if not isinstance(block, cst.IndentedBlock):
        return None
    body: List[cst.CSTNode] = list(block.body)
    for candidate in body[: body.index(stmt)] if stmt in body else body:
        for call in calls_in(ctx, candidate):
            if ctx.torch.grad_disabled_at(call) is None and _may_run_forward(ctx, call):
                return candidate
    return None


def _may_run_forward(ctx: FileContext, call: cst.Call, depth: int = 2, seen: FrozenSet[cst.CSTNode] = frozenset()) -> bool:
    """Whether `call` may run the model or the loss: a call of a plain name or of a `self`
    attribute that is not a library function (`model(x)`, `self.criterion(out, y)`), not a
    method of something (`x.to(device)`, `provider.scale(p)`). A function of this file counts
    when its body makes such a call (`get_batch(data, i)`, which only slices, does not)."""
    func = call.func
    if isinstance(func, cst.Name):
        q = ctx.qualname(func)
        if q is None and tensor_type_alias(ctx, func) is not None:
            return False  # `Tensor(n, 1)` with `Tensor = torch.cuda.FloatTensor if cuda else ...`: a tensor, not a forward
        if q is None and func.value in _NOT_FORWARD_NAMES or q is not None and ("." in q or q in _NOT_FORWARD_NAMES):
            return False
        defs = [fn for fn in ctx.torch.resolve_call(call) if fn not in seen]
        if not defs or depth == 0:
            return True  # a model held in a variable, a function of another module
        return any(_may_run_forward(ctx, c, depth - 1, seen | {fn}) for fn in defs for c in calls_in(ctx, fn.body))
    if isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name) and func.attr.value not in _NOT_FORWARD_METHODS:
        if func.value.value == "self" or flow(ctx).is_model(func.value):
            return True  # `self.criterion(...)`, `agent.get_action_and_value(obs)`
    # `diffusion.training_losses(model, x, t)`: the model is handed to a project object that runs it
    return (
        isinstance(func, cst.Attribute)
        and ctx.qualname(func) is None
        and any(isinstance(a.value, cst.Name) and flow(ctx).is_model(a.value) for a in call.args)
    )


#: Methods of a model that do not run its forward.
_NOT_FORWARD_METHODS = frozenset({
    "to", "cuda", "cpu", "zero_grad", "train", "eval", "log", "print", "parameters", "named_parameters",
    "state_dict", "load_state_dict", "apply", "requires_grad_", "half", "float", "modules", "children",
})


#: Plain names that are never the model: builtins, and common helpers around a step.
_NOT_FORWARD_NAMES = frozenset({
    "len", "range", "print", "isinstance", "getattr", "setattr", "hasattr", "str", "int", "float", "bool", "list",
    "dict", "tuple", "set", "min", "max", "sum", "abs", "zip", "enumerate", "sorted", "iter", "next", "type",
    "round", "any", "all", "map", "filter", "open", "super",
})


def _gradient_users(
    ctx: FileContext, backwards: List[cst.SimpleStatementLine], opt_steps: List[cst.Call]
) -> Tuple[List[Tuple[cst.BaseStatement, str]], Set[cst.CSTNode]]:
    """Where the gradients must be unscaled before an optimizer step: the first statement between
    a `backward()` and the `optimizer.step()` of the same block that may read or change the
    gradients (`_uses_gradients`: a clip, `.grad`, a method of the model or the model handed to a
    helper, as `model.do_gradient_ops()` clipping in another module). Returns ((statement, the
    optimizer), ...) and the statements from there to the step (one `unscale_` covers the clips
    among them: a second one per step is an error)."""
    models = _model_names(ctx)
    early: List[Tuple[cst.BaseStatement, str]] = []
    covered: Set[cst.CSTNode] = set()
    for c in opt_steps:
        step = expr_statement(ctx, c)
        block = block_of(ctx, step) if step is not None else None
        if step is None or not isinstance(block, cst.IndentedBlock):
            continue
        body = list(block.body)
        at = body.index(step)
        before = [body.index(b) for b in backwards if block_of(ctx, b) is block and body.index(b) < at]
        if not before:
            continue
        between = body[max(before) + 1 : at]
        first = next((i for i, stmt in enumerate(between) if _uses_gradients(ctx, stmt, models)), None)
        if first is None:
            continue
        early.append((between[first], cast(str, receiver(c))))  # (a plain `optimizer.step()`: checked when planning)
        covered.update(between[first:])
    return early, covered


def _runs_in(ctx: FileContext, node: cst.CSTNode, stmts: Set[cst.CSTNode]) -> bool:
    """`node` is inside one of `stmts`, or in a same-file function that they run."""
    facts = ctx.torch
    if any(facts.contains(s, node) for s in stmts):
        return True
    fn = facts.enclosing_function(node)
    if fn is None:
        return False
    called = {f for c in facts.calls if any(facts.contains(s, c) for s in stmts) for f in facts.resolve_call(c)}
    return fn in called or fn in facts.callees_closure(called)


def _model_names(ctx: FileContext) -> FrozenSet[str]:
    """The objects whose parameters the file hands out (`model.parameters()`,
    `self.net.named_parameters()`): the models whose gradients an optimizer steps."""
    names = set()
    for c in ctx.torch.calls:
        func = c.func
        if isinstance(func, cst.Attribute) and func.attr.value in ("parameters", "named_parameters"):
            name = dotted(func.value)
            if name:
                names.add(name)
    return frozenset(names)


def _uses_gradients(ctx: FileContext, stmt: cst.CSTNode, models: FrozenSet[str]) -> bool:
    """`stmt` may read or change gradients: a gradient clip, a `.grad`, a method of a model, or a
    call handed a model (or its parameters)."""
    for node in walk.preorder(stmt):
        if isinstance(node, cst.Attribute) and node.attr.value == "grad":
            return True
        if isinstance(node, cst.Call):
            func = node.func
            if is_clip(ctx, node) or (isinstance(func, cst.Attribute) and dotted(func.value) in models):
                return True
            if any(dotted(a.value) in models for a in node.args):
                return True
    return False


def _forward_range(ctx: FileContext, stmt: cst.SimpleStatementLine) -> Range:
    """(block, first, last) statements before `stmt` that compute the forward and the loss."""
    block = block_of(ctx, stmt)
    assert isinstance(block, cst.IndentedBlock)
    body = list(block.body)
    k = body.index(stmt)
    lo = 0
    for i in range(k - 1, -1, -1):
        if _has_update(ctx, body[i]):
            lo = i + 1
            break
    hi = k
    while hi > lo and _is_prep(ctx, body[hi - 1], trailing=True):
        hi -= 1  # `loss = ...; optimizer.zero_grad(); loss.backward()`: the forward ends before it
    for i in range(lo, hi):  # the forward starts after the last zero_grad() before it
        if _is_prep(ctx, body[i], trailing=True):
            lo = i + 1
    while lo < hi and _is_prep(ctx, body[lo]):
        lo += 1
    if lo >= hi or not any(calls_in(ctx, s) for s in body[lo:hi]):
        raise _Fail("no forward/loss statements found before backward()")
    backward = cast(cst.Call, cast(cst.Expr, stmt.body[0]).value)  # `stmt` is a `loss.backward()` line (`expr_statement`)
    loss = dotted(cast(cst.Attribute, backward.func).value)
    if loss and "." not in loss and not any(_assigns(s, loss) for s in body[lo:hi]):
        raise _Fail(f"`{loss}` is not computed right before backward()")
    return block, body[lo], body[hi - 1]


def _assigns(stmt: cst.CSTNode, name: str) -> bool:
    found: List[cst.BaseSmallStatement] = []

    class V(cst.CSTVisitor):
        def visit_Assign(self, node: cst.Assign) -> None:
            for t in node.targets:
                if name in _names_of(t.target):
                    found.append(node)

        def visit_AugAssign(self, node: cst.AugAssign) -> None:
            if name in _names_of(node.target):
                found.append(node)

        def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
            if name in _names_of(node.target):
                found.append(node)

    walk.visit(stmt, V())
    return bool(found)


def _names_of(t: cst.BaseExpression) -> List[str]:
    if isinstance(t, cst.Name):
        return [t.value]
    if isinstance(t, (cst.Tuple, cst.List)):
        return [n for el in t.elements for n in _names_of(el.value)]
    return []


def _has_update(ctx: FileContext, stmt: cst.CSTNode) -> bool:
    facts = ctx.torch
    return any(facts.is_backward(c) or facts.is_optimizer_step(c) for c in calls_in(ctx, stmt))


def _is_prep(ctx: FileContext, stmt: cst.CSTNode, trailing: bool = False) -> bool:
    """zero_grad, moving the batch to the device, unpacking it: no forward math."""
    if not isinstance(stmt, cst.SimpleStatementLine):
        return False
    for small in stmt.body:
        if isinstance(small, cst.Expr) and isinstance(small.value, cst.Call) and is_zero_grad(small.value):
            continue
        if trailing:
            return False
        if isinstance(small, cst.Expr) and isinstance(small.value, cst.Call):
            func = small.value.func
            if isinstance(func, cst.Attribute) and func.attr.value == "train":
                continue
            return False
        if isinstance(small, cst.Assign) and _is_move(small.value):
            continue
        return False
    return True


def _is_move(value: cst.BaseExpression) -> bool:
    if isinstance(value, (cst.Tuple, cst.List)):
        return all(_is_move(el.value) for el in value.elements)
    if isinstance(value, (cst.Name, cst.Attribute, cst.Subscript)):
        return True
    if isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute) and value.func.attr.value in ("to", "cuda", "float", "long"):
        return _is_move(value.func.value)
    return False


def _wrap_ranges(ctx: FileContext, e: Edits, ranges: Sequence[Range], device_code: str, dtype: str, enabled: Optional[str]) -> None:
    args = f"device_type={device_code}, dtype={dtype}" + (f", enabled={enabled}" if enabled else "")
    item = cst.WithItem(parse_expr(f"torch.autocast({args})"))

    def under_autocast(body: List[cst.BaseStatement]) -> cst.BaseStatement:
        return with_block([item], body)

    for block, first, last in ranges:
        e.wrap(block, first, last, under_autocast)
    e.imports.append(("torch", None))


def _device_for(ctx: FileContext, scope_fn: Optional[cst.FunctionDef], cls: Optional[cst.ClassDef], at: cst.CSTNode, loop: Optional[Loop]) -> Optional[DeviceType]:
    """The device type of the code at `at`, from the device expressions its scope uses."""
    pools: List[List[cst.BaseExpression]] = []
    if loop is not None:
        pools.append(device_candidates(ctx, loop.body))
    pools.append(device_candidates(ctx, scope_fn) if scope_fn is not None else device_candidates(ctx, None))
    if cls is not None:
        pools.append([c for c in device_candidates(ctx, cls) if (dotted(c) or "").startswith("self.")])
    pools.append([c for c in device_candidates(ctx, None) if ctx.torch.enclosing_function(c) is None])
    for pool in pools:
        for cand in pool:
            if (dotted(cand) or "").startswith("self.") and cls is None:
                continue
            if not name_available(ctx, cand, scope_fn, at):
                continue
            dev = device_type(ctx, cand)
            if dev is not None:
                return dev
    return None


def _outermost_loop_in(ctx: FileContext, node: cst.CSTNode, fn: Optional[cst.FunctionDef]) -> Optional[cst.CSTNode]:
    outer = None
    for a in ctx.torch.ancestors(node):
        if a is fn:
            break
        if isinstance(a, (cst.For, cst.While)):
            outer = a
    return outer


# -- where the scaler lives --------------------------------------------------------------------------
@dataclass
class _Site:
    ref: str  # how the scaler is written where it is created (`scaler`, `self.scaler`)
    use_ref: str  # how the step refers to it
    after: cst.CSTNode  # the statement after which it is created
    scope_fn: Optional[cst.FunctionDef]
    cls: Optional[cst.ClassDef]
    threaded: Optional[Tuple[cst.FunctionDef, List[cst.Call]]] = None  # add a `scaler` parameter

    def thread(self, ctx: FileContext, e: Edits) -> None:
        if self.threaded is None:
            return
        fn, callers = self.threaded
        name = self.use_ref
        e.replace[fn.params] = lambda params: _add_param(cast(cst.Parameters, params), name)

        def with_scaler(new: cst.CSTNode) -> cst.CSTNode:
            return with_keyword(cast(cst.Call, new), name, cst.Name(self.ref))

        for call in callers:
            e.replace[call] = with_scaler

    def valid_at(self, ctx: FileContext, node: cst.CSTNode) -> bool:
        if self.ref.startswith("self."):
            return self.cls is not None and ctx.torch.enclosing_class(node) is self.cls and not contains(ctx, self.after, node)
        fn = ctx.torch.enclosing_function(node)
        if fn is self.scope_fn:
            return ctx.torch.is_before(self.after, node) and not contains(ctx, self.after, node)
        return self.scope_fn is None and fn is not None


def _add_param(params: cst.Parameters, name: str) -> cst.Parameters:
    new = cst.Param(cst.Name(name))
    if any(p.default is not None for p in params.params) or isinstance(params.star_arg, cst.Param) or params.kwonly_params:
        star = params.star_arg if isinstance(params.star_arg, (cst.Param, cst.ParamStar)) else cst.ParamStar()
        return params.with_changes(star_arg=star, kwonly_params=[*params.kwonly_params, new])
    return params.with_changes(params=[*params.params, new])


def _binding_statement(ctx: FileContext, assign: cst.CSTNode) -> Optional[cst.CSTNode]:
    line = ctx.torch.parent(assign)
    if isinstance(line, cst.SimpleStatementLine) and isinstance(block_of(ctx, line), (cst.IndentedBlock, cst.Module)):
        return line
    return None


def _scaler_site(ctx: FileContext, opts: List[str], step_fn: Optional[cst.FunctionDef], cls: Optional[cst.ClassDef], names: Dict[int, str]) -> _Site:
    facts = ctx.torch
    if all(o.startswith("self.") and o.count(".") == 1 for o in opts):
        if cls is None:
            raise _Fail("`self.` optimizer outside a class")
        stmts: List[cst.CSTNode] = []
        for o in opts:
            found = self_bindings(ctx, cls, o[5:])
            if len(found) != 1:
                raise _Fail(f"`{o}` is not created exactly once")
            line = _binding_statement(ctx, found[0])
            if line is None:
                raise _Fail(f"`{o}` is created inside a larger statement")
            stmts.append(line)
        after = max(stmts, key=lambda s: facts.order.get(s, 0))
        fn = facts.enclosing_function(after)
        if len({facts.enclosing_function(s) for s in stmts}) != 1:
            raise _Fail("the optimizers are created in different methods")
        name = names.setdefault(id(cls), "self." + _fresh_attr(ctx, cls, "scaler"))
        return _Site(name, name, after, fn, cls)
    if not all("." not in o for o in opts):
        raise _Fail("optimizer attribute that is not `self.<name>`")
    # plain names: a local, a global, or a parameter of the step function
    params = _param_names(step_fn)
    if any(o in params for o in opts):
        if not all(o in params for o in opts) or step_fn is None:
            raise _Fail("some optimizers are parameters and some are not")
        return _threaded_site(ctx, opts, step_fn)
    stmts = []
    for o in opts:
        local = [b for fn, b in bindings(ctx, o) if fn is step_fn]
        glob = [b for fn, b in bindings(ctx, o) if fn is None]
        chosen = local or glob
        if len(chosen) != 1:
            raise _Fail(f"`{o}` is not created exactly once")
        line = _binding_statement(ctx, chosen[0])
        if line is None:
            raise _Fail(f"`{o}` is created inside a larger statement")
        stmts.append(line)
    scopes = {facts.enclosing_function(s) for s in stmts}
    if len(scopes) != 1:
        raise _Fail("the optimizers are created in different scopes")
    after = max(stmts, key=lambda s: facts.order.get(s, 0))
    scope = scopes.pop()
    name = fresh_name(ctx, "scaler", scope)
    if step_fn is not scope and step_fn is not None and name in names_in(ctx, step_fn):
        raise _Fail("`scaler` is already a name in the step function")
    return _Site(name, name, after, scope, None)


def _param_names(fn: Optional[cst.FunctionDef]) -> List[str]:
    if fn is None:
        return []
    return [p.name.value for p in (*fn.params.posonly_params, *fn.params.params, *fn.params.kwonly_params)]


def _threaded_site(ctx: FileContext, opts: List[str], fn: cst.FunctionDef) -> _Site:
    facts = ctx.torch
    if facts.function_class.get(fn) is not None:
        raise _Fail("the optimizer is a method parameter")
    if isinstance(fn.params.star_kwarg, cst.Param):
        raise _Fail("the step function takes **kwargs")
    callers = [c for c in facts.calls if fn in facts.resolve_call(c)]
    if not callers:
        raise _Fail("the step function is never called in this file")
    params = [p.name.value for p in fn.params.params]
    stmts = []
    scopes = set()
    for call in callers:
        for o in opts:
            pos = params.index(o) if o in params else None
            kw = ctx.values.kwarg(call, o, pos)
            if kw.node is None or not isinstance(kw.node, cst.Arg) or not isinstance(kw.node.value, cst.Name):
                raise _Fail("the optimizer is not passed as a plain name")
            caller_fn = facts.enclosing_function(call)
            passed = kw.node.value.value
            found = [b for f, b in bindings(ctx, passed) if f is caller_fn] or [b for f, b in bindings(ctx, passed) if f is None]
            if len(found) != 1:
                raise _Fail(f"`{passed}` is not created exactly once")
            line = _binding_statement(ctx, found[0])
            if line is None:
                raise _Fail(f"`{passed}` is created inside a larger statement")
            stmts.append(line)
            scopes.add(facts.enclosing_function(line))
    if len(scopes) != 1:
        raise _Fail("the callers create the optimizers in different scopes")
    scope = scopes.pop()
    name = fresh_name(ctx, "scaler", scope)
    if fn is not None and name in names_in(ctx, fn):
        raise _Fail("`scaler` is already a name in the step function")
    after = max(stmts, key=lambda s: facts.order.get(s, 0))
    if any(not facts.is_before(after, c) for c in callers):
        raise _Fail("the optimizer is created after the step function is called")
    return _Site(name, name, after, scope, None, threaded=(fn, callers))


def _fresh_attr(ctx: FileContext, cls: cst.ClassDef, base: str) -> str:
    used = set()

    class V(cst.CSTVisitor):
        def visit_Attribute(self, node: cst.Attribute) -> None:
            used.add(node.attr.value)

    walk.visit(cls, V())
    name, i = base, 2
    while name in used:
        name, i = f"{base}{i}", i + 1
    return name


# -- checkpoints -----------------------------------------------------------------------------------
def _checkpoint_edits(ctx: FileContext, e: Edits, opts: List[str], site: _Site) -> None:
    """Save/load the scaler's state next to the optimizer's."""
    facts = ctx.torch
    key = "scaler"
    for call in facts.calls:
        func = call.func
        if not isinstance(func, cst.Attribute) or call.args and func.attr.value == "state_dict":
            continue
        name = dotted(func.value) if isinstance(func, cst.Attribute) else None
        if name not in opts or not site.valid_at(ctx, call):
            continue
        if func.attr.value == "state_dict":
            parent = facts.parent(call)
            holder = facts.parent(parent) if isinstance(parent, cst.DictElement) else None
            if isinstance(holder, cst.Dict) and not any(
                isinstance(el, cst.DictElement) and isinstance(el.key, cst.SimpleString) and el.key.evaluated_value == key
                for el in holder.elements
            ):
                def with_scaler_state(new: cst.CSTNode, parent: cst.DictElement = cast(cst.DictElement, parent)) -> cst.CSTNode:
                    return _dict_with(cast(cst.Dict, new), parent, key, f"{site.ref}.state_dict()")

                e.replace[holder] = with_scaler_state
        elif func.attr.value == "load_state_dict" and len(call.args) == 1:
            arg = call.args[0].value
            stmt = expr_statement(ctx, call)
            if stmt is None or not isinstance(arg, cst.Subscript):
                continue
            source = ctx.code(arg.value)
            e.after[stmt].append(parse_stmt(f'if "{key}" in {source}:\n    {site.ref}.load_state_dict({source}["{key}"])\n'))


def _dict_with(new: cst.Dict, after_el: cst.DictElement, key: str, value: str) -> cst.Dict:
    elements = list(new.elements)
    # find the updated element at the same position as the original one
    idx = next((i for i, el in enumerate(elements) if isinstance(el, cst.DictElement) and el.deep_equals(after_el)), len(elements) - 1)
    ref = elements[idx]
    element = cst.DictElement(cst.SimpleString(f'"{key}"'), parse_expr(value))
    prev = elements[idx - 1].comma if idx > 0 else None
    if isinstance(prev, cst.Comma) and isinstance(prev.whitespace_after, cst.ParenthesizedWhitespace):
        # one element per line: the new element takes the old one's (trailing) comma
        element = element.with_changes(comma=ref.comma)
        ref = ref.with_changes(comma=prev)
    else:
        if idx == len(elements) - 1:
            element = element.with_changes(comma=ref.comma)
        else:
            element = element.with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")))
        ref = ref.with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")))
    elements[idx] = ref
    elements.insert(idx + 1, element)
    return new.with_changes(elements=elements)
