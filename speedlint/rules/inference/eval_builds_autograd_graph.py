"""SPD602 eval-builds-autograd-graph."""

from __future__ import annotations

from functools import cached_property
from typing import List, Set, Union

import libcst as cst

from speedlint.analyzer.providers.names import dotted
from speedlint.analyzer.rule import MEDIUM, UNSAFE, Fix, Impact, Rule
from speedlint.analyzer.providers.inference import (
    Escapes,
    Models,
    eval_receivers_before,
    is_test_file,
    iter_nodes,
    torch_attr,
)

Loop = Union[cst.For, cst.While]
GRAD_SWITCHES = ("torch.set_grad_enabled", "torch.enable_grad", "torch.autograd.grad", "torch.autograd.set_grad_enabled")


class EvalBuildsAutogradGraph(Rule):
    """
    ## What it does
    Flags an evaluation loop (no backward, after `model.eval()` or in a function named
    `evaluate`/`validate`/`test`/`predict`/`infer`) that runs the model with gradient recording
    on: no `torch.no_grad()`/`torch.inference_mode()` around it, no decorator on its function (a
    helper named after them, such as `@smart_inference_mode()`, counts), and no caller in the same
    file that disables gradients.

    `model.eval()` does not turn autograd off: it only switches dropout and batch norm to their
    inference behaviour.

    ## Why is this slow?
    With gradients on, every forward in the loop records the autograd graph and keeps the
    activations the backward pass would need, until the outputs are dropped. That costs
    dispatcher time per op and, mostly, memory: it limits the eval batch size and can run out
    of memory on models that fit in inference. Nothing ever calls backward on it.

    ## Example
    ```python
    def validate(model, loader):
        model.eval()
        total = 0.0
        for x, y in loader:
            total += F.cross_entropy(model(x), y).item()
        return total / len(loader)
    ```

    ## Use instead
    ```python
    def validate(model, loader):
        model.eval()
        total = 0.0
        with torch.inference_mode():
            for x, y in loader:
                total += F.cross_entropy(model(x), y).item()
        return total / len(loader)
    ```

    ## Fix safety
    Unsafe: the fix wraps the loop in `with torch.inference_mode():` (keeping the comments above
    it, and the file's spelling of torch). Tensors created in the loop become inference tensors:
    if any of them later reaches autograd (saved for a backward, updated in place outside
    inference mode), that code raises. Loops whose results feed buffers or attributes that
    training reads, loops that call backward or `torch.autograd.grad`, and functions that switch
    gradients explicitly (`set_grad_enabled`, `enable_grad`) are not flagged.

    ## References
    - PyTorch docs, "Autograd mechanics: locally disabling gradient computation"
    """

    code = "SPD602"
    name = "eval-builds-autograd-graph"
    impact = Impact(
        wastes="memory (activations kept for a backward that never runs) and autograd overhead",
        when="every evaluation loop; most with large models or eval batch sizes",
        typical="1.1-1.5x eval throughput, up to ~2x less activation memory",
        evidence="PyTorch docs: autograd mechanics; benchmarks/scenarios: eval_without_no_grad",
        level=MEDIUM,
    )
    fixes = (UNSAFE,)
    triggers = ("eval", "val", "Val", "test", "Test", "predict", "Predict", "infer", "Infer")
    ast_precondition = staticmethod(lambda facts: facts.may_have_named_eval_loop)

    @cached_property
    def models(self) -> Models:
        return Models(self.ctx)

    def visit_For(self, node: cst.For) -> None:
        self._check(node)

    def visit_While(self, node: cst.While) -> None:
        self._check(node)

    def _check(self, loop: Loop) -> None:
        if is_test_file(self.ctx.path):
            return
        facts = self.ctx.torch
        fn = facts.enclosing_function(loop)
        if loop in facts.eval_loops:
            where = f"in `{fn.name.value}()`" if fn is not None and facts.is_eval_function(fn) else "after `model.eval()`"
        elif fn is None and self._module_eval_loop(loop):
            where = "after `model.eval()`"
        else:
            return
        if facts.grad_disabled_at(loop) is not None or facts.in_training_step(loop):
            return
        scope_root: cst.CSTNode = fn.body if fn is not None else self.ctx.module
        if self._switches_grad(scope_root) or self._switches_grad(loop):
            return
        if fn is not None and (fn in facts.step_functions or fn in facts.forward_functions):
            return
        if not self.models.runs_forward(loop.body):
            return
        if self._body_disables_grad(loop):
            return  # `for x in loader: with torch.no_grad(): ...`: no graph (SPD601 judges that `no_grad`)
        if self._callees_disable_grad(loop):
            return  # the forward runs only in functions that turn gradients off themselves
        if fn is not None and self._covered_by_callers(fn, set()):
            return
        escapes = Escapes(self.ctx, self.models, fn if fn is not None else self.ctx.module, loop.body, whole_function=False)
        if escapes.training_bound:
            return
        if escapes.unsafe and (facts.reaches_backward(fn) if fn is not None else bool(facts.step_loops)):
            return  # its tensors stay in code that trains: they may reach autograd
        new_func, imports = torch_attr(self.ctx, "inference_mode")
        wrapped = cst.With(
            items=[cst.WithItem(item=cst.Call(func=new_func))],
            body=cst.IndentedBlock(body=[loop.with_changes(leading_lines=())]),
            leading_lines=loop.leading_lines,
        )
        spelled = self.ctx.module.code_for_node(new_func)
        self.report(
            loop,
            f"evaluation loop {where} records the autograd graph: `model.eval()` does not disable gradients",
            fix=Fix.replace(loop, wrapped, f"Wrap the loop in `with {spelled}():`", UNSAFE, imports),
        )

    # -- context ------------------------------------------------------------------------------
    def _module_eval_loop(self, loop: Loop) -> bool:
        facts = self.ctx.torch
        if loop in facts.step_loops or loop in facts.epoch_loops or facts.reaches_backward(loop):
            return False
        if any(isinstance(a, (cst.For, cst.While)) for a in facts.ancestors(loop)):
            return False  # the outermost loop is the per-batch one
        return eval_receivers_before(self.ctx, None, loop)

    def _body_disables_grad(self, unit: Union[Loop, cst.FunctionDef]) -> bool:
        """A `with no_grad()`/`inference_mode()` inside the loop (or function) around the model's forward."""
        facts = self.ctx.torch
        return any(
            isinstance(n, cst.With) and any(facts.is_grad_off(item.item) for item in n.items) and self.models.runs_forward(n.body)
            for n in iter_nodes(unit.body)
        )

    def _callees_disable_grad(self, loop: Loop) -> bool:
        """The loop runs the model only through functions of this file that turn gradients off
        (`@torch.no_grad() def score_image(model, x)`, or a `with no_grad()` around their forward)."""
        facts = self.ctx.torch
        covered = False
        for n in iter_nodes(loop.body):
            if not isinstance(n, cst.Call):
                continue
            if self.models.is_forward(n):
                if facts.grad_disabled_at(n) is None:
                    return False  # a forward of its own, with gradients
                continue
            for fn in facts.resolve_call(n):
                if not self.models.runs_forward(fn.body, 1):
                    continue
                if facts.grad_disabled_at(fn.body) is not None or self._body_disables_grad(fn):
                    covered = True
                else:
                    return False
        return covered

    def _switches_grad(self, root: cst.CSTNode) -> bool:
        for n in iter_nodes(root):
            if isinstance(n, cst.Call):
                if self.ctx.matches(n.func, *GRAD_SWITCHES) or self.ctx.torch.is_backward(n):
                    return True
                if isinstance(n.func, cst.Attribute) and n.func.attr.value == "requires_grad_":
                    return True
            elif isinstance(n, cst.Attribute) and n.attr.value == "requires_grad":
                return True
        return False

    def _call_sites(self, fn: cst.FunctionDef) -> List[cst.Call]:
        facts = self.ctx.torch
        sites = []
        for call in facts.calls:
            if fn in facts.resolve_call(call):
                sites.append(call)
            elif (
                facts.function_class.get(fn) is not None
                and isinstance(call.func, cst.Attribute)
                and call.func.attr.value == fn.name.value
                and dotted(call.func.value) not in ("self", "cls")
            ):
                sites.append(call)  # `trainer.evaluate()` on an instance
        return sites

    def _covered_by_callers(self, fn: cst.FunctionDef, seen: Set[cst.FunctionDef]) -> bool:
        """Every same-file caller runs it under `no_grad`/`inference_mode` (two levels up)."""
        if fn in seen or len(seen) > 2:
            return False
        seen.add(fn)
        facts = self.ctx.torch
        sites = self._call_sites(fn)
        if not sites:
            return False
        for site in sites:
            if facts.grad_disabled_at(site) is not None:
                continue
            caller = facts.enclosing_function(site)
            if caller is None or not self._covered_by_callers(caller, seen):
                return False
        return True
