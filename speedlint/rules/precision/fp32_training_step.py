"""SPD301 fp32-training-step."""

from __future__ import annotations

import libcst as cst

from speedlint.analyzer.configs.edit import value_edit
from typing import Any, Optional

from speedlint.analyzer.fixes import keywords_edit
from speedlint.analyzer.frameworks._knobs_hf import FP32
from speedlint.analyzer.frameworks.hf_accelerate import precision_knob
from speedlint.analyzer.frameworks.lightning import mixed_spelling
from speedlint.analyzer.program.summary_optin import KEY as AMP_GATES
from speedlint.analyzer.providers.default_sites import default_site, report_default
from speedlint.analyzer.providers.frameworks import TrainerConfig, TrainerRun, trained_configs, trainer_runs
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

    A training framework's precision knob counts as the step's autocast: a Lightning
    `Trainer(precision=...)` or `Fabric(precision=...)` that is FP32 (`32`, `"32-true"`, `64`, or
    absent: Lightning's default) on a run that may use a GPU is flagged on the keyword (or the
    constructor), and on the command-line option's default when the value comes from one
    (`precision=args.precision` with `default=32`); a CPU-only trainer (`accelerator="cpu"`,
    Lightning 1.x without `gpus`) is not. See docs/frameworks.md for where each value is read.

    AMP behind an opt-in option that defaults off is also reported on the option's default when
    this file declares it; an option declared in `main.py` whose namespace reaches the class that
    reads `self.args.use_amp` in another module is reported on both (the whole program says which
    options switch an autocast on, `program.optin_seeds`); an autocast under a branch that never runs on the CUDA path
    (`if hasattr(self, "scaler") and ...` for an attribute nothing sets, a CPU-only branch) does
    not cover the step.

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
    triggers = ("backward", "Trainer", "Fabric", "LightningCLI", "TrainingArguments", "Accelerator")
    seed_triggers = (AMP_GATES,)  # declares an option that switches on an autocast elsewhere
    ast_precondition = staticmethod(
        lambda facts: (facts.may_use_gpu and facts.may_have_training_step)
        or AMP_GATES in facts.seeded_keys
        or facts.calls_any("Trainer", "from_argparse_args", "Fabric", "instantiate", "LightningCLI")
        or facts.text_has_word("TrainingArguments", "Seq2SeqTrainingArguments", "Accelerator")
    )

    def visit_Module(self, node: cst.Module) -> None:
        ctx = self.ctx
        gated = ctx.seeds.project.get(AMP_GATES) if ctx.seeds is not None else None
        for dest, sites in sorted((gated or {}).items()):
            self._gated_elsewhere(dest, sites)
        knob = precision_knob(ctx)  # the HF Trainer or accelerate decides the step's precision
        if knob is not None:
            if knob.state == FP32 and knob.anchor is not None and (ctx.may_use_gpu or knob.certain):
                fix = Fix.replace(knob.fix[0], knob.fix[1], knob.fix[2], UNSAFE) if knob.fix else None
                if knob.config_site is not None:  # the value is written in a config file: edit it there
                    edit = value_edit(knob.config_site, True)
                    fix = Fix.config(edit, f"Set `{knob.config_site.name}` to true in the config file", UNSAFE) if edit else None
                impact = None if knob.certain else self.impact.with_level(MEDIUM)
                self.report(knob.anchor, knob.message, fix=fix, impact=impact, at=knob.config_site)
            return
        runs = trainer_runs(ctx) if any(t in ctx.source for t in ("Trainer", "Fabric")) else []  # Lightning, Fabric
        for run in runs:
            self._framework_run(run)
        for config in trained_configs(ctx, runs):
            self._trainer_config(config)
        if not ctx.may_use_gpu or any(run.cls == "Fabric" for run in runs):
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
                    fixer=lambda m: amp.rewrite(m, ctx if m is module else None),
                )
            # on the first forward/loss statement: the line the codemod wraps (else the loop)
            if p.opt_in is not None:
                fix = Fix.advice(f"Turn `{p.opt_in}` on by default (AMP is already written), or pass it on the command line")
            self.report(p.anchor if p.anchor is not None else loop, message, fix=fix, impact=impact)
            if p.opt_in is not None:  # the line the user edits: where the option's default is written
                report_default(self, default_site(ctx, p.opt_in_value), message, p.anchor if p.anchor is not None else loop, fix=fix, impact=impact)

    def _gated_elsewhere(self, dest: str, sites: Any) -> None:
        """This file's option `dest` switches on an autocast in another module of its program
        (`program.optin_seeds`): off by default, the training step there runs in FP32."""
        value = self.ctx.values.option_default(dest)
        if value is None or not value.options or value.any(bool):
            return  # on by default (`store_false`, `default=True`), set in code, or not known
        site = default_site(self.ctx, value)
        if site is None or site.node is None:
            return
        path, line = sites[0][0], sites[0][1]
        message = f"autocast in `{path}` (line {line}) only runs with `{site.name}`, which is off by default: by default that training step runs in FP32"
        fix = Fix.advice(f"Turn `{site.name}` on by default (AMP is already written), or pass it on the command line")
        related = tuple((s[0], s[1], "autocast") for s in sites)
        self.report(site.node, f"{message} (the default of `{site.name}`, {site.value!r}, decides it)", fix=fix, impact=self.impact.with_level(MEDIUM), related=related)

    # -- a framework's precision knob (speedlint.analyzer.providers.frameworks) -----------------
    def _framework_run(self, run: TrainerRun) -> None:
        if not run.full_precision or not run.gpu:
            return  # mixed precision, not known, or a CPU-only run
        spelled = mixed_spelling(run.major)
        what = f"`{run.cls}(...)`"
        impact = None
        if run.source == "default":
            message = f"{what} without `precision` trains in FP32 (Lightning's default, 32) on the GPU"
        elif run.source == "namespace":
            message = f"{what} gets no `precision` from its arguments or the project's trainer configs: Lightning's default, 32, trains in FP32"
            impact = self.impact.with_level(MEDIUM)
        elif run.source == "option":
            shown = "/".join(repr(v) for v in run.values)
            message = f"`precision` comes from a command-line option whose default is {shown}: by default this run trains in FP32"
            impact = self.impact.with_level(MEDIUM)
        else:
            shown = "/".join(repr(v) for v in run.values)
            message = f"`precision={shown}` trains in FP32 on the GPU"
        if run.auto_device:
            message += " (it picks a GPU when one is present)"
            impact = self.impact.with_level(MEDIUM)
        message += f"; mixed precision (`precision={spelled}`) runs matmuls and convolutions on tensor cores"
        fix: Optional[Fix] = None
        if run.source == "default":
            new = keywords_edit(self.ctx, run.call, [("precision", cst.parse_expression(spelled))])
            fix = Fix.replace(run.call, new, f"Add `precision={spelled}`", UNSAFE)
        if run.source == "keyword" and run.keyword is not None and isinstance(run.keyword.value, (cst.Integer, cst.SimpleString)):
            fix = Fix.replace(run.keyword.value, cst.parse_expression(spelled), f"Set `precision={spelled}`", UNSAFE)
        if run.source == "option" and isinstance(run.option_default, cst.Arg) and isinstance(run.option_default.value, (cst.Integer, cst.SimpleString)):
            # (the option's own type: `default="32"` for a string option becomes `"16"`)
            written = spelled if isinstance(run.option_default.value, cst.Integer) or spelled.startswith('"') else f'"{spelled}"'
            fix = Fix.replace(run.option_default.value, cst.parse_expression(written), f"Make `precision={written}` the option's default", UNSAFE)
        if fix is None:
            fix = Fix.advice(f"Train with `precision={spelled}` (bf16 needs an Ampere or newer GPU)")
        self.report(run.anchor, message, fix=fix, impact=impact)
        if run.source == "option" and run.option_default is not None:
            self.report(run.option_default, f"this option's default ({shown}) makes the Lightning `{run.cls}` train in FP32; mixed precision (`{spelled}`) runs on tensor cores", fix=fix, impact=impact)

    def _trainer_config(self, config: TrainerConfig) -> None:
        if not config.full_precision or not config.gpu:
            return
        site = config.site()
        if site.line and site.raw:
            message = f"`precision: {site.raw}` in this trainer config trains in FP32 on the GPU"
            edit = value_edit(site, "16")
            fix = Fix.config(edit, "Set `precision` to 16 (mixed) in the config file", UNSAFE) if edit else Fix.advice("Set `precision` to a mixed spelling in the config file")
        else:
            message = "this trainer config sets no `precision`: Lightning's default, 32, trains in FP32 on the GPU"
            fix = Fix.advice("Add `precision: 16-mixed` (Lightning 2.x; `16` on 1.x) to this trainer config")
        message += "; mixed precision runs matmuls and convolutions on tensor cores"
        self.report(config.call, message, fix=fix, impact=self.impact.with_level(MEDIUM), at=site)
