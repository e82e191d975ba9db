"""SPD204 collective-per-step."""

from __future__ import annotations

import re
from typing import List, Optional

import libcst as cst

from speedlint.analyzer.providers.frameworks import framework_hook, metric_constructor
from speedlint.analyzer.providers.names import dotted
from speedlint.analyzer.rule import DISPLAY_ONLY, LOW, MEDIUM, Fix, Impact, Rule

#: Lightning's logging methods (`self.log` in a LightningModule, `pl_module.log` in a callback).
_LOG_METHODS = ("log", "log_dict")
#: `torch.distributed` reductions.
_COLLECTIVES = ("torch.distributed.all_reduce", "torch.distributed.reduce", "torch.distributed.all_gather", "torch.distributed.all_gather_into_tensor")
#: Names of values reduced only to be reported (a gradient or a parameter is training itself).
_METRIC_NAME = re.compile(r"loss|acc|metric|correct|total|count|score|err|stat", re.I)
_TRAINING_NAME = re.compile(r"grad|param|weight|buffer|bucket", re.I)
#: Tests that hold now and then: `batch_idx % 100 == 0`, `if self.global_step % log_every == 0`.
_INTERVAL_NAME = re.compile(r"log|every|interval|freq|period|should_", re.I)


class CollectivePerStep(Rule):
    """
    ## What it does
    Flags a cross-process reduction made on every training step only to log a value:
    `self.log(..., sync_dist=True)` (or `log_dict`) in a LightningModule's `training_step`, its
    per-batch hooks or a helper they call, where `on_step` is on (its default there); a
    torchmetrics metric built with `dist_sync_on_step=True` and updated in the training step;
    `torch.distributed.all_reduce` (`reduce`, `all_gather`) of a loss or metric in the training
    step.

    It stays silent for `on_step=False` (the value is reduced once per epoch), in validation and
    test hooks (Lightning logs them per epoch by default), once-per-epoch hooks, calls under an
    interval guard (`if batch_idx % 100 == 0:`), and reductions of gradients or parameters (that
    is the training itself).

    ## Why is this slow?
    Every reduction is a collective: all processes stop at that point, exchange the value over
    NCCL and wait for the slowest one; `sync_dist=True` also reads the value on the host. Done on
    every step for a number that is only logged, it adds a synchronization point (and a host
    sync) to each step of every rank. Per-epoch reduction gives the same epoch average.

    ## Example
    ```python
    import lightning.pytorch as pl

    class LitModel(pl.LightningModule):
        def training_step(self, batch, batch_idx):
            loss = self.loss(self(batch[0]), batch[1])
            self.log("train/loss", loss, sync_dist=True)
            return loss
    ```

    ## Use instead
    ```python
    import lightning.pytorch as pl

    class LitModel(pl.LightningModule):
        def training_step(self, batch, batch_idx):
            loss = self.loss(self(batch[0]), batch[1])
            self.log("train/loss", loss, on_step=True, on_epoch=False)  # local, per step
            self.log("train/loss_epoch", loss, on_step=False, on_epoch=True, sync_dist=True)
            return loss
    ```

    ## Fix safety
    Display-only: logging the local value per step (rank 0 shows its own loss) and syncing once
    per epoch changes what the per-step curve shows; whether that is acceptable is the user's call.

    ## References
    - Lightning docs, "Logging": `sync_dist` ("may incur communication overhead"), `on_step`/`on_epoch` defaults per hook
    - torchmetrics docs, `dist_sync_on_step`
    """

    code = "SPD204"
    name = "collective-per-step"
    impact = Impact(
        wastes="cross-process communication (a collective and a host sync on every step of every rank)",
        when="multi-GPU (DDP) training with fast steps",
        typical="2-10% steps/s per synced value on fast steps; more across nodes",
        evidence="Lightning docs: self.log(sync_dist=...); torchmetrics docs: dist_sync_on_step",
        level=MEDIUM,
    )
    fixes = (DISPLAY_ONLY,)
    triggers = ("sync_dist", "dist_sync_on_step", "all_reduce", "all_gather", "reduce(")
    ast_precondition = staticmethod(lambda facts: facts.may_run_hot or facts.may_have_hook)

    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        if isinstance(func, cst.Attribute) and func.attr.value in _LOG_METHODS:
            self._log(node)
            return
        q = self.ctx.qualname(func)
        if q in _COLLECTIVES:
            self._collective(node, q.rsplit(".", 1)[-1])
            return
        if isinstance(func, cst.Attribute):
            self._metric_update(node, func)

    # -- self.log(..., sync_dist=True) ----------------------------------------------------------
    def _log(self, node: cst.Call) -> None:
        sync = self._keyword(node, "sync_dist")
        if sync is not True:
            return
        on_step = self._keyword(node, "on_step", default=True)
        if on_step is not True:
            return  # reduced once per epoch (or not known)
        where = self._per_step(node)
        if where is None:
            return
        self.report(
            node,
            f"`{self.ctx.code(node.func)}(..., sync_dist=True)` all-reduces the value across processes {where} "
            "(`on_step` is on): a collective and a host sync per step for a logged number",
            fix=Fix.advice("Log the local value per step (`sync_dist=False`) and sync once per epoch (`on_step=False, on_epoch=True, sync_dist=True`)"),
        )

    # -- torch.distributed.all_reduce(loss) ----------------------------------------------------------
    def _collective(self, node: cst.Call, name: str) -> None:
        if not node.args:
            return
        first = node.args[-1 if name.startswith("all_gather") else 0].value
        text = dotted(first) or ""
        if not text or not _METRIC_NAME.search(text) or _TRAINING_NAME.search(text):
            return
        where = self._per_step(node)
        if where is None:
            return
        self.report(
            node,
            f"`{name}` of `{text}` {where}: a collective over all processes on every step for a value that is only reported",
            fix=Fix.advice("Accumulate the value locally and reduce it once per epoch (or every N steps)"),
        )

    # -- metric objects built with dist_sync_on_step=True ------------------------------------------
    def _metric_update(self, node: cst.Call, func: cst.Attribute) -> None:
        ctor = metric_constructor(self.ctx, node)
        if ctor is None:
            return
        arg = next((a for a in ctor.args if a.keyword is not None and a.keyword.value == "dist_sync_on_step"), None)
        if arg is None:
            return
        value = self.ctx.values.resolve(arg.value)
        if value is None or not value.all(lambda v: v is True):
            return
        where = self._per_step(node)
        if where is None:
            return
        self.report(
            node,
            f"`{self.ctx.code(func)}(...)` updates a metric built with `dist_sync_on_step=True` (line "
            f"{self.ctx.position(arg).start.line}): its state is all-reduced across processes {where}",
            fix=Fix.advice("Drop `dist_sync_on_step=True`: the metric syncs once when it is computed"),
            impact=self.impact.with_level(LOW) if "evaluation" in where else None,
        )

    # -- helpers ---------------------------------------------------------------------------------
    def _keyword(self, node: cst.Call, name: str, default: object = None) -> object:
        """The literal value of keyword `name` (traced), `default` when absent, None when unknown."""
        for arg in node.args:
            if arg.keyword is not None and arg.keyword.value == name:
                value = self.ctx.values.resolve(arg.value)
                if value is None or len(set(map(repr, value.options))) != 1:
                    return None
                return value.options[0]
            if arg.star == "**":
                return None
        return default

    def _per_step(self, node: cst.Call) -> Optional[str]:
        """"on every training step" when `node` runs once per training step, unguarded; else None."""
        facts = self.ctx.torch
        fn = facts.enclosing_function(node)
        hook = framework_hook(facts, fn)
        if hook is not None and hook[0] != "step":
            return None  # an evaluation hook (logged per epoch by default) or a loader hook
        if hook is None and facts.step_of(node) is None:
            return None
        if self._guarded(node, fn):
            return None
        return "on every training step"

    def _guarded(self, node: cst.CSTNode, fn: Optional[cst.FunctionDef]) -> bool:
        facts = self.ctx.torch
        child: cst.CSTNode = node
        for a in facts.ancestors(node):
            if a is fn:
                break
            if isinstance(a, cst.If) and child is a.body and _interval_test(a.test):
                return True
            child = a
        return False


def _interval_test(test: cst.BaseExpression) -> bool:
    todo: List[cst.CSTNode] = [test]
    while todo:
        cur = todo.pop()
        if isinstance(cur, cst.BinaryOperation) and isinstance(cur.operator, cst.Modulo):
            return True
        if isinstance(cur, (cst.Name, cst.Attribute)):
            last = (dotted(cur) or "").rsplit(".", 1)[-1]
            if last and _INTERVAL_NAME.search(last):
                return True
        todo.extend(c for c in cur.children if isinstance(c, cst.CSTNode))
    return False
