"""SPD303 training-step-without-accumulation (off by default)."""

from __future__ import annotations

import libcst as cst

from speedlint.analyzer.rule import LOW, UNSAFE, Fix, Impact, Rule


class TrainingStepWithoutAccumulation(Rule):
    """
    ## What it does
    Flags a training step that updates the weights after every batch, with no gradient
    accumulation. Off by default: select it (`--select SPD303`) when you want the accumulation
    rewrite, and give the number of batches per optimizer step with
    `speedlint fix --accumulation-steps N` (or `[tool.speedlint.fix] accumulation_steps = N`).

    ## Why is this slow?
    When the batch that fits in memory is smaller than the batch the model should train with,
    accumulating gradients over N micro-batches gives the large effective batch without the
    memory, and runs the optimizer step (and, with DDP, the gradient all-reduce) N times less
    often.

    ## Example
    ```python
    for x, y in loader:
        optimizer.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        optimizer.step()
    ```

    ## Use instead
    ```python
    ACCUMULATION_STEPS = 4
    for batch_idx, (x, y) in enumerate(loader):
        if batch_idx % ACCUMULATION_STEPS == 0:
            optimizer.zero_grad()
        loss = F.cross_entropy(model(x), y)
        (loss / ACCUMULATION_STEPS).backward()
        if (batch_idx + 1) % ACCUMULATION_STEPS == 0 or batch_idx + 1 == len(loader):
            optimizer.step()
    ```

    ## Fix safety
    Unsafe class: with N > 1 the optimizer sees a larger effective batch (the user's explicit
    choice; learning-rate schedules counted in steps run N times slower). With the default N = 1
    the rewritten program computes exactly the same results. The knob is an argparse option
    `--accumulation-steps` when the script parses arguments, else a module constant. Steps with
    several backward passes (GANs) or an update that is not a plain statement after the backward
    are reported without a fix.
    """

    code = "SPD303"
    name = "training-step-without-accumulation"
    impact = Impact(
        wastes="memory (batch size limited by activations) and optimizer/all-reduce time",
        when="memory-bound batch sizes; multi-GPU (DDP) training",
        typical="larger effective batch at the same memory; fewer optimizer steps",
        evidence="PyTorch AMP recipe, gradient accumulation section",
        level=LOW,
    )
    fixes = (UNSAFE,)
    triggers = ("backward",)
    ast_precondition = staticmethod(lambda facts: facts.may_have_training_step)
    default_enabled = False

    def visit_Module(self, node: cst.Module) -> None:
        ctx = self.ctx
        from speedlint.fixers import accumulation  # lazily: it imports libcst.codemod (slow start-up)

        steps = int(ctx.settings.fix_option("accumulation_steps", 1) or 1)
        module = ctx.module
        for loop, p in accumulation.plan(ctx, steps).items():
            if p.accumulates:
                continue
            fix = None
            if p.ok:
                fix = Fix(
                    f"Accumulate gradients over accumulation_steps = {steps} batches",
                    UNSAFE,
                    fixer=lambda m: accumulation.rewrite(m, steps, ctx if m is module else None),
                )
            self.report(loop, "this training step updates the weights after every batch (no gradient accumulation)", fix=fix)
