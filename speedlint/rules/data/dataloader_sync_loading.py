"""SPD101 dataloader-sync-loading."""

from __future__ import annotations

import libcst as cst

from speedlint.analyzer.frameworks._knobs_hf import LOADER_KNOB_WORDS
from speedlint.analyzer.frameworks.hf_accelerate import framework_loaders
from speedlint.analyzer.loader_helpers import KEY as HELPER_CALLS, helper_call
from speedlint.analyzer.rule import DISPLAY_ONLY, HIGH, LOW, MEDIUM, UNSAFE, Fix, Impact, Rule
from speedlint.analyzer.configs.edit import value_edit
from speedlint.analyzer.providers.anchors import keyword_anchor
from speedlint.analyzer.providers.loaders import code_site as _code_site, CONFIG_WORKERS, LOADER_TRIGGERS, config_site, is_dataloader, loader_facts, may_build_loader, workers_text
from speedlint.analyzer.providers.default_sites import default_site, report_default


class DataLoaderSyncLoading(Rule):
    """
    ## What it does
    Flags `DataLoader(...)` calls that load data in the main process: `num_workers` missing, 0 or
    1. Loaders of torch, torch_geometric, MONAI, DGL and webdataset (`WebLoader`) count, and project subclasses of them, and
    `functools.partial(DataLoader, ...)`. The value is traced through literals, module constants,
    function defaults (also of a subclass's `__init__`), argparse options (`args.workers` and its
    `default=`), keyword dicts passed as `**kwargs` (also built conditionally: `{...} if cuda else
    {}`, updated under an `if`, merged: a value may be what any of them gives it), config dicts
    (`cfg["num_workers"]`, `cfg.get("num_workers", 0)`), values in config files the code reads
    (YAML, JSON, TOML, INI: the finding is then on the config line), the defaults of a yacs-style
    config in another module (`_C.DATA.NUM_WORKERS = 0`, unless code sets the key from an
    expression or a YAML config names it) and same-file helpers. A value
    that cannot be known is not flagged, nor are in-memory datasets (`TensorDataset`, a list of
    tensors, also built in another module and passed in), a loader read once with
    `next(iter(loader))`, or the self-test of a dataset module (under its `if __name__ ==
    "__main__":`). A project dataset class (in any module) whose `__getitem__` only indexes
    attributes of `self` holding data built in memory or passed in (`return self.data[i]`,
    `return self.x[i], self.y[i]`) is in memory too, also when a helper returns it in a tuple
    (`dataset, model, optimizer = load_train_objs()`); one that opens or loads a file
    (`Image.open(self.paths[i])`), calls a transform, wraps another dataset (`self.dataset[i]`)
    or indexes an HDF5/LMDB file or a memory map is not.

    When the value is a command-line option's default or a config dataclass field's default
    (`num_workers=args.workers` with `--workers` defaulting to 0, also declared in another module
    of the program), the default's line is reported as well: that is the line to change.

    ## Why is this slow?
    With `num_workers=0` every batch is read, decoded, augmented and collated by the training
    process itself, between two optimizer steps: the GPU waits for each batch. Worker processes
    prepare the next batches in parallel while the current one trains; for file-backed datasets
    this is often the largest single speedup available (2-10x steps/s on input-bound jobs).
    One worker only moves the same serial work into another process.

    ## Example
    ```python
    class Images(Dataset):
        def __init__(self, paths):
            self.paths = paths

        def __len__(self):
            return len(self.paths)

        def __getitem__(self, i):
            return torch.load(self.paths[i])

    loader = DataLoader(Images(["a.pt", "b.pt"]), batch_size=64, shuffle=True)
    ```

    ## Use instead
    ```python
    import os

    class Images(Dataset):
        def __init__(self, paths):
            self.paths = paths

        def __len__(self):
            return len(self.paths)

        def __getitem__(self, i):
            return torch.load(self.paths[i])

    if __name__ == "__main__":
        loader = DataLoader(
            Images(["a.pt", "b.pt"]),
            batch_size=64,
            shuffle=True,
            num_workers=min(8, os.cpu_count() or 1),
            persistent_workers=True,
            pin_memory=torch.cuda.is_available(),
        )
    ```

    ## Fix safety
    Unsafe: the tuned-DataLoader rewrite changes resources and process structure. It sets
    `num_workers` from the CPU count (bounded to 8); where an argparse option, a config dict, a
    constant or a function default feeds the value, it changes the default there. A value in a
    config file is set to 4 there (a config cannot ask for the CPU count), keeping the file's
    comments and formatting. It adds
    `persistent_workers` only where workers > 0 and `pin_memory=torch.cuda.is_available()` when the
    script may use CUDA. Scripts that train at import time get an `if __name__ == "__main__":` guard,
    because worker processes re-import the main module on macOS and Windows; when the guard cannot be
    added, the finding says why and nothing is rewritten. Dataset code then runs in worker
    processes: global state mutated by `__getitem__`, unpicklable datasets (open file handles,
    lambdas) and per-process random state need care.

    ## References
    - PyTorch docs, `torch.utils.data`: "Multi-process data loading", "Platform-specific behaviors"
    - PyTorch performance tuning guide: "Enable async data loading and augmentation"
    """

    code = "SPD101"
    name = "dataloader-sync-loading"
    impact = Impact(
        wastes="input pipeline (batches prepared serially in the training process)",
        when="input-bound jobs: file-backed datasets, decoding, augmentation",
        typical="2-10x steps/s on input-bound jobs",
        evidence="PyTorch performance tuning guide; benchmarks/scenarios: sync_loading",
        level=HIGH,
    )
    fixes = (UNSAFE, DISPLAY_ONLY)
    triggers = LOADER_TRIGGERS + LOADER_KNOB_WORDS
    seed_triggers = (HELPER_CALLS,)
    ast_precondition = staticmethod(
        lambda facts: may_build_loader(facts) or facts.text_has_word(*LOADER_KNOB_WORDS) or facts.passes_loader_workers
    )

    def visit_Module(self, node: cst.Module) -> None:
        """Loaders a framework builds from its knobs (the HF `Trainer` from `TrainingArguments`)."""
        for fw in framework_loaders(self.ctx):
            if fw.workers != 0:
                continue
            anchor = fw.workers_node or fw.constructor
            how = f"`{fw.workers_key}` is 0" if fw.workers_node is not None else f"`{fw.name}(...)` without `{fw.workers_key}` (default 0)"
            if fw.in_memory:
                message = f"{how}: the {fw.owner}'s loaders collate batches in the training process (the samples are tokenized in memory: a small cost)"
                impact = self.impact.with_level(LOW, "in-memory samples; only collation runs per batch")
            else:
                message = f"{how}: the {fw.owner}'s loaders prepare every batch in the training process"
                impact = None
            fix = Fix.replace(fw.constructor, fw.workers_fixed, f"Set `{fw.workers_key}=4, {fw.persistent_key}=True`", UNSAFE) if fw.workers_fixed is not None else None
            self.report(anchor, message, fix=fix, impact=impact)

    def visit_Call(self, node: cst.Call) -> None:
        passed = helper_call(self.ctx, node)  # the worker count of a loader a helper builds elsewhere
        if passed is not None and passed.workers == 0 and not (passed.dataset is not None and loader_facts(self.ctx).in_memory(passed.dataset)):
            self.report(
                passed.arg,
                f"`{passed.param}=0` makes the loader built at {passed.helper} load its batches in the training process",
                fix=Fix.advice(f"Pass `{passed.param}` >= 2 here (with `persistent_workers=True` in the helper)"),
                impact=self.impact.with_level(MEDIUM, "a loader built elsewhere; how much depends on its dataset"),
            )
        if not is_dataloader(self.ctx, node):
            return
        from speedlint.fixers.dataloader import plan, tune_module  # lazily: it imports libcst.codemod

        module_plan = plan(self.ctx)
        loader_plan = module_plan.for_call(node)
        if loader_plan is None:
            return
        from speedlint.analyzer.providers.loaders import kwarg

        workers = kwarg(self.ctx, node, "num_workers")
        what = workers_text(workers)
        single = not workers.missing and workers.value is not None and set(workers.value.options) == {1}
        how = "one worker process prepares the batches one after the other" if single else "batches are loaded in the training process, one after the other"
        message = f"{what}: {how}"
        site = config_site(workers)
        if site is not None:  # the value is written in a config file: the finding (and fix) go there
            edit = value_edit(site, CONFIG_WORKERS)
            key = site.name
            fix = Fix.config(edit, f"Set `{key}` to {CONFIG_WORKERS} in the config file", UNSAFE) if edit else Fix.advice(f"Set `{key}` to {CONFIG_WORKERS} or more in the config file")
            self.report(_code_site(workers, node), message, fix=fix, at=site)
            return
        reason = loader_plan.reason
        default = default_site(self.ctx, workers.value, workers.node.value if isinstance(workers.node, cst.Arg) else None)  # an option's or config field's default decides it
        report_default(self, default, message, node, fix=Fix.advice("Make the default 2 or more (from the CPU count)"))
        if reason:
            self.report(keyword_anchor(workers, node), f"{message} (not rewritten: {reason})", fix=Fix.advice(f"Set `num_workers` from the CPU count by hand: {reason}"))
            return
        settings, seeds, ctx, planned = self.ctx.settings, self.ctx.seeds, self.ctx, self.ctx.module
        title = "Load batches in worker processes (num_workers from the CPU count"
        if module_plan.guard_from is not None:
            title += "; adds an `if __name__ == \"__main__\":` guard"
        title += ")"

        def tune(module: cst.Module) -> cst.Module:  # (on this context when it is the module's: planned already)
            return tune_module(module, settings, seeds, ctx if module is planned else None)

        self.report(keyword_anchor(workers, node), message, fix=Fix(title, UNSAFE, fixer=tune))
