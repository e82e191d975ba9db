"""SPD701 cudnn-autotuner-disabled."""

from __future__ import annotations

import re
from functools import cached_property
from typing import TYPE_CHECKING, List, Optional, Set

import libcst as cst

from speedlint.analyzer.providers.default_sites import default_site, report_default
from speedlint.analyzer.providers.frameworks import TrainerRun, trainer_runs
from speedlint.analyzer.providers.loaders import one_site
from speedlint.analyzer.providers.names import dotted
from speedlint.analyzer.rule import DISPLAY_ONLY, MEDIUM, Fix, Impact, Rule

if TYPE_CHECKING:  # pragma: no cover
    from speedlint.analyzer.providers.configs import ConfigSite

BENCHMARK = "torch.backends.cudnn.benchmark"
DETERMINISTIC = "torch.backends.cudnn.deterministic"
CONV_PREFIXES = (
    "torch.nn.Conv", "torch.nn.ConvTranspose", "torch.nn.LazyConv", "torch.nn.functional.conv",
    "torchvision.models", "timm.create_model", "segmentation_models_pytorch",
)


#: `cudnn.benchmark = ...` anywhere in the text: the project decides the autotuner itself.
_BENCHMARK_ON = re.compile(r"cudnn\.benchmark\s*=(?!=)")


#: Evidence of fixed input shapes (resize/crop transforms, fixed-size image datasets).
_FIXED_SHAPES = re.compile(r"\b(Resize|RandomResizedCrop|RandomCrop|CenterCrop)\(|\b(CIFAR10|CIFAR100|MNIST|FashionMNIST|ImageFolder)\b")


def _not_a_flag(test: cst.BaseExpression) -> bool:
    """`if __name__ == "__main__":` and `if torch.cuda.is_available():` do not make a setting optional."""
    code = cst.Module(body=[]).code_for_node(test)
    return "__name__" in code or "is_available" in code


