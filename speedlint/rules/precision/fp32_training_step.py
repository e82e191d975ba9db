"""SPD301 fp32-training-step."""

from __future__ import annotations

import libcst as cst

from speedlint.analyzer.configs.edit import value_edit
from speedlint.analyzer.frameworks._knobs_hf import FP32
from speedlint.analyzer.frameworks.hf_accelerate import precision_knob
from speedlint.analyzer.rule import DISPLAY_ONLY, HIGH, MEDIUM, UNSAFE, Fix, Impact, Rule


class Fp32TrainingStep(Rule):
    """
    ## What it does
    Flags a training step whose forward pass and loss run outside any `autocast` (any spelling:
    `torch.autocast`, `torch.amp.autocast`, `torch.cuda.amp.autocast`, aliased, as a decorator,
    around the step, in its caller or in the model's `forward`; a wrapper named after it, such as
    `smart_amp_autocast(amp)` or `accelerator.autocast()`, counts as one), in a script that trains
    on a GPU.
    Also flags a `GradScaler` used without any autocast (the step still runs in FP32), and an
    `autocast(enabled=...)` whose flag is a constant that never becomes true. The finding sits on
    the first forward or loss statement of the step: the line the AMP codemod wraps first.

    ## Why is this slow?
    Without autocast every matmul and convolution runs in FP32. Tensor cores run float16/bfloat16
    math several times faster and half-size activations halve the memory traffic and the
    activation memory: mixed precision typically gives 1.5-3x steps/s on modern NVIDIA GPUs, and
    frees memory for larger batches.

    ## Example
    ```python
    device = torch.device("cuda")
    for x, y in loader:
        x, y = x.to(device), y.to(device)
        optimizer.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        optimizer.step()
    ```

    ## Use instead
    ```python
    device = torch.device("cuda")
    scaler = torch.amp.GradScaler("cuda")
    for x, y in loader:
        x, y = x.to(device), y.to(device)
        optimizer.zero_grad()
        with torch.autocast(device_type="cuda", dtype=torch.float16):
            loss = F.cross_entropy(model(x), y)
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
    ```

    ## Fix safety
    Unsafe: mixed precision changes the numerics (losses match FP32 only approximately), and a
    model with custom FP32-only ops may need `autocast(enabled=False)` regions. The codemod wraps
    forward and loss in `torch.autocast` with the script's own device; float16 with a
    `torch.amp.GradScaler` on CUDA (scaled backward, `scaler.step`, `scaler.update`,
    `scaler.unscale_` before gradient clipping, scaler state saved with the optimizer's), bfloat16
    without a scaler on CPU; when the device is chosen at run time the emitted code decides at run
    time. A step that already has a `GradScaler` only gets the autocast. Steps the codemod cannot
    rewrite safely (a disabled autocast, a backward inside a larger expression ...) are reported
    without a fix. CPU-only scripts are not flagged, nor are steps trained with distributed
    autograd (`torch.distributed.autograd.backward`): their forward runs in other processes' RPC
    handlers, where an autocast around this loop does not reach.

    ## References
    - PyTorch docs, "Automatic Mixed Precision" (torch.amp) and the AMP recipe
    - NVIDIA, "Train with mixed precision": 1.5-3x on tensor-core GPUs
    """

    code = "SPD301"
    name = "fp32-training-step"
    impact = Impact(
        wastes="device math (FP32 instead of tensor-core float16/bfloat16)",
        when="GPU; compute-bound training",
        typical="1.5-3x steps/s, about half the activation memory",
        evidence="PyTorch AMP recipe; NVIDIA mixed-precision training guide",
        level=HIGH,
    )
    fixes = (UNSAFE, DISPLAY_ONLY)
    triggers = ("backward", "TrainingArguments", "Accelerator")
    ast_precondition = staticmethod(
        lambda facts: (facts.may_use_gpu and facts.may_have_training_step) or facts.text_has_word("TrainingArguments", "Seq2SeqTrainingArguments", "Accelerator")
    )

    def visit_Module(self, node: cst.Module) -> None:
        ctx = self.ctx
        knob = precision_knob(ctx)  # a framework decides the step's precision (Trainer, accelerate)
        if knob is not None:
            if knob.state == FP32 and knob.anchor is not None and (ctx.may_use_gpu or knob.certain):
                fix = Fix.replace(knob.fix[0], knob.fix[1], knob.fix[2], UNSAFE) if knob.fix else None
                if knob.config_site is not None:  # the value is written in a config file: edit it there
                    edit = value_edit(knob.config_site, True)
                    fix = Fix.config(edit, f"Set `{knob.config_site.name}` to true in the config file", UNSAFE) if edit else None
                impact = None if knob.certain else self.impact.with_level(MEDIUM)
                self.report(knob.anchor, knob.message, fix=fix, impact=impact, at=knob.config_site)
            return
        if not ctx.may_use_gpu:
            return  # CPU-only script: bfloat16 autocast on CPU is rarely faster; no GPU advice
        from speedlint.fixers import amp  # lazily: it imports libcst.codemod (slow start-up)

        plans = amp.plan(ctx)
        module = ctx.module
        for loop, p in plans.items():
            if p.covered or p.remote:
                continue
            impact = None
            site = p.config_site
            if site is not None:
                message = f"autocast is switched off in the config file (`{site.name}`): this training step runs in FP32"
                edit = value_edit(site, True)
                fix = Fix.config(edit, f"Set `{site.name}` to true in the config file", UNSAFE) if edit else Fix.advice(f"Set `{site.name}` to true in the config file")
                self.report(p.anchor if p.anchor is not None else loop, message, fix=fix, at=site)
                continue
            if p.opt_in is not None:
                message = f"autocast only runs with `{p.opt_in}`, which is off by default: by default this training step runs in FP32"
                impact = self.impact.with_level(MEDIUM)
            elif p.disabled_autocast is not None:
                message = "this training step's autocast is switched off by a flag that is never true: forward and loss run in FP32"
            elif p.existing_scaler is not None:
                message = f"`{p.existing_scaler}` (a GradScaler) is used, but the forward and loss run outside any autocast: the step is still FP32"
            else:
                message = "this training step runs forward and loss in FP32, outside any autocast"
            fix = None
            if p.ok:
                fix = Fix(
                    "Run forward and loss under torch.autocast with a GradScaler (AMP codemod)",
                    UNSAFE,
                    fixer=lambda m, ctx=ctx: amp.rewrite(m, ctx if m is module else None),
                )
            # on the first forward/loss statement: the line the codemod wraps (else the loop)
            if p.opt_in is not None:
                fix = Fix.advice(f"Turn `{p.opt_in}` on by default (AMP is already written), or pass it on the command line")
            self.report(p.anchor if p.anchor is not None else loop, message, fix=fix, impact=impact)
