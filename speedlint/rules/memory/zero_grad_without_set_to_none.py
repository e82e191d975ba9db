"""SPD403 zero-grad-without-set-to-none."""

from __future__ import annotations

from typing import TYPE_CHECKING, Iterable, List, Optional, Set, cast

import libcst as cst

from speedlint.analyzer.fixes import keyword_arg, with_keyword
from speedlint.analyzer.providers.names import dotted
from speedlint.analyzer.rule import DISPLAY_ONLY, LOW, SAFE, UNSAFE, Applicability, Fix, Impact, Rule

if TYPE_CHECKING:  # pragma: no cover
    from speedlint.analyzer.context import FileContext
    from speedlint.analyzer.providers.training import Unit

#: Constructors whose result has `zero_grad(set_to_none=...)`: optimizers and modules.
_TORCH_OBJECT_PREFIXES = ("torch.optim.", "torch.nn.", "torch.distributed.optim.", "torch.nn.parallel.")
#: Methods whose use shows that a receiver is an optimizer or a module.
_MODULE_METHODS = ("parameters", "named_parameters", "train", "eval", "state_dict", "load_state_dict", "to", "cuda")
_TRUE = cst.Name("True")


class ZeroGradWithoutSetToNone(Rule):
    """
    ## What it does
    Flags `optimizer.zero_grad(set_to_none=False)` (or `model.zero_grad(False)`) everywhere, and a
    bare `zero_grad()` when the project targets torch < 2.0, where `set_to_none` defaulted to
    `False`. The target version comes from `target-torch-version` in `[tool.speedlint]`, or from the
    project's declared torch requirement (`pyproject.toml` dependencies, `requirements*.txt`).
    A bare `zero_grad()` is left alone on torch >= 2.0 (already the default) and when the version is
    unknown. Receivers are optimizers and modules: a bare call on an object this file cannot show
    to be one is not flagged.

    Either form is left alone outside the training step: in the epoch loop before the step loop
    (the first zero of a gradient-accumulation loop), at the top of a one-epoch function, or before
    the epoch loop. It zero-fills once per epoch or once per run, which costs nothing measurable;
    the `zero_grad()` of the step itself is the one reported. A loop level that runs a backward of
    its own (an outer update around an inner step loop) is a step too, and is checked.

    ## Why is this slow?
    With `set_to_none=False` every step writes zeros into every gradient tensor (one memset kernel
    per parameter, reading nothing but writing the size of the model), and the next `backward()`
    then has to add into those zeros instead of simply storing a fresh gradient. The gradient memory
    also stays allocated between steps. With `set_to_none=True` the gradients are dropped and
    backward writes them directly: less memory traffic and a lower memory footprint.

    ## Example
    ```python
    def train(model, loader, optimizer):
        for x, y in loader:
            optimizer.zero_grad(set_to_none=False)
            loss = F.cross_entropy(model(x), y)
            loss.backward()
            optimizer.step()
    ```

    ## Use instead
    ```python
    def train(model, loader, optimizer):
        for x, y in loader:
            optimizer.zero_grad(set_to_none=True)
            loss = F.cross_entropy(model(x), y)
            loss.backward()
            optimizer.step()
    ```

    ## Fix safety
    The fix writes `set_to_none=True` (adding it to a bare `zero_grad()`). Optimizers skip
    parameters whose gradient is `None`, so a standard step computes the same result: the fix is
    safe. It is unsafe when the code reads `.grad` attributes (`p.grad.norm()`,
    `if p.grad is not None`, `p.grad.data`, manual SGD updates) anywhere in the function holding
    the call, in the training-step loop it runs in, or in same-file functions called from those
    (a conservative approximation of "between `zero_grad` and the next `backward`"): a gradient
    that used to be a zero tensor may now be `None`. When the `False` comes from a value defined
    elsewhere (a module constant, an argparse default), the finding is advice only: change the
    value where it is defined. Calls whose `set_to_none` arrives through `**kwargs` or a function
    parameter are not flagged.

    ## References
    - PyTorch docs, `torch.optim.Optimizer.zero_grad` (default `set_to_none=True` since 2.0)
    - PyTorch performance tuning guide: "Use parameter.grad = None instead of model.zero_grad()"
    """

    code = "SPD403"
    name = "zero-grad-without-set-to-none"
    impact = Impact(
        wastes="memory bandwidth and memory (zero-filling every gradient each step)",
        when="always; most for large models",
        typical="1-5% step time; gradient memory freed between steps",
        evidence="PyTorch performance tuning guide",
        level=LOW,
    )
    fixes = (SAFE, UNSAFE, DISPLAY_ONLY)
    triggers = ("zero_grad",)
    ast_precondition = staticmethod(lambda facts: facts.calls_any("zero_grad"))

    def __init__(self, ctx: FileContext) -> None:
        super().__init__(ctx)
        self._grad_reads: Optional[List[cst.Attribute]] = None

    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        if not isinstance(func, cst.Attribute) or func.attr.value != "zero_grad":
            return
        if any(a.star for a in node.args):
            return  # the value arrives through *args / **kwargs: unknowable
        if isinstance(func.value, cst.Call) and dotted(func.value.func) == "super":
            return  # a wrapper forwarding to its base class
        if self.ctx.torch.between_steps(node) is not None:
            return  # once per epoch or per run, outside the step: a negligible zero-fill
        arg = keyword_arg(node, "set_to_none")
        positional = [a for a in node.args if a.keyword is None]
        if arg is None and positional:
            arg = positional[0]
        receiver = self.ctx.code(func.value)
        if arg is not None:
            self._explicit(node, arg, receiver)
        else:
            self._bare(node, receiver)

    # -- the two forms ---------------------------------------------------------------------
    def _explicit(self, node: cst.Call, arg: cst.Arg, receiver: str) -> None:
        if arg.keyword is None and self._custom_zero_grad(cast(cst.Attribute, node.func)):  # (`visit_Call`: `<x>.zero_grad`)
            return
        literal = isinstance(arg.value, cst.Name) and arg.value.value == "False"
        if not literal:
            value = self.ctx.values.resolve(arg.value)
            if value is None or not value.certain or value.kind == "default" or not value.all(lambda v: v is False):
                return
            self.report(
                node,
                f"`{receiver}.zero_grad()` gets `set_to_none=False` (from `{self.ctx.code(arg.value)}`): "
                "every step zero-fills all gradients instead of dropping them",
                fix=Fix.advice(f"Set `{self.ctx.code(arg.value)}` to `True` where it is defined"),
            )
            return
        new_arg = arg.with_changes(
            keyword=cst.Name("set_to_none"),
            equal=cst.AssignEqual(whitespace_before=cst.SimpleWhitespace(""), whitespace_after=cst.SimpleWhitespace("")),
            value=_TRUE,
        )
        self.report(
            node,
            f"`{receiver}.zero_grad(set_to_none=False)` zero-fills every gradient each step instead of dropping them",
            fix=Fix.replace(arg, new_arg, "Use `set_to_none=True`", self._applicability(node)),
        )

    def _bare(self, node: cst.Call, receiver: str) -> None:
        version = self.ctx.settings.target_torch_version
        if version is None or tuple(version) >= (2, 0):
            return
        if not self._torch_receiver(cast(cst.Attribute, node.func).value, node):  # (`visit_Call`: `<x>.zero_grad`)
            return
        self.report(
            node,
            f"`{receiver}.zero_grad()` defaults to `set_to_none=False` on torch "
            f"{version[0]}.{version[1]} (the project's target): every step zero-fills all gradients",
            fix=Fix.replace(
                node, with_keyword(node, "set_to_none", _TRUE), "Add `set_to_none=True`", self._applicability(node)
            ),
        )

    # -- receivers -------------------------------------------------------------------------
    def _bindings(self, expr: cst.BaseExpression) -> List[cst.BaseExpression]:
        """Expressions assigned to a local/module name or a `self.x` attribute (best effort)."""
        values = self.ctx.values
        out: List[cst.BaseExpression] = []
        if isinstance(expr, cst.Name):
            _, bound = values._bindings(expr)
            found = bound
        elif isinstance(expr, cst.Attribute) and dotted(expr.value) == "self":
            cls = self.ctx.torch.enclosing_class(expr)
            found = values.index.self_attrs.get((cls, expr.attr.value), [])
        else:
            return out
        for b in found:
            if isinstance(b, cst.BaseExpression):
                out.append(b)
        return out

    def _constructed_class(self, expr: cst.BaseExpression) -> Iterable[cst.ClassDef]:
        for b in self._bindings(expr):
            if isinstance(b, cst.Call):
                name = dotted(b.func)
                yield from self.ctx.torch.class_defs.get(name or "", ())

    def _custom_zero_grad(self, func: cst.Attribute) -> bool:
        """The receiver is an instance of a same-file class whose `zero_grad` has no `set_to_none`."""
        for cls in self._constructed_class(func.value):
            for method in self.ctx.torch._methods_in_hierarchy(cls, "zero_grad"):
                names = [p.name.value for p in (*method.params.posonly_params, *method.params.params)]
                if "set_to_none" not in names and method.params.star_kwarg is None:
                    return True
        return False

    def _torch_receiver(self, expr: cst.BaseExpression, call: cst.Call) -> bool:
        """Whether this file shows `expr` to be an optimizer or an `nn.Module`."""
        if self._custom_zero_grad(cast(cst.Attribute, call.func)):  # (`visit_Call`: `<x>.zero_grad`)
            return False
        facts = self.ctx.torch
        for b in self._bindings(expr):
            if isinstance(b, cst.Call):
                q = self.ctx.qualname(b.func) or ""
                if q.startswith(_TORCH_OBJECT_PREFIXES):
                    return True
                for cls in self._constructed_class(expr):
                    if self._torch_class(cls):
                        return True
        if isinstance(expr, cst.Name):
            param = self._param(expr)
            if param is not None and param.annotation is not None:
                q = self.ctx.qualname(param.annotation.annotation) or ""
                if q.startswith(_TORCH_OBJECT_PREFIXES):
                    return True
        text = self.ctx.code(expr)
        for other in self._calls_in_scope(call):
            f = other.func
            if isinstance(f, cst.Attribute) and self.ctx.code(f.value) == text:
                if facts.is_optimizer_step(other) or f.attr.value in _MODULE_METHODS:
                    return True
            if isinstance(f, cst.Attribute) and f.attr.value == "step" and other.args:
                if self.ctx.code(other.args[0].value) == text:  # scaler.step(opt)
                    return True
            if self.ctx.code(f) == text and other is not call:  # model(x)
                return True
        return False

    def _torch_class(self, cls: cst.ClassDef, seen: Optional[Set[str]] = None) -> bool:
        seen = seen or set()
        if cls.name.value in seen:
            return False
        seen.add(cls.name.value)
        for base in cls.bases:
            q = self.ctx.qualname(base.value) or ""
            if q.startswith(_TORCH_OBJECT_PREFIXES):
                return True
            for parent in self.ctx.torch.class_defs.get(dotted(base.value) or "", ()):
                if self._torch_class(parent, seen):
                    return True
        return False

    def _param(self, name: cst.Name) -> Optional[cst.Param]:
        fn = self.ctx.torch.enclosing_function(name)
        if fn is None:
            return None
        for p in (*fn.params.posonly_params, *fn.params.params, *fn.params.kwonly_params):
            if p.name.value == name.value:
                return p
        return None

    def _calls_in_scope(self, call: cst.Call) -> List[cst.Call]:
        """Calls in the same function; for `self.x` receivers, in every method of the class."""
        facts = self.ctx.torch
        func = call.func
        assert isinstance(func, cst.Attribute)
        if dotted(func.value) and (dotted(func.value) or "").startswith("self."):
            cls = facts.enclosing_class(call)
            if cls is not None:
                return [c for c in facts.calls if facts.enclosing_class(c) is cls]
        fn = facts.enclosing_function(call)
        if fn is None:
            return [c for c in facts.calls if facts.enclosing_function(c) is None]
        return list(facts.units[fn].calls)

    # -- fix safety ------------------------------------------------------------------------
    def _applicability(self, call: cst.Call) -> Applicability:
        return UNSAFE if self._reads_grad_near(call) else SAFE

    def _all_grad_reads(self) -> List[cst.Attribute]:
        if self._grad_reads is None:
            self._grad_reads = list(_grad_reads(self.ctx))
        return self._grad_reads

    def _reads_grad_near(self, call: cst.Call) -> bool:
        facts = self.ctx.torch
        regions: List[cst.CSTNode] = []
        fn = facts.enclosing_function(call)
        regions.append(fn if fn is not None else self.ctx.module)
        step = facts.step_of(call)
        if step is not None:
            regions.append(step)
        for loop in facts.step_loops:
            if fn is not None and fn in facts.callees_closure([loop]):
                regions.append(loop)
        units = cast("List[Unit]", [r for r in regions if r in facts.units])  # the keys of `units` are units
        regions += list(facts.callees_closure(units))
        region_set = set(regions)
        for read in self._all_grad_reads():
            if read in region_set or any(a in region_set for a in facts.ancestors(read)):
                return True
        return False


def _grad_reads(ctx: FileContext) -> Iterable[cst.Attribute]:
    """Every `<expr>.grad` that reads a gradient (not `p.grad = None`, not `torch.autograd.grad`)."""
    facts = ctx.torch
    for node in facts.order:
        if not isinstance(node, cst.Attribute) or node.attr.value != "grad":
            continue
        if ctx.matches(node, "torch.autograd.grad") or dotted(node) in ("autograd.grad", "torch.autograd.grad"):
            continue
        parent = facts.parent(node)
        if isinstance(parent, cst.AssignTarget) and parent.target is node:
            continue
        yield node
