"""SPD104 dataloader-built-in-loop."""

from __future__ import annotations

from typing import Set

import libcst as cst

from speedlint.analyzer.rule import DISPLAY_ONLY, HIGH, MEDIUM, Fix, Impact, Rule
from speedlint.analyzer.providers.loaders import LOADER_TRIGGERS, is_dataloader, may_build_loader, target_names
from speedlint.analyzer.providers.walk import preorder


class DataLoaderBuiltInLoop(Rule):
    """
    ## What it does
    Flags `DataLoader(...)` constructed inside the epoch loop, inside a function called once per
    epoch (such as `train_one_epoch()` building its own loader), or once per training step. A loader
    whose dataset or settings are rebuilt in the loop on purpose (its arguments read a variable set
    inside the loop, such as a per-epoch curriculum subset) is not flagged. Nor is a loader built
    once per training run: a loop that calls a function with its own epoch loop (hyper-parameter
    evolution, a sweep) loops over runs, not epochs.

    ## Why is this slow?
    Each new loader starts new worker processes, pickles or forks the dataset into each of them,
    rebuilds its sampler and pin-memory thread, and cannot keep workers alive across epochs
    (`persistent_workers` only works for a loader that is reused). The first batches of every epoch
    wait for that start-up.

    ## Example
    ```python
    for epoch in range(10):
        loader = DataLoader(dataset, batch_size=64, shuffle=True, num_workers=8)
        for x, y in loader:
            loss = model(x).sum()
            loss.backward()
            optimizer.step()
    ```

    ## Use instead
    ```python
    loader = DataLoader(dataset, batch_size=64, shuffle=True, num_workers=8, persistent_workers=True)
    for epoch in range(10):
        for x, y in loader:
            loss = model(x).sum()
            loss.backward()
            optimizer.step()
    ```

    ## Fix safety
    No automatic fix (display-only advice): moving the construction out of the loop requires the
    dataset and every argument to be available before the loop, and a shuffling loader reshuffles
    every epoch on its own.
    """

    code = "SPD104"
    name = "dataloader-built-in-loop"
    impact = Impact(
        wastes="input pipeline (loader and worker start-up repeated every epoch)",
        when="multi-epoch training, most with worker processes",
        typical="0.1-10 s per epoch and loader",
        evidence="PyTorch docs, DataLoader persistent_workers",
        level=MEDIUM,
    )
    fixes = (DISPLAY_ONLY,)
    triggers = LOADER_TRIGGERS
    per_epoch = True
    ast_precondition = staticmethod(lambda facts: facts.may_have_training_step and may_build_loader(facts))

    def visit_Call(self, node: cst.Call) -> None:
        ctx = self.ctx
        if not is_dataloader(ctx, node):
            return
        facts = ctx.torch
        if facts.in_training_step(node):
            unit = facts.step_of(node)
            where, impact = "once per training step", self.impact.with_level(HIGH)
        else:
            unit = facts.epoch_of(node)
            where, impact = "once per epoch", self.impact
        if unit is None or self._rebuilt_on_purpose(node, unit):
            return
        if isinstance(unit, cst.FunctionDef):
            where += f" (in `{unit.name.value}()`)"
        self.report(
            node,
            f"a new DataLoader (and its worker processes) is built {where}",
            fix=Fix.advice("Build the DataLoader once before the epoch loop and reuse it"),
            impact=impact,
        )

    def _rebuilt_on_purpose(self, call: cst.Call, unit: cst.CSTNode) -> bool:
        """The loader's arguments read a variable assigned inside the loop (or the loop variable)."""
        bound: Set[str] = set()
        if isinstance(unit, cst.For):
            bound.update(target_names(unit.target))
            body = unit.body
        elif isinstance(unit, (cst.While, cst.FunctionDef)):
            body = unit.body
        else:
            return False
        for node in preorder(body):  # names assigned in the loop: targets, inner loops' variables
            if type(node) is cst.AssignTarget or type(node) is cst.For:
                bound.update(target_names(node.target))
        return bool(_names_read(call) & bound)


def _names_read(call: cst.Call) -> Set[str]:
    """The names the call's arguments read (not attribute names: `cfg.batch` reads `cfg`)."""
    names: Set[str] = set()
    attributes: Set[int] = set()
    for arg in call.args:
        for node in preorder(arg.value):
            if type(node) is cst.Attribute:
                attributes.add(id(node.attr))
            elif type(node) is cst.Name and id(node) not in attributes:
                names.add(node.value)
    return names
