"""SPD103 dataloader-workers-respawned."""

from __future__ import annotations

from typing import TYPE_CHECKING, Optional, cast

import libcst as cst

from speedlint.analyzer.frameworks._knobs_hf import LOADER_KNOB_WORDS, literal_arg as _literal_arg
from speedlint.analyzer.frameworks.hf_accelerate import framework_loaders
from speedlint.analyzer.rule import DISPLAY_ONLY, MEDIUM, SAFE, Fix, Impact, Rule
from speedlint.analyzer.configs.edit import value_edit
from speedlint.analyzer.loader_edits import dict_site, greater_than_zero, repeatable
from speedlint.analyzer.providers.worker_counts import cpu_count_workers
from speedlint.analyzer.providers.anchors import keyword_anchor
from speedlint.analyzer.providers.loaders import code_site as _code_site, LOADER_TRIGGERS, config_site, is_dataloader, kwarg, loader_facts, loader_kind, may_build_loader
from speedlint.analyzer.providers.default_sites import default_site, report_default
from speedlint.analyzer.providers.values import KwArg, Value

if TYPE_CHECKING:  # pragma: no cover
    from speedlint.analyzer.context import FileContext


class DataLoaderWorkersRespawned(Rule):
    """
    ## What it does
    Flags a `DataLoader` with one or more workers that is iterated once per epoch (inside an outer
    loop, or in a function called once per epoch) without `persistent_workers=True`. The worker
    count is traced like SPD101's (constants, argparse defaults, keyword dicts, config lookups,
    config files, yacs-style config defaults); a loader that has workers only on some path (`{"num_workers": 1, ...} if use_cuda
    else {}`, a dict updated under an `if`) is flagged for that path. Loaders returned by helpers (as tuples or dicts), stored on `self`, passed on in
    lists, or iterated through wrappers (`tqdm`, `enumerate`, a project generator) in other
    modules count. A `persistent_workers: false` in a config file is reported on its line.
    Single-epoch scripts, loaders whose `persistent_workers` is already truthy (also through
    `**kwargs` or a conditional), and loaders built again inside the epoch loop (SPD104: a new
    loader every epoch, which persistent workers would not outlive) are not flagged.
    A helper run once per epoch (a training epoch, `log_every(loader)`) counts for the loaders
    that get to it once per epoch: the call chain that passes *this* loader must sit in an epoch
    loop. The same helper called once with another loader (a feature-extraction pass) does not
    make that loader per-epoch, and neither does a loader built inside a function run once per
    epoch and iterated in that call (a new loader on every call).

    When `persistent_workers` is a command-line option's default or a config dataclass field's
    default, the default's line is reported as well.

    ## Why is this slow?
    Without persistent workers, every `for batch in loader` starts `num_workers` fresh processes,
    each of which re-imports modules and unpickles (or re-forks) the dataset, and the first batches
    of every epoch wait for them. With heavy datasets or many workers that is seconds per epoch,
    for train and validation loaders alike.

    ## Example
    ```python
    loader = DataLoader(dataset, batch_size=64, num_workers=8)
    for epoch in range(10):
        for x, y in loader:
            loss = model(x).sum()
            loss.backward()
            optimizer.step()
    ```

    ## Use instead
    ```python
    loader = DataLoader(dataset, batch_size=64, num_workers=8, persistent_workers=True)
    for epoch in range(10):
        for x, y in loader:
            loss = model(x).sum()
            loss.backward()
            optimizer.step()
    ```

    ## Fix safety
    Safe: adds `persistent_workers=True` when the worker count is a literal >= 1, otherwise
    `persistent_workers=<workers> > 0` (torch rejects persistent workers with 0 workers), next to
    `num_workers` (in the call, or in the keyword dict it comes from), or sets the config file's
    value to `true`. A falsy value from a command-line option, or keywords built in several ways
    (a conditional dict), get advice only. Keep in mind that persistent workers hold their copy of
    the dataset: a dataset object changed in the main process between epochs is not seen by them.
    """

    code = "SPD103"
    name = "dataloader-workers-respawned"
    impact = Impact(
        wastes="input pipeline (worker processes started again every epoch)",
        when="multi-epoch training with worker processes",
        typical="0.1-10 s per epoch and loader; 1.05-1.5x epoch time on short epochs",
        evidence="PyTorch docs, DataLoader persistent_workers",
        level=MEDIUM,
    )
    fixes = (SAFE, DISPLAY_ONLY)
    triggers = LOADER_TRIGGERS + LOADER_KNOB_WORDS
    ast_precondition = staticmethod(
        lambda facts: (facts.may_have_training_step and may_build_loader(facts)) or facts.text_has_word(*LOADER_KNOB_WORDS)
    )

    def visit_Module(self, node: cst.Module) -> None:
        """Loaders a framework builds from its knobs: workers without persistent workers."""
        for fw in framework_loaders(self.ctx):
            if fw.workers and fw.persistent is False:
                anchor = fw.persistent_node or fw.workers_node or fw.constructor
                fix = None
                if fw.persistent_fixed is not None and (fw.persistent_node is None or _literal_arg(fw.persistent_node)):
                    fix = Fix.replace(fw.constructor, fw.persistent_fixed, f"Set `{fw.persistent_key}=True`", SAFE)
                self.report(anchor, f"{fw.workers} worker process(es) are started again every epoch: `{fw.persistent_key}` is off", fix=fix)

    def visit_Call(self, node: cst.Call) -> None:
        ctx = self.ctx
        if not is_dataloader(ctx, node):
            return
        workers = kwarg(ctx, node, "num_workers")
        # the CPU count (`os.cpu_count()`): at least one worker on every machine
        cpus = cpu_count_workers(ctx, workers.node.value) if workers.value is None and isinstance(workers.node, (cst.Arg, cst.DictElement)) else None
        # workers on some path (`{"num_workers": 1, ...} if use_cuda else {}`): respawned there
        if cpus is None and (workers.value is None or not workers.value.all(_count) or not workers.value.any(lambda v: v >= 1)):
            return
        persistent = kwarg(ctx, node, "persistent_workers")
        if persistent.unknown or (persistent.value is not None and persistent.value.any(bool)):
            return
        epoch = self._per_epoch(node)
        elsewhere = ctx.loader_use(node).get("epoch") if epoch is None and not self._rebuilt_where_iterated(node) else None
        if epoch is None and elsewhere is None:
            return
        # (no CPU count: the workers' value is known, else the test above returned)
        count = f"`{cpus}`" if cpus is not None else "/".join(str(v) for v in cast(Value, workers.value).options if v >= 1)
        message = f"{count} worker process(es) are started again every epoch: `persistent_workers` is not set"
        if workers.value is not None and workers.value.any(lambda v: v == 0):
            message += " (when workers are used: `num_workers` may also be 0)"
        if elsewhere is not None:
            message += f" (the loader is iterated every epoch at {elsewhere})"
        site = config_site(persistent)
        if site is not None:  # false in a config file: the finding (and fix) go there
            key = site.name
            edit = value_edit(site, True)
            message = message.replace("is not set", f"is false in the config file (`{key}`)")
            fix = Fix.config(edit, f"Set `{key}` to true in the config file", SAFE) if edit else Fix.advice(f"Set `{key}` to true in the config file")
            self.report(_code_site(persistent, node), message, fix=fix, at=site)
            return
        if not persistent.missing:
            message = message.replace("is not set", "is false")
        self.report(keyword_anchor(persistent, node), message, fix=self._fix(node, workers, persistent) or Fix.advice("Set `persistent_workers=True` (workers > 0)"))
        # an option's or config field's default decides it: that line too
        report_default(self, default_site(ctx, persistent.value, persistent.node.value if isinstance(persistent.node, cst.Arg) else None), message, node, fix=Fix.advice("Make the default true (workers > 0)"))

    def _rebuilt_where_iterated(self, call: cst.Call) -> bool:
        """Every loop of this file over the loader is in the epoch loop that builds it anew."""
        ctx = self.ctx
        loops = loader_facts(ctx).iteration_sites(call)
        return bool(loops) and all(
            (unit := ctx.torch.epoch_of(loop)) is not None and any(a is unit for a in ctx.torch.ancestors(call)) for loop in loops
        )

    def _per_epoch(self, call: cst.Call) -> Optional[cst.CSTNode]:
        ctx = self.ctx
        facts = loader_facts(ctx)
        for loop in facts.iteration_sites(call):
            unit = ctx.torch.epoch_of(loop)
            if unit is None:
                continue
            if isinstance(unit, cst.For) and _single_pass(ctx, unit):
                continue
            if any(a is unit for a in ctx.torch.ancestors(call)):
                continue  # built again every epoch: persistent workers would not outlive it (SPD104)
            if isinstance(unit, cst.FunctionDef) and not facts.reaches_per_epoch(loop, call):
                continue  # a helper run once per epoch with other loaders, once with this one
            return unit
        return None

    def _fix(self, call: cst.Call, workers: KwArg, persistent: KwArg) -> Optional[Fix]:
        from speedlint.analyzer.fixes import keywords_edit

        ctx = self.ctx
        node = workers.node
        kind = loader_kind(ctx, call)
        if not isinstance(node, (cst.Arg, cst.DictElement)) or (kind is not None and kind.subclass) or workers.conditional or persistent.conditional:
            return None
        expr = node.value
        if isinstance(expr, cst.Integer):
            value: cst.BaseExpression = cst.Name("True")
        elif repeatable(expr):
            value = greater_than_zero(expr)
        else:
            return None
        if persistent.missing:
            if isinstance(node, cst.Arg) and workers.via is None:
                site: Optional[cst.CSTNode] = call
            else:
                site = dict_site(loader_facts(ctx), node)
            if site is None:
                return None
            title = f"Add `persistent_workers={ctx.code(value)}`"
            return Fix.replace(site, keywords_edit(ctx, site, [("persistent_workers", value)]), title, SAFE)
        origin = persistent.value.origin if persistent.value is not None else None
        if persistent.value is not None and persistent.value.kind in ("literal", "dict") and isinstance(origin, cst.Name) and origin.value == "False":
            return Fix.replace(origin, value, "Set `persistent_workers` (workers > 0)", SAFE)
        return None


def _count(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _single_pass(ctx: FileContext, loop: cst.For) -> bool:
    """`for epoch in range(1)` / `range(args.epochs)` with a default of 1."""
    it = loop.iter
    if isinstance(it, cst.Call) and isinstance(it.func, cst.Name) and it.func.value == "range" and len(it.args) == 1:
        value = ctx.values.resolve(it.args[0].value)
        return value is not None and value.all(lambda v: isinstance(v, int) and v <= 1)
    return False