class CudnnAutotunerDisabled(Rule):
    """
    ## What it does
    Flags `torch.backends.cudnn.benchmark = False` and `torch.backends.cudnn.deterministic = True`
    set unconditionally in a training script of a convolutional network that runs on GPU, directly
    or in a seeding helper the script always calls (also one in another module). Also, once per
    training script, a convolutional network trained on GPU where `cudnn.benchmark` is never set
    anywhere in the script's program (the script and the project modules it imports, directly,
    through other modules or as plugins; a sibling script is another program), and the inputs have fixed shapes (resize/crop transforms, fixed-size
    image datasets): that finding sits on the `def` of the function holding the training loop.

    A Lightning `Trainer(deterministic=True)` or `Trainer(benchmark=False)` on a conv net is
    flagged on the keyword (the trainer sets these cuDNN flags itself).

    Settings behind an explicit switch (`if args.deterministic:`, `benchmark = not
    args.deterministic`, a helper only called under `if args.seed is not None:`) are the user's
    choice and are not flagged; nor are CPU-only scripts and networks without convolutions.

    A value that comes from a config dataclass field (`torch_deterministic: bool = True` parsed
    by `tyro.cli`, `simple_parsing`, `HfArgumentParser` or built as `Args()`) or an option's
    default is also reported on that default's line; a field the code assigns before reading it
    is not a default.

    ## Why is this slow?
    With `benchmark = True`, cuDNN times the available convolution algorithms for each input
    shape once and keeps the fastest. `benchmark = False` uses a heuristic choice, and
    `deterministic = True` restricts cuDNN to deterministic algorithms, which are often the
    slowest ones (notably for backward of strided and transposed convolutions). Seed-everything
    snippets copied into training scripts turn this on for good, usually without anyone needing
    bitwise reproducibility.

    ## Example
    ```python
    torch.backends.cudnn.benchmark = False
    torch.backends.cudnn.deterministic = True
    model = nn.Sequential(nn.Conv2d(3, 16, 3), nn.ReLU(), nn.Flatten(), nn.LazyLinear(10)).cuda()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for x, y in DataLoader(TensorDataset(torch.randn(64, 3, 32, 32), torch.randint(0, 10, (64,))), batch_size=8):
        loss = F.cross_entropy(model(x.cuda()), y.cuda())
        loss.backward()
        optimizer.step()
    ```

    ## Use instead
    ```python
    parser = argparse.ArgumentParser()
    parser.add_argument("--deterministic", action="store_true")
    args = parser.parse_args()
    torch.backends.cudnn.benchmark = not args.deterministic
    torch.backends.cudnn.deterministic = args.deterministic
    model = nn.Sequential(nn.Conv2d(3, 16, 3), nn.ReLU(), nn.Flatten(), nn.LazyLinear(10)).cuda()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for x, y in DataLoader(TensorDataset(torch.randn(64, 3, 32, 32), torch.randint(0, 10, (64,))), batch_size=8):
        loss = F.cross_entropy(model(x.cuda()), y.cuda())
        loss.backward()
        optimizer.step()
    ```

    ## Fix safety
    Display-only: turning the autotuner on (and determinism off) changes which algorithms run,
    so results are no longer bitwise reproducible from run to run. Whether that matters is the
    user's call; the advice is to put determinism behind a `--deterministic` flag. With input
    shapes that change every batch, `benchmark = True` re-tunes for each new shape and may not pay off.

    ## References
    - PyTorch docs, "Reproducibility" and `torch.backends.cudnn.benchmark`
    - PyTorch performance tuning guide: "Enable cuDNN auto-tuner"
    """

    code = "SPD701"
    name = "cudnn-autotuner-disabled"
    impact = Impact(
        wastes="device math (slower convolution algorithms)",
        when="GPU conv nets with fixed input shapes",
        typical="1.1-2x steps/s for conv-heavy models",
        evidence="PyTorch performance tuning guide",
        level=MEDIUM,
    )
    fixes = (DISPLAY_ONLY,)
    triggers = ("cudnn", "backward", "deterministic", "benchmark")
    ast_precondition = staticmethod(
        lambda facts: facts.may_use_gpu
        and (facts.may_call_backward and facts.uses_any("benchmark", "deterministic") or facts.may_have_training_step)
        or facts.calls_any("Trainer") and facts.uses_any("benchmark", "deterministic")
    )

    # -- absence: a conv net trained on GPU, the autotuner never switched on -----------------
    def visit_Module(self, node: cst.Module) -> None:
        if "Trainer" in self.ctx.source:
            for run in trainer_runs(self.ctx):
                self._trainer(run)
        facts = self.ctx.torch
        if not facts.step_loops or not self._on_gpu or not self._conv_training_script:
            return
        project = self._project
        if _BENCHMARK_ON.search(self.ctx.source) or (project is not None and project[1]):
            return  # set somewhere in the project: the explicit settings are judged where they are
        if not (_FIXED_SHAPES.search(self.ctx.source) or (project is not None and project[3])):
            return  # no sign of fixed input shapes (variable-length audio, aspect-ratio resizing...)
        if project is not None and len(project) > 4 and not project[4] and not self._own_conv:
            return  # the step runs no convolution (a head on a frozen conv backbone's features)
        first = min(facts.step_loops, key=lambda n: facts.order.get(n, 0))
        entry = facts.enclosing_function(first)
        if entry is None:
            return  # a flat script: no training entry function to anchor on
        self.report(
            entry,
            "this trains a convolutional network on the GPU, and `torch.backends.cudnn.benchmark` is never "
            "enabled anywhere in its program (this script and the modules it imports): cuDNN picks convolution algorithms by heuristic instead of timing them",
            fix=Fix.advice("Set `torch.backends.cudnn.benchmark = True` once at start-up (input shapes fixed)"),
            impact=self.impact.with_level(MEDIUM),
        )

    def _trainer(self, run: TrainerRun) -> None:
        """A Lightning `Trainer(deterministic=True)` / `Trainer(benchmark=False)` on a conv net (the
        trainer sets the cuDNN flags itself)."""
        project = self._project
        if run.cls != "Trainer" or not run.gpu or not (project and project[0]):
            return
        deterministic, benchmark = run.knobs["deterministic"], run.knobs["benchmark"]
        if deterministic.status == "value" and deterministic.value is not None and deterministic.value.all(lambda v: v is True):
            message = "`Trainer(deterministic=True)` restricts cuDNN to deterministic (often slower) algorithms and turns the autotuner off in a conv-net training run"
            self.report(deterministic.node or run.call, message, fix=Fix.advice("Drop `deterministic=True` (or put it behind a flag) and pass `benchmark=True` unless bitwise reproducibility is required"))
        elif benchmark.status == "value" and benchmark.value is not None and benchmark.value.all(lambda v: v is False):
            self.report(benchmark.node or run.call, "`Trainer(benchmark=False)` disables the cuDNN autotuner in a conv-net training run", fix=Fix.advice("Pass `benchmark=True` (input shapes fixed)"))

    @cached_property
    def _project(self) -> Optional[list]:
        """[conv layers in the program, autotuner set, a training step, fixed-shape inputs] over the
        file's program (`speedlint.analyzer.program`), and, for a file with training-step loops,
        whether those loops run convolutions; None without it."""
        seeds = self.ctx.seeds
        return seeds.project.get("cudnn") if seeds is not None else None

    def visit_Assign(self, node: cst.Assign) -> None:
        for target in node.targets:
            q = self.ctx.qualname(target.target) if isinstance(target.target, cst.Attribute) else None
            if q not in (BENCHMARK, DETERMINISTIC):
                continue
            value = self.ctx.code(node.value)
            literal = value in ("True", "False")
            site = None if literal else self._config_site(node.value)
            source = f"(`{site.name}` in the config file)" if site is not None else "(True by default)"
            if q == BENCHMARK and self._constant(node.value) is False:
                shown = "`cudnn.benchmark = False`" if literal else f"`cudnn.benchmark = {value}` {source.replace('True', 'False')}"
                self._check(node, f"{shown} disables the cuDNN autotuner", site)
            elif q == DETERMINISTIC and self._constant(node.value) is True:
                shown = "`cudnn.deterministic = True`" if literal else f"`cudnn.deterministic = {value}` {source}"
                self._check(node, f"{shown} restricts cuDNN to deterministic (often slower) algorithms", site)

    def _config_site(self, expr: cst.BaseExpression) -> Optional[ConfigSite]:
        """The config-file line a setting's value comes from (the finding goes there), if one."""
        traced = self.ctx.config_values.resolve(expr)
        if traced is None or traced.kind != "config" or not traced.config:
            return None
        return one_site(traced.config, traced.options)

    def _constant(self, expr: cst.BaseExpression) -> Optional[bool]:
        """A literal `True`/`False`, or a module-level constant holding one; None for anything else."""
        if isinstance(expr, cst.Name) and expr.value in ("True", "False"):
            return expr.value == "True"
        if isinstance(expr, cst.Name):
            fn = self.ctx.torch.enclosing_function(expr)
            if fn is not None and any(p.name.value == expr.value for p in fn.params.params):
                return None  # `def seed_all(deterministic=True)`: the caller decides
            writes: List[cst.Assign] = []
            for stmt in self.ctx.module.body:
                if isinstance(stmt, cst.SimpleStatementLine):
                    for small in stmt.body:
                        if isinstance(small, cst.Assign) and any(dotted(t.target) == expr.value for t in small.targets):
                            writes.append(small)
            if len(writes) == 1 and isinstance(writes[0].value, cst.Name) and writes[0].value.value in ("True", "False"):
                return writes[0].value.value == "True"
        # `args.torch_deterministic`: an option or config field; its default decides (an opt-in
        # `--deterministic` flag defaults to False and is not flagged)
        traced = self.ctx.config_values.resolve(expr)  # (also a value in a config file the code reads)
        if traced is not None and traced.options and all(isinstance(v, bool) for v in traced.options) and len(set(traced.options)) == 1:
            return bool(traced.options[0])
        return None

    def _check(self, node: cst.Assign, message: str, site: Optional[ConfigSite] = None) -> None:
        if not self._on_gpu or not self._conv_training_script:
            return
        if not self._unconditional(node, set()):
            return
        fix = Fix.advice(
            "Use `torch.backends.cudnn.benchmark = True` (and `deterministic = False`) unless bitwise "
            "reproducibility is required; put determinism behind a `--deterministic` flag"
        )
        self.report(node, at=site, message=f"{message} in a conv-net training script", fix=fix)
        if site is None:  # an option's or config field's default decides it: that line too
            default = default_site(self.ctx, self.ctx.config_values.resolve(node.value), node.value)
            report_default(self, default, f"{message} in a conv-net training script", node, fix=fix)

    def _unconditional(self, node: cst.CSTNode, seen: Set[cst.FunctionDef]) -> bool:
        """Runs whenever the script runs: no `if` guard here, nor at every call site of its helper."""
        facts = self.ctx.torch
        fn = facts.enclosing_function(node)
        guards = [g for g in facts.guarding_ifs(node, fn) if not (isinstance(g, cst.If) and _not_a_flag(g.test))]
        if guards:
            return False
        if fn is None or fn in seen:
            return fn is None
        seen.add(fn)
        sites = [c for c in facts.calls if fn in facts.resolve_call(c)]
        if not sites:
            # a helper nobody in this file calls: if the file itself is the training script, or
            # another module calls it unconditionally (a seeding helper in utils/)
            seeds = self.ctx.seeds
            called = seeds.project.get("called", ()) if seeds is not None else ()
            return bool(facts.step_loops) or facts.all_functions.index(fn) in called
        return any(self._unconditional(site, seen) for site in sites)

    @cached_property
    def _on_gpu(self) -> bool:
        # `.to(device)` alone is not enough here: seeding snippets set cudnn flags in CPU scripts too
        return self.ctx.may_use_gpu and bool(re.search(r"cuda|[Aa]ccelerator|device_map", self.ctx.source))

    @cached_property
    def _own_conv(self) -> bool:
        """This file builds convolutions itself (`nn.Conv2d`, `torchvision.models`...)."""
        return any((self.ctx.qualname(c.func) or "").startswith(CONV_PREFIXES) for c in self.ctx.torch.calls)

    @cached_property
    def _conv_training_script(self) -> bool:
        facts = self.ctx.torch
        project = self._project
        trains = bool(facts.step_loops) or any(facts.is_backward(c) for c in facts.calls) or bool(project and project[2])
        if not trains:
            return False
        names = [self.ctx.qualname(c.func) or "" for c in facts.calls]
        return any(n.startswith(CONV_PREFIXES) for n in names) or bool(project and project[0])
