"""SPD203 tensor-created-then-moved."""

from __future__ import annotations

from typing import List, Optional, Tuple, cast

import libcst as cst

from speedlint.analyzer.fixes import keyword_arg, with_keyword
from speedlint.analyzer.rule import LOW, MEDIUM, SAFE, UNSAFE, Applicability, Fix, Impact, Rule
from speedlint.analyzer.providers.flow import MAYBE_DEVICE, Move, flow
from speedlint.analyzer.vocabulary import FACTORIES

_CASTS = {"float", "double", "half", "bfloat16", "long", "int", "short", "bool", "byte", "char"}
#: Factories whose values are exact in every dtype: creating them in the target dtype directly
#: gives the same tensor as creating then casting.
_EXACT = {"zeros", "ones", "empty", "eye", "zeros_like", "ones_like", "empty_like"}


#: Arithmetic with a number that keeps a factory's result a fresh tensor (`torch.ones(n) * i`).
_SCALAR_OPS = (cst.Multiply, cst.Add, cst.Subtract, cst.Divide)


def _number_like(expr: cst.BaseExpression) -> bool:
    """A literal number, a name or an attribute (`i`, `self.scale`), possibly negated."""
    if isinstance(expr, cst.UnaryOperation):
        expr = expr.expression
    return isinstance(expr, (cst.Integer, cst.Float, cst.Name, cst.Attribute))


