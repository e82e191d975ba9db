"""Framework facts for one file, for the rules (`speedlint.analyzer.frameworks`).

* `framework_hook(facts, fn)`: (kind, hook name, runs without grad) when a framework's own loop
  calls `fn` ("step": once per training step, "eval": once per evaluation batch, "loader": a
  `*_dataloader()` hook whose loader the framework iterates every epoch). The whole program says
  it (`FileSeeds.project["framework_hooks"]`, subclasses across modules included); without seeds
  the class's written bases decide.
* `trainer_runs(ctx)` / `trainer_configs(ctx)`: Lightning `Trainer`/`Fabric` constructions and the
  trainer configs (Hydra files, YAML `trainer:` blocks) a file builds trainers from, with their knobs.
* `metric_sync(ctx, call)` / `metric_constructor(ctx, call)`: torchmetrics objects updated per step.

`self.hparams` values are in `providers.hparams` (the value tracer reads them).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Dict, List, Optional, Tuple

import libcst as cst

from speedlint.analyzer.frameworks import lightning
from speedlint.analyzer.frameworks.hooks import TABLES, class_hooks, framework_runs_without_grad
from speedlint.analyzer.frameworks.seeds import hook_entry
from speedlint.analyzer.providers.configs import ConfigSite
from speedlint.analyzer.providers.flow import flow
from speedlint.analyzer.providers.names import dotted
from speedlint.analyzer.providers.training import TorchFacts

if TYPE_CHECKING:  # pragma: no cover
    from speedlint.analyzer.context import FileContext


def _written_bases(facts: TorchFacts, cls: cst.ClassDef) -> List[str]:
    out = []
    for base in cls.bases:
        name = facts.imports.qualname(base.value)
        if name:
            out.append(name)
    return out


def framework_hook(facts: TorchFacts, fn: Optional[cst.FunctionDef]) -> Optional[Tuple[str, str, bool]]:
    if fn is None:
        return None
    seeds = facts.seeds
    if seeds is not None and seeds.project.get("framework_hooks"):
        ordinal = facts._function_ordinal.get(fn, -1)
        return hook_entry(seeds.project, ordinal)
    cls = facts.function_class.get(fn)
    if cls is None:
        return None
    bases = _written_bases(facts, cls)
    kind = class_hooks(bases, {fn.name.value: 0}).get(fn.name.value)
    return (kind, fn.name.value, framework_runs_without_grad(bases, fn.name.value)) if kind else None


def hook_of_node(facts: TorchFacts, node: cst.CSTNode) -> Optional[Tuple[str, str, bool]]:
    """The framework hook whose body holds `node` (the innermost function only)."""
    return framework_hook(facts, facts.enclosing_function(node))


def is_framework_class(facts: TorchFacts, cls: cst.ClassDef) -> bool:
    return any(t.matches(_written_bases(facts, cls)) for t in TABLES)


# -- Lightning `Trainer` / `Fabric` runs ---------------------------------------------------------------
@dataclass
class TrainerRun:
    """One `Trainer(...)`, `Trainer.from_argparse_args(...)` or `Fabric(...)` of this file."""

    call: cst.Call
    cls: str  # "Trainer" | "Fabric"
    major: Optional[int]  # Lightning's major version when the code says it (1, 2), else None
    #: the run trains in FP32/FP64 (True), in mixed precision (False), or it is not known (None)
    full_precision: Optional[bool]
    #: where a precision finding goes: the keyword, else the constructor
    anchor: cst.CSTNode
    #: how the value is known: "keyword", "default" (absent: Lightning's 32), "option" (an argparse
    #: default), "namespace" (a namespace without it: Lightning's default)
    source: str
    #: the `default=` of the command-line option that holds it (same file), if any
    option_default: Optional[cst.CSTNode] = None
    #: the run may be on a GPU (False: it is CPU-only by its own keywords)
    gpu: bool = True
    #: the keyword argument node for `precision`, when written
    keyword: Optional[cst.Arg] = None
    values: Tuple[Any, ...] = ()
    #: the other knobs as written (`values.KwArg`): benchmark, deterministic, detect_anomaly, profiler
    knobs: Dict[str, Any] = field(default_factory=dict)
    #: built from a namespace (`from_argparse_args`): keywords not written may come from it
    from_args: bool = False
    #: no `accelerator`/`gpus`/`devices` written: the trainer picks a GPU when one is present (2.x)
    auto_device: bool = False


def trainer_runs(ctx: FileContext) -> List[TrainerRun]:
    """Every Lightning `Trainer`/`Fabric` construction of the file, with its precision and devices."""
    out: List[TrainerRun] = []
    facts: TorchFacts = ctx.torch
    for call in facts.calls:
        func = call.func
        from_args = isinstance(func, cst.Attribute) and func.attr.value in ("from_argparse_args", "from_argparse")
        cls = lightning.trainer_class(ctx.qualname(func.value if from_args and isinstance(func, cst.Attribute) else func))
        if cls is None:
            continue
        if _only_evaluates(facts, call):
            continue
        out.append(_run(ctx, call, cls, from_args))
    return out


def _qualname_of(facts: TorchFacts, func: cst.BaseExpression) -> Optional[str]:
    return facts.imports.qualname(func)


def _nearest_if(facts: TorchFacts, node: cst.CSTNode) -> Optional[cst.If]:
    for a in facts.ancestors(node):
        if isinstance(a, cst.If):
            return a
        if isinstance(a, cst.FunctionDef):
            return None
    return None


def _only_evaluates(facts: TorchFacts, call: cst.Call) -> bool:
    """`trainer = Trainer(...)` whose name is never `.fit(...)` in its function while it is
    `.test`/`.validate`/`.predict`-ed there: an evaluation run, not a training run."""
    fn = facts.enclosing_function(call)
    target = None
    for a in facts.ancestors(call):
        if isinstance(a, cst.Assign) and a.value is call and len(a.targets) == 1:
            target = dotted(a.targets[0].target)
            break
        if isinstance(a, (cst.SimpleStatementLine, cst.FunctionDef)):
            break
    if target is None:
        return False
    order = facts.order
    here = order.get(call, 0)
    # the calls on the name after this assignment and before the next one (`if evaluate:` may
    # build a second trainer under the same name)
    branch = _nearest_if(facts, call)
    later = sorted(
        order.get(c, 0) for c in facts.calls
        if c is not call and facts.enclosing_function(c) is fn and order.get(c, 0) > here and lightning.trainer_class(_qualname_of(facts, c.func))
        and (branch is None or _nearest_if(facts, c) is not branch)  # (the other branch of an if/else)
    )
    end = later[0] if later else float("inf")
    uses = set()
    for other in facts.calls:
        func = other.func
        if isinstance(func, cst.Attribute) and dotted(func.value) == target and facts.enclosing_function(other) is fn and here < order.get(other, 0) < end:
            uses.add(func.attr.value)
    return "fit" not in uses and bool(uses & {"test", "validate", "predict"})


def _major(ctx: FileContext, call: cst.Call, from_args: bool) -> Optional[int]:
    if any(v.startswith("lightning.") or v == "lightning" for v in ctx.imports.aliases.values()):
        return 2
    if from_args or any(a.keyword is not None and a.keyword.value in lightning.ONE_X_ONLY for a in call.args):
        return 1
    return None


def _run(ctx: FileContext, call: cst.Call, cls: str, from_args: bool) -> TrainerRun:
    major = _major(ctx, call, from_args)
    values = ctx.values
    kw = values.kwarg(call, "precision")
    keyword = kw.node if isinstance(kw.node, cst.Arg) and kw.node.keyword is not None else None
    full: Optional[bool] = None
    source = "keyword"
    option_default: Optional[cst.CSTNode] = None
    options: Tuple[Any, ...] = ()
    if kw.status == "value" and kw.value is not None:
        options = kw.value.options
        full = _all_full(options)
        if kw.value.kind == "argparse":
            source = "option"
            option_default = kw.value.origin
    elif kw.missing and not from_args:
        if not any(a.star for a in call.args):
            full, source, options = True, "default", (32,)
    elif kw.missing and from_args:
        namespace = next((a.value for a in call.args if a.keyword is None and not a.star), None)
        if namespace is not None:
            got = values.resolve(cst.Attribute(value=namespace, attr=cst.Name("precision"))) if isinstance(namespace, (cst.Name, cst.Attribute)) else None
            if got is not None:
                options = got.options
                full = _all_full(options)
                source = "option"
                option_default = got.origin if got.kind == "argparse" else None
            elif not _project_sets(ctx, "precision"):
                full, source, options = True, "namespace", (32,)
    knobs = {k: values.kwarg(call, k) for k in lightning.OTHER_KNOBS}
    gpu = _may_use_gpu(ctx, call, major, from_args)
    auto = not from_args and all(values.kwarg(call, k).missing for k in lightning.DEVICE_KEYWORDS)
    return TrainerRun(call, cls, major, full, keyword or call, source, option_default, gpu, keyword, options, knobs, from_args, auto)


def _all_full(options: Tuple[Any, ...]) -> Optional[bool]:
    got = [lightning.is_full_precision(o) for o in options]
    if got and all(g is True for g in got):
        return True
    if got and all(g is False for g in got):
        return False
    return None  # mixed on some path (an opt-in flag), or not understood


def _project_sets(ctx: FileContext, key: str) -> bool:
    """A trainer config of the project (YAML `trainer:` blocks) or a launch command sets `key`."""
    seeds = ctx.seeds
    if seeds is None:
        return False
    return any(key in entry[2] for entry in seeds.project.get("trainer_configs") or ())


def _may_use_gpu(ctx: FileContext, call: cst.Call, major: Optional[int], from_args: bool) -> bool:
    values = ctx.values
    accelerator = values.kwarg(call, "accelerator")
    if accelerator.status == "value" and accelerator.value is not None and accelerator.value.all(lightning.is_cpu_accelerator):
        return False
    if from_args or major == 2:
        return True
    written = [values.kwarg(call, k) for k in lightning.DEVICE_KEYWORDS]
    if all(w.missing for w in written):
        # Lightning 1.x trains on the CPU unless `gpus`/`devices` say otherwise; 2.x picks a GPU
        return major is None and ctx.may_use_gpu
    gpus = written[1]
    if gpus.status == "value" and gpus.value is not None and gpus.value.all(lambda v: v is None or (isinstance(v, int) and v == 0)):
        return False
    return True


# -- trainers built from config files -------------------------------------------------------------
@dataclass
class TrainerConfig:
    """A trainer config of the project that a call of this file builds a trainer from."""

    call: cst.Call
    path: str
    line: int  # the anchor: the `trainer:` line of a block, a Hydra file's `accelerator` line
    keys: Tuple[str, ...]
    values: Any  # key -> [value, line, col, end_col, raw, style]

    @property
    def full_precision(self) -> Optional[bool]:
        got = self.values.get("precision")
        if got is None:
            return None if "precision" in self.keys else True
        return lightning.is_full_precision(got[0])

    @property
    def gpu(self) -> bool:
        accelerator = self.values.get("accelerator")
        if accelerator is not None and lightning.is_cpu_accelerator(accelerator[0]):
            return False
        gpus = self.values.get("gpus")
        return not (gpus is not None and (gpus[0] is None or (isinstance(gpus[0], int) and gpus[0] == 0)))

    def site(self) -> ConfigSite:
        """Where a precision finding goes: the `precision` line when written, else the anchor."""
        got = self.values.get("precision")
        if got is not None:
            value, line, col, end_col, raw, style = got
            return ConfigSite(self.path, line, col, end_col, raw, style, False, ("precision",), value, "yaml", "precision")
        return ConfigSite(self.path, self.line, 0, 0, "", "empty", False, (), None, "yaml", "precision")


def trainer_configs(ctx: FileContext) -> List[TrainerConfig]:
    """The trainer configs this file builds trainers from: Hydra trainer files for
    `hydra.utils.instantiate(cfg.trainer, ...)`, YAML `trainer:` blocks for
    `Trainer.from_argparse_args(namespace)` (a namespace filled from such a block) and
    `LightningCLI(...)` (the `trainer:` block of its YAML)."""
    seeds = ctx.seeds
    entries = seeds.project.get("trainer_configs") if seeds is not None else None
    if not entries:
        return []
    out: List[TrainerConfig] = []
    for call in ctx.torch.calls:
        func = call.func
        name = func.attr.value if isinstance(func, cst.Attribute) else func.value if isinstance(func, cst.Name) else ""
        if name == "instantiate" and call.args and "trainer" in (dotted(call.args[0].value) or "").lower():
            how = "target"
        elif name == "from_argparse_args" and lightning.trainer_class(ctx.qualname(func.value)) if isinstance(func, cst.Attribute) else False:
            how = "block"
        elif name == "LightningCLI" and (ctx.qualname(func) or "").split(".", 1)[0] in lightning.PACKAGES:
            how = "block"
        else:
            continue
        for path, line, keys, values, kind in entries:
            if kind == how:
                out.append(TrainerConfig(call, path, line, tuple(keys), values))
    return out


def trained_configs(ctx: FileContext, runs: List[TrainerRun]) -> List[TrainerConfig]:
    """`trainer_configs` when this file trains with them: it builds a trainer (`runs`, a Hydra
    `instantiate`, a `LightningCLI`) and fits it (a `.fit(` call, or the CLI's own); a trainer that
    only tests trains nothing."""
    source = ctx.source
    if (runs or "instantiate" in source or "LightningCLI" in source) and (".fit(" in source or "LightningCLI" in source):
        return trainer_configs(ctx)
    return []


# -- metric objects updated per step ------------------------------------------------------------------
_UNKNOWN = object()


def metric_constructor(ctx: FileContext, call: cst.Call) -> Optional[cst.Call]:
    """For `self.acc(preds, y)` / `self.acc.update(...)`: the torchmetrics constructor call that
    `self.acc` holds (the one assignment in its class), or None."""
    if "torchmetrics" not in ctx.source:
        return None  # (no metric of it can be built in this file)
    func = call.func
    if isinstance(func, cst.Attribute) and func.attr.value in ("update", "forward"):
        func = func.value
    if not isinstance(func, cst.Attribute) or dotted(func.value) != "self":
        return None
    built = flow(ctx).self_writes(func)  # what the class assigns to `self.<attr>`
    if len(built) != 1 or not isinstance(built[0], cst.Call) or not (ctx.qualname(built[0].func) or "").startswith("torchmetrics"):
        return None
    return built[0]


def metric_sync(ctx: FileContext, call: cst.Call) -> Optional[str]:
    """`self.acc(preds, y)` / `self.acc.update(...)` where `self.acc` is a torchmetrics metric
    whose update syncs with the host (`lightning.metric_sync`): the reason, or None."""
    ctor = metric_constructor(ctx, call)
    if ctor is None:
        return None
    keywords = {}
    for arg in ctor.args:
        if arg.keyword is not None:
            value = ctx.values.resolve(arg.value)
            keywords[arg.keyword.value] = value.single if value is not None and len(value.options) == 1 else _UNKNOWN
    if any(v is _UNKNOWN for k, v in keywords.items() if k in ("nan_strategy", "validate_args")):
        return None
    return lightning.metric_sync(ctx.qualname(ctor.func), keywords)
