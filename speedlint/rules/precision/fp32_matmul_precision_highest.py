"""SPD304 fp32-matmul-precision-highest."""

from __future__ import annotations

from typing import Iterable, List, Optional, Set, Union

import libcst as cst

from speedlint.analyzer.frameworks._knobs_hf import FP32
from speedlint.analyzer.frameworks.hf_accelerate import precision_knob, reduced_precision, tf32_enabled
from speedlint.analyzer.providers.frameworks import trained_configs, trainer_runs
from speedlint.analyzer.providers.inference import torch_attr
from speedlint.analyzer.rule import MEDIUM, UNSAFE, Fix, Impact, Rule

#: TF32 matmuls are off by default from torch 1.12 on (on by default before).
_TF32_OFF_SINCE = (1, 12)


class Fp32MatmulPrecisionHighest(Rule):
    """
    ## What it does
    Flags a training run in FP32 on a GPU (no autocast, no framework mixed precision, weights not
    loaded in float16/bfloat16) where TF32 matmuls are never switched on: no
    `torch.set_float32_matmul_precision("high")`, no `torch.backends.cuda.matmul.allow_tf32 = True`,
    no Hugging Face `TrainingArguments(tf32=True)` anywhere in the script's program (it and the
    project modules it imports; a sibling script that sets it is another program). The finding sits on
    the `def` of the training entry function (the function that runs the training loops, or that
    configures the framework's run). A Lightning `Trainer` or `Fabric` trains in FP32 when its
    `precision` is a full-precision value or absent, written in the code or in the project's
    trainer configs (`hydra.utils.instantiate(cfg.trainer)`, `LightningCLI`: every GPU config).

    It stays silent when the step runs under AMP (TF32 does not matter there), when the matmul
    precision is set anywhere, even to `"highest"` (a choice made on purpose), on CPU-only code,
    and when the project declares a torch older than 1.12 (TF32 matmuls were on by default).

    ## Why is this slow?
    Since PyTorch 1.12, float32 matmuls run in full IEEE FP32 on Ampere and newer GPUs. TF32
    tensor cores run the same matmuls with a 10-bit mantissa up to 8x faster (A100: 156 vs 19.5
    TFLOPS), with a precision that training tolerates in nearly every case. An FP32 training run
    that never opts in leaves most of the GPU's matmul throughput unused.

    ## Example
    ```python
    def main():
        device = torch.device("cuda")
        model = Net().to(device)
        for x, y in loader:
            loss = F.cross_entropy(model(x.to(device)), y.to(device))
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
    ```

    ## Use instead
    ```python
    def main():
        torch.set_float32_matmul_precision("high")
        device = torch.device("cuda")
        model = Net().to(device)
        for x, y in loader:
            loss = F.cross_entropy(model(x.to(device)), y.to(device))
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
    ```

    ## Fix safety
    Unsafe: TF32 changes the numerics of every float32 matmul and convolution (about 1e-3
    relative error per product), which a model that needs full FP32 precision (some scientific
    or ill-conditioned workloads) may not tolerate. The fix inserts
    `torch.set_float32_matmul_precision("high")` as the first statement of the training entry
    function; better still, train under AMP (SPD301).

    ## References
    - PyTorch docs, `torch.set_float32_matmul_precision` and "TensorFloat-32 (TF32) on Ampere (and later) devices"
    - NVIDIA, "TensorFloat-32 in the A100 GPU accelerates AI training"
    """

    code = "SPD304"
    name = "fp32-matmul-precision-highest"
    impact = Impact(
        wastes="matmul throughput (full FP32 instead of TF32 tensor cores)",
        when="GPU (Ampere or newer); FP32 training without AMP",
        typical="1.3-3x steps/s for matmul-heavy FP32 models",
        evidence="PyTorch docs: TF32 on Ampere; NVIDIA A100 TF32 figures",
        level=MEDIUM,
    )
    fixes = (UNSAFE,)
    triggers = ("backward", "TrainingArguments", "Accelerator", "Trainer", "Fabric", "LightningCLI")
    ast_precondition = staticmethod(
        lambda facts: (facts.may_use_gpu and (facts.may_have_training_step or facts.text_has_word("TrainingArguments", "Seq2SeqTrainingArguments")))
        or facts.calls_any("Trainer", "from_argparse_args", "Fabric", "instantiate", "LightningCLI")
    )

    def visit_Module(self, node: cst.Module) -> None:
        ctx = self.ctx
        if not self._torch_turns_tf32_off() or tf32_enabled(ctx) or reduced_precision(ctx):
            return
        runs = trainer_runs(ctx) if any(t in ctx.source for t in ("Trainer", "Fabric")) else []
        # trainer configs of the project that put a trainer built here on a GPU (Hydra, LightningCLI)
        configs = [c for c in trained_configs(ctx, runs) if c.gpu]
        if not ctx.may_use_gpu:
            if not configs:
                return
            runs = []  # the GPU is the configs' (the code itself names none)
        if runs or configs:  # a Lightning `Trainer` / `Fabric` decides the precision
            if any(run.full_precision is not True for run in runs) or any(c.full_precision is not True for c in configs):
                return  # mixed precision, or not known
            for fn in self._functions_around([run.call for run in runs if run.gpu] + [c.call for c in configs]):
                self._report(fn)
            return
        knob = precision_knob(ctx)
        if knob is not None:
            if knob.state != FP32:
                return
            entries = self._entries(ctx.torch.step_loops) or self._functions_around([knob.anchor] if knob.anchor is not None else [])
        else:
            from speedlint.fixers import amp  # lazily: it imports libcst.codemod (slow start-up)

            plans = amp.plan(ctx)
            # AMP written for a loop (on, or behind an option): TF32 is not what to change there
            amp_loops = {loop for loop, p in plans.items() if p.covered or p.remote or p.opt_in is not None or p.config_site is not None}
            with_amp = set(self._entries(amp_loops))
            entries = [fn for fn in self._entries(set(plans) - amp_loops) if fn not in with_amp]
        for fn in entries:
            self._report(fn)

    def _torch_turns_tf32_off(self) -> bool:
        settings = self.ctx.settings
        if settings.torch_below is not None and settings.torch_below <= _TF32_OFF_SINCE:
            return False
        version = settings.target_torch_version
        return version is None or version >= _TF32_OFF_SINCE or settings.torch_declared

    def _entries(self, loops: Set[Union[cst.For, cst.While]]) -> List[cst.FunctionDef]:
        """The functions that run these training loops, outermost first: a function whose loops
        call another of them (an epoch loop around a `train_one_epoch`) stands for both."""
        facts = self.ctx.torch
        units = set(loops) | {e for e in facts.epoch_loops if facts.inner_loops(e) & set(loops)}
        fns = self._functions_around(units)
        called: Set[cst.FunctionDef] = set()
        for fn in fns:
            called |= facts.callees_closure([fn]) - {fn}
        return [fn for fn in fns if fn not in called]

    def _functions_around(self, nodes: Iterable[cst.CSTNode]) -> List[cst.FunctionDef]:
        facts = self.ctx.torch
        out: List[cst.FunctionDef] = []
        for n in sorted(nodes, key=lambda x: facts.order.get(x, 0)):
            fn = facts.enclosing_function(n)
            while fn is not None and facts.enclosing_function(fn) is not None and facts.function_class.get(fn) is None:
                fn = facts.enclosing_function(fn)  # a closure: its outer function is the entry
            if fn is not None and fn not in out:
                out.append(fn)
        return out

    def _report(self, fn: cst.FunctionDef) -> None:
        func, imports = torch_attr(self.ctx, "set_float32_matmul_precision")
        stmt = cst.SimpleStatementLine([cst.Expr(cst.Call(func=func, args=[cst.Arg(cst.SimpleString('"high"'))]))])
        body = fn.body
        fix: Optional[Fix] = None
        if isinstance(body, cst.IndentedBlock):
            stmts = list(body.body)
            at = 1 if stmts and _is_docstring(stmts[0]) else 0
            new_body = body.with_changes(body=[*stmts[:at], stmt, *stmts[at:]])
            fix = Fix.replace(body, new_body, 'Call `torch.set_float32_matmul_precision("high")` at the start of the run', UNSAFE, imports)
        self.report(
            fn.name,
            f"`{fn.name.value}()` trains in FP32 on the GPU with TF32 matmuls never enabled: float32 matmuls run at full "
            "FP32 precision (torch >= 1.12 default)",
            fix=fix,
        )


def _is_docstring(stmt: cst.BaseStatement) -> bool:
    return (
        isinstance(stmt, cst.SimpleStatementLine)
        and len(stmt.body) == 1
        and isinstance(stmt.body[0], cst.Expr)
        and isinstance(stmt.body[0].value, (cst.SimpleString, cst.ConcatenatedString))
    )