class TensorCreatedThenMoved(Rule):
    """
    ## What it does
    Flags tensors created on the CPU by a torch factory and moved straight away:
    `torch.zeros(n).to(device)`, `torch.arange(t).cuda()`, `torch.tensor(data).to("cuda")`.

    ## Why is this slow?
    The tensor is allocated and filled on the host, then copied to the device: two allocations
    and a blocking host-to-device copy where one device allocation would do. In a training step
    or a `forward` (position ids, masks, target buffers) that happens on every batch.

    ## Example
    ```python
    mask = torch.ones(batch, seq).to("cuda")
    ```

    ## Use instead
    ```python
    mask = torch.ones(batch, seq, device="cuda")
    ```

    ## Fix safety
    Safe when the argument is clearly a device: a string literal such as `"cuda"`, a
    `torch.device(...)`, a name bound to one of those, or `x.device`; `.cuda()` becomes
    `device="cuda"`. Unsafe when it is a variable whose value is unknown, because `.to(x)` also
    accepts a dtype or a tensor. A factory with `requires_grad=True` becomes a leaf tensor once
    created on the device: unsafe. A move that also casts (`.to(device, dtype)`)
    passes `dtype=` too for factories whose values are exact in any dtype (`zeros`, `ones`,
    `empty`, `eye`) and keeps the cast otherwise. A factory times a number
    (`(torch.ones(n) * t).long().to(device)`, a timestep tensor in a sampling loop) gets `device=`
    on the factory: unsafe, because the number may be a CPU tensor. `.to(dtype)` casts, moves to the CPU, and
    factories already given `device=` are not flagged.

    ## Not flagged
    Random factories (`torch.rand`, `torch.randn`, `torch.randint`, `torch.randperm` and their
    `_like` forms): on the device they draw from the device's generator, so the numbers change.
    Code often draws on the CPU on purpose (a `randperm` train/validation split that must be the
    same on every machine, noise that must match a CPU-seeded run).

    ## References
    - PyTorch performance tuning guide, "Create tensors directly on the target device"
    """

    code = "SPD203"
    name = "tensor-created-then-moved"
    impact = Impact(
        wastes="host-device transfer (host allocation + blocking copy)",
        when="GPU; per step when it runs in a step or a forward",
        typical="tens of microseconds per call; a few % of step time in forward-heavy code",
        evidence="PyTorch performance tuning guide",
        level=MEDIUM,
    )
    fixes = (SAFE, UNSAFE)
    triggers = (".to(", ".cuda(")
    ast_precondition = staticmethod(
        lambda facts: facts.may_use_gpu and facts.moves_any(*FACTORIES)
    )

    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        if not isinstance(func, cst.Attribute) or func.attr.value not in ("to", "cuda"):
            return
        factory = func.value
        casts = []  # `torch.tensor(x).long().cuda()`: dtype conversions between factory and move
        while isinstance(factory, cst.Call) and isinstance(factory.func, cst.Attribute) and factory.func.attr.value in _CASTS and not factory.args:
            casts.append(factory)
            factory = factory.func.value
        scaled = None  # `(torch.ones(n) * i).long().to(device)`: a factory times a number
        if isinstance(factory, cst.BinaryOperation) and isinstance(factory.operator, _SCALAR_OPS):
            scaled = factory
            if isinstance(factory.left, cst.Call) and _number_like(factory.right):
                factory = factory.left
            elif isinstance(factory.right, cst.Call) and _number_like(factory.left):
                factory = factory.right
        if not isinstance(factory, cst.Call) or not self.ctx.may_use_gpu:
            return
        q = self.ctx.qualname(factory.func) or ""
        short = q[len("torch."):] if q.startswith("torch.") else ""
        if short not in FACTORIES:
            return  # (random factories are left alone: a different random stream on the device)
        if any(a.star == "**" for a in factory.args):
            return  # `device=` may already arrive through the splat
        for kw in ("device", "out", "pin_memory", "layout"):
            if keyword_arg(factory, kw) is not None:
                return
        move = flow(self.ctx).parse_move(node)
        if move is None or not move.moves_to_device or move.extra and set(move.extra) - {"copy"}:
            return
        fixed, applicability = self._fixed(factory, move, short, casts, scaled)
        where = self._where(node)
        what = f"`torch.{short}(...)` is created on the CPU, then copied by `.{move.method}(...)`"
        self.report(
            node,
            f"{what}{where}: create it on the device with `device=`",
            fix=Fix.replace(node, fixed, "Create the tensor on the device", applicability) if fixed is not None else Fix.advice("Pass `device=` to the factory"),
            impact=self.impact if where else self.impact.with_level(LOW),
        )

    def _where(self, node: cst.CSTNode) -> str:
        facts = self.ctx.torch
        if facts.in_training_step(node):
            return " in every training step"
        fn = facts.enclosing_function(node)
        if fn is not None and fn in facts.forward_functions:
            return " in every forward pass"
        if facts.in_loop(node) is not None or facts.eval_loop_of(node) is not None:
            return " in a loop"
        return ""

    def _fixed(
        self, factory: cst.Call, move: Move, short: str, casts: List[cst.Call], scaled: Optional[cst.BinaryOperation] = None
    ) -> Tuple[cst.BaseExpression, Applicability]:
        # (a factory in arithmetic: the other operand may be a CPU tensor, which the device would refuse)
        applicability = SAFE if scaled is None else UNSAFE
        if move.method == "cuda":
            target = move.target
            if target is None:
                device: cst.BaseExpression = cst.SimpleString('"cuda"')
            elif isinstance(target, cst.Integer):
                device = cst.SimpleString(f'"cuda:{target.value}"')
            else:
                device = target
                applicability = UNSAFE  # `.cuda(x)`: x may be an index, a string or a device
        else:
            assert move.target is not None
            device = move.target
            if move.kind == MAYBE_DEVICE:
                applicability = UNSAFE
        requires_grad = keyword_arg(factory, "requires_grad")
        if requires_grad is not None and not (isinstance(requires_grad.value, cst.Name) and requires_grad.value.value == "False"):
            applicability = UNSAFE  # the result becomes a leaf that collects `.grad`
        new: cst.BaseExpression = with_keyword(factory, "device", device)
        if scaled is not None:
            new = scaled.with_changes(**{"left" if scaled.left is factory else "right": new})
        for conversion in reversed(casts):  # innermost first
            new = conversion.with_changes(func=conversion.func.with_changes(value=new))
        if move.dtype is not None:
            if short in _EXACT and keyword_arg(factory, "dtype") is None and not casts and scaled is None:
                new = with_keyword(cast(cst.Call, new), "dtype", move.dtype)  # (no cast, no arithmetic: the factory call)
            else:
                new = cst.Call(
                    func=cst.Attribute(value=new, attr=cst.Name("to")),
                    args=[cst.Arg(value=move.dtype)],
                )
        new = new.with_changes(lpar=move.call.lpar, rpar=move.call.rpar)
        return new, applicability

