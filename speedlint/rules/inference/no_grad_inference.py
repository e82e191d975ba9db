"""SPD601 no-grad-inference."""

from __future__ import annotations


from functools import cached_property
from typing import List, Optional, Tuple

import libcst as cst

from speedlint.analyzer.providers.frameworks import framework_hook
from speedlint.analyzer.providers.intervals import branches
from speedlint.analyzer.providers.names import dotted
from speedlint.analyzer.providers.training import INFERENCE_VERB
from speedlint.analyzer.rule import LOW, SAFE, UNSAFE, Fix, Impact, ImportSpec, Rule
from speedlint.analyzer.providers.inference import (
    Escapes,
    Models,
    eval_receivers_before,
    is_test_file,
    iter_nodes,
    torch_attr,
    torch_spelling,
    updates_parameters,
)


#: `torch.inference_mode` appeared in torch 1.9.
_INFERENCE_MODE = (1, 9)


class NoGradInference(Rule):
    """
    ## What it does
    Flags `with torch.no_grad():` and `@torch.no_grad()` around an evaluation or inference loop
    or function (a validation loop, a function named `evaluate`/`validate`/`test`/`predict`/
    `infer`, code after `model.eval()`, a helper that an evaluation loop in another module calls on
    every batch, a `no_grad` function that only inference code calls anywhere in the project:
    the sampling loop of a generative model, an image-logging method a callback runs every N
    steps, an evaluation run every N steps from inside the training loop: `model.eval()` then a
    `no_grad` block in a branch an interval guard takes now and then), where
    `torch.inference_mode()` does the same job faster. An evaluation function is one that puts a
    model in eval mode and runs it without autograd, never with a backward, whatever its name
    (`estimate_loss`).

    It stays silent where `inference_mode` would break training: `no_grad` inside a model's
    `forward` or a training step (frozen feature extractors, a teacher in distillation, a target
    network in RL), parameter and EMA updates, and blocks whose tensors go where autograd may
    read them later (stored on `self`, appended to a buffer the training loop reads, returned
    from a function the training step calls). It is also silent in the evaluation hooks a
    framework already runs without autograd (Lightning's `validation_step`, `test_step`,
    `predict_step`: `inference_mode` by default since Lightning 2.0, `no_grad` before): there a
    `no_grad` changes nothing.

    ## Why is this slow?
    `no_grad` only stops graph recording. `inference_mode` also skips the version-counter bumps
    and view tracking that every tensor operation does for autograd's sake, which cuts per-op
    CPU overhead: it matters most for small batches and many small ops (eval loops are often
    CPU-bound on kernel launches).

    ## Example
    ```python
    def evaluate(model, loader):
        model.eval()
        correct = 0
        with torch.no_grad():
            for x, y in loader:
                correct += (model(x).argmax(1) == y).sum().item()
        return correct / len(loader.dataset)
    ```

    ## Use instead
    ```python
    def evaluate(model, loader):
        model.eval()
        correct = 0
        with torch.inference_mode():
            for x, y in loader:
                correct += (model(x).argmax(1) == y).sum().item()
        return correct / len(loader.dataset)
    ```

    ## Fix safety
    The fix replaces `no_grad` with `inference_mode`, keeping the file's spelling of torch
    (`T.inference_mode()` after `import torch as T`; `from torch import inference_mode` next to
    `from torch import no_grad`). It is safe when everything the block produces leaves it as
    Python numbers, strings, or through `.item()`/`.tolist()`/`.cpu()` (metrics, logs). It is
    unsafe when tensors computed inside leave the block (returned, used after it, passed on):
    tensors created under `inference_mode` cannot be saved for backward or updated in place
    outside it, so using them later in training raises an error.

    ## References
    - PyTorch docs, "Inference Mode" (`torch.inference_mode`) and "Autograd mechanics: inference mode"
    """

    code = "SPD601"
    name = "no-grad-inference"
    impact = Impact(
        wastes="Python/dispatcher overhead (autograd bookkeeping on every op)",
        when="eval/inference loops, most with small batches or many small ops",
        typical="1.05-1.3x eval throughput",
        evidence="PyTorch docs: inference_mode; benchmarks/scenarios: eval_no_grad_vs_inference_mode",
        level=LOW,
    )
    fixes = (SAFE, UNSAFE)
    triggers = ("no_grad",)
    ast_precondition = staticmethod(lambda facts: facts.may_have_grad_off_inference)

    @cached_property
    def models(self) -> Models:
        return Models(self.ctx)

    def _enabled(self) -> bool:
        """Off in test files, for a target torch the user set below 1.9, and for a declared
        requirement that stops below 1.9 (`torch<1.9`). A declared floor alone (`torch>=1.7`,
        written years ago) does not silence it: the fix becomes unsafe and says so."""
        settings = self.ctx.settings
        version = settings.target_torch_version
        if is_test_file(self.ctx.path):
            return False
        if settings.torch_below is not None and settings.torch_below <= _INFERENCE_MODE:
            return False
        return version is None or version >= _INFERENCE_MODE or settings.torch_declared

    def _floor_note(self) -> Optional[str]:
        """"needs torch >= 1.9; your requirements allow 1.7" when the declared floor is older."""
        settings = self.ctx.settings
        version = settings.target_torch_version
        if settings.torch_declared and version is not None and version < _INFERENCE_MODE:
            return f"needs torch >= 1.9; your requirements allow {version[0]}.{version[1]}"
        return None

    # -- with blocks ------------------------------------------------------------------------
    def visit_With(self, node: cst.With) -> None:
        items = [item for item in node.items if self._is_no_grad_call(item.item)]
        if not items or not self._enabled():
            return
        facts = self.ctx.torch
        fn = facts.enclosing_function(node)
        if self._framework_grad_off(fn):
            return
        # an evaluation function called from the training step (e.g. every N steps) is still an
        # evaluation: allowed when nothing but host values leaves the block (checked below)
        periodic_eval = fn is not None and facts.is_eval_function(fn)
        training = self._training_context(node, fn)
        periodic_block = training and not periodic_eval and self._periodic_eval_block(node)
        periodic_eval = periodic_eval or periodic_block
        if (training and not periodic_eval) or self._has_backward(node.body):
            return
        if updates_parameters(self.ctx, node.body) or not self.models.runs_forward(node.body):
            return
        scope: cst.CSTNode = fn if fn is not None else self.ctx.module
        escapes = Escapes(self.ctx, self.models, scope, node.body, whole_function=False)
        if escapes.training_bound or (training and escapes.unsafe):
            return
        if escapes.reach_autograd and self._scope_trains(fn):
            return  # tensors from this block stay in a function that trains: they may reach autograd
        where = self._eval_context(node, fn)
        if where is None and periodic_block:
            loops = any(isinstance(n, (cst.For, cst.While)) for n in iter_nodes(node.body))
            where = f"{'around an evaluation loop' if loops else 'in evaluation code'} run every N steps inside the training loop"
        if where is None:
            # a no_grad block in an epoch loop (between the training steps): only when nothing
            # but numbers leaves it, that is an evaluation by construction
            if facts.epoch_of(node) is None or escapes.reach_autograd:
                return
            where = "once per epoch, outside the training step"
        call = items[0].item
        assert isinstance(call, cst.Call)
        self._report(call, call.func, where, escapes)

    # -- decorated functions -----------------------------------------------------------------
    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        decorators = [d for d in node.decorators if self._is_no_grad(d.decorator)]
        if not decorators or not self._enabled() or self._framework_grad_off(node):
            return
        facts = self.ctx.torch
        # an evaluation function called from the training loop (full-batch training, where each
        # epoch is a step, or every N steps) is still an evaluation when only host values leave it
        training = self._training_context(node, node)
        if (training and not facts.is_eval_function(node)) or facts.reaches_backward(node):
            return
        # an inference method of a model (`decode`, `generate`) needs no forward call of its own,
        # but an abstract one (`raise NotImplementedError`) does nothing to speed up
        inference_method = (
            INFERENCE_VERB.search(node.name.value) and facts.function_class.get(node) is not None and not training and not _is_stub(node)
        )
        # (loops under this decorator are eval loops for the provider by construction: no evidence)
        if facts.is_eval_function(node):
            where = f"on `{node.name.value}()`, an evaluation function"
        elif INFERENCE_VERB.search(node.name.value) and not training:
            where = f"on `{node.name.value}()`, an inference method"
        elif not training and self._inference_only(node):
            where = f"on `{node.name.value}()`, which only inference code calls (always under `no_grad`, never from a training step)"
            inference_method = True
        elif any(
            isinstance(c.func, cst.Attribute) and c.func.attr.value == "eval" and not c.args
            for c in iter_nodes(node.body)
            if isinstance(c, cst.Call)
        ):
            where = f"on `{node.name.value}()`, which puts the model in eval mode"
        else:
            return
        # (the cheap tests above first: what follows reads the whole function, and callees)
        if updates_parameters(self.ctx, node.body) or not (inference_method or self.models.runs_forward(node.body)):
            return
        escapes = Escapes(self.ctx, self.models, node, node.body, whole_function=True)
        if escapes.training_bound:
            return  # (tensors it returns make the fix unsafe, not the finding wrong)
        dec = decorators[0].decorator
        target = dec.func if isinstance(dec, cst.Call) else dec
        self._report(dec, target, where, escapes, bare=not isinstance(dec, cst.Call))

    # -- helpers ------------------------------------------------------------------------------
    def _inference_only(self, fn: cst.FunctionDef) -> bool:
        """The whole program says every call of `fn` comes from inference code (`inference_seeds`)."""
        seeds = self.ctx.seeds
        facts = self.ctx.torch
        return seeds is not None and facts._function_ordinal.get(fn, -1) in (seeds.project.get("inference_only") or ())

    def _framework_grad_off(self, fn: Optional[cst.FunctionDef]) -> bool:
        """A hook that the framework already runs without autograd (Lightning's `validation_step`
        under `inference_mode`/`no_grad`): a `no_grad` there changes nothing."""
        while fn is not None:
            hook = framework_hook(self.ctx.torch, fn)
            if hook is not None and hook[2]:
                return True
            fn = self.ctx.torch.enclosing_function(fn)
        return False

    def _is_no_grad(self, expr: cst.BaseExpression) -> bool:
        target = expr.func if isinstance(expr, cst.Call) else expr
        return self.ctx.matches(target, "torch.no_grad")

    def _is_no_grad_call(self, expr: cst.BaseExpression) -> bool:
        return isinstance(expr, cst.Call) and not expr.args and self.ctx.matches(expr.func, "torch.no_grad")

    def _training_context(self, node: cst.CSTNode, fn: Optional[cst.FunctionDef]) -> bool:
        """Inside a training step, a step function, or a model's forward: outputs may feed autograd."""
        facts = self.ctx.torch
        if facts.in_training_step(node):
            return True
        f = fn
        while f is not None:
            if f in facts.step_functions or f in facts.forward_functions:
                return True
            cls = facts.function_class.get(f)
            if cls is not None and f.name.value in ("training_step", "compute_loss", "train_step"):
                return True
            f = facts.enclosing_function(f)
        return False

    def _periodic_eval_block(self, node: cst.With) -> bool:
        """`if step % eval_every == 0: model.eval(); with torch.no_grad(): ...` inside the step
        loop: an evaluation run now and then (the model put in eval mode just before the block,
        in a branch an interval guard takes now and then), not the training step."""
        facts = self.ctx.torch
        child: cst.CSTNode = node
        eval_before = False
        for a in facts.ancestors(node):
            if isinstance(a, cst.IndentedBlock) and not eval_before:
                for stmt in a.body:
                    if stmt is child:
                        break
                    eval_before = eval_before or any(
                        isinstance(c.func, cst.Attribute) and c.func.attr.value == "eval" and not c.args
                        for c in iter_nodes(stmt) if isinstance(c, cst.Call)
                    )
            if isinstance(a, cst.If) and eval_before:
                found = branches(a.test)
                if found is not None and (found[0] if child is a.body else found[1]):
                    return True
            if isinstance(a, (cst.For, cst.While, cst.FunctionDef)):
                return False
            child = a
        return False

    def _has_backward(self, root: cst.CSTNode) -> bool:
        facts = self.ctx.torch
        for n in iter_nodes(root):
            if isinstance(n, cst.Call) and (facts.is_backward(n) or self.ctx.matches(n.func, "torch.autograd.grad")):
                return True
        return False

    def _eval_context(self, node: cst.With, fn: Optional[cst.FunctionDef]) -> Optional[str]:
        facts = self.ctx.torch
        # (every loop under `no_grad` counts as an eval loop for the provider: that alone says nothing)
        loops = any(isinstance(n, (cst.For, cst.While)) for n in iter_nodes(node.body))
        what = "around an evaluation loop" if loops else "in evaluation code"
        if facts.eval_loop_of(node) is not None:
            return "inside an evaluation loop"
        if fn is not None and facts.is_eval_function(fn):
            return f"{what} (`{fn.name.value}()`)" if loops else f"in the evaluation function `{fn.name.value}()`"
        if fn is not None and facts.eval_function_of(node) is fn:
            # run on every evaluation batch by a loop in another module (the program model)
            return f"{what} (`{fn.name.value}()`, called from an evaluation loop)" if loops else f"in `{fn.name.value}()`, called from an evaluation loop"
        if eval_receivers_before(self.ctx, fn, node):
            return f"{what} after `model.eval()`"
        return None

    def _scope_trains(self, fn: Optional[cst.FunctionDef]) -> bool:
        facts = self.ctx.torch
        return facts.reaches_backward(fn) if fn is not None else bool(facts.step_loops)

    def _report(
        self,
        node: cst.CSTNode,
        func: cst.BaseExpression,
        where: str,
        escapes: Escapes,
        bare: bool = False,
    ) -> None:
        new_func: cst.BaseExpression
        imports: Tuple[ImportSpec, ...]
        swap = self._import_swap(func)
        if swap is not None:  # `from torch import no_grad` used only here: import the new name instead
            new_func, imports = cst.Name("inference_mode"), ()
        elif isinstance(func, cst.Name) and "torch" in self.ctx.imports.aliases.values():
            new_func, imports = torch_attr(self.ctx, "inference_mode")
        else:
            new_func, imports = torch_spelling(self.ctx, func, "inference_mode")
        new: cst.BaseExpression = cst.Call(func=new_func) if bare else new_func
        spelled = self.ctx.module.code_for_node(new_func)
        floor = self._floor_note()
        impact = self.impact
        if escapes.unsafe:
            applicability = UNSAFE
            title = f"Use `{spelled}()` (unsafe: {escapes.unsafe[0]}; make sure they never reach autograd)"
        elif floor is not None:
            applicability = UNSAFE
            title = f"Use `{spelled}()` (unsafe: {floor})"
        else:
            applicability = SAFE
            title = f"Use `{spelled}()`"
        if floor is not None:
            where = f"{where} ({floor})"
        pairs: List[Tuple[cst.CSTNode, cst.CSTNode]] = [(func, new)]
        if swap is not None:
            pairs.append(swap)
        self.report(
            node,
            f"`no_grad` {where}: `inference_mode` also skips autograd's version counting and view tracking",
            fix=Fix.many(pairs, title, applicability, imports),
            impact=impact.with_level(LOW if escapes.unsafe else impact.level),
        )

    def _import_swap(self, func: cst.BaseExpression) -> Optional[Tuple[cst.CSTNode, cst.CSTNode]]:
        if not isinstance(func, cst.Name):
            return None
        local = func.value
        uses = 0
        alias_node: Optional[cst.ImportAlias] = None
        attrs = set()
        for n in iter_nodes(self.ctx.module, skip_defs=False):
            if isinstance(n, cst.Attribute):
                attrs.add(id(n.attr))
            if isinstance(n, cst.ImportFrom) and not isinstance(n.names, cst.ImportStar):
                for alias in n.names:
                    name = alias.asname.name if alias.asname is not None else alias.name
                    if isinstance(name, cst.Name) and name.value == local:
                        alias_node = alias
            elif isinstance(n, cst.Name) and n.value == local and id(n) not in attrs:
                uses += 1
        if alias_node is None:
            return None
        if uses - 1 != 1:  # the import's own local name, and this one use
            return None
        return alias_node, alias_node.with_changes(name=cst.Name("inference_mode"), asname=None)


def _is_stub(fn: cst.FunctionDef) -> bool:
    """A body of only a docstring, `pass`, `...` or `raise NotImplementedError`."""
    for stmt in fn.body.body if isinstance(fn.body, cst.IndentedBlock) else ():
        if not isinstance(stmt, cst.SimpleStatementLine):
            return False
        for small in stmt.body:
            if isinstance(small, cst.Pass):
                continue
            if isinstance(small, cst.Expr) and isinstance(small.value, (cst.SimpleString, cst.ConcatenatedString, cst.Ellipsis)):
                continue
            if isinstance(small, cst.Raise) and small.exc is not None and "NotImplementedError" in (dotted(small.exc.func if isinstance(small.exc, cst.Call) else small.exc) or ""):
                continue
            return False
    return True
