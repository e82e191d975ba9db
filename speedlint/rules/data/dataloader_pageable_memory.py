"""SPD102 dataloader-pageable-memory."""

from __future__ import annotations

import libcst as cst

from speedlint.analyzer.frameworks._knobs_hf import LOADER_KNOB_WORDS, literal_arg as _literal_arg
from speedlint.analyzer.frameworks.hf_accelerate import framework_loaders
from speedlint.analyzer.rule import DISPLAY_ONLY, MEDIUM, SAFE, Fix, Impact, ImportSpec, Rule
from speedlint.analyzer.configs.edit import value_edit
from speedlint.analyzer.loader_edits import PIN_CODE, keyword_site
from speedlint.analyzer.providers.anchors import keyword_anchor
from speedlint.analyzer.providers.loaders import code_site as _code_site, LOADER_TRIGGERS, batches_to_cuda, config_site, is_dataloader, kwarg, may_build_loader
from speedlint.analyzer.providers.default_sites import default_site, report_default


class DataLoaderPageableMemory(Rule):
    """
    ## What it does
    Flags a `DataLoader` whose batches are copied to the GPU (`.cuda()`, or `.to(device)` where the
    device is or may be CUDA) while `pin_memory` is not set: missing, or set to a falsy value.
    The batch is followed from the `for` loop over the loader (also `enumerate`/`tqdm`, unpacked
    tuples, dicts of tensors, `next(it)` in a `while` loop, a project generator such as
    `metric_logger.log_every(loader)`) into same-file helpers such as `train_step(batch)` and the
    model's `forward`; `.type(torch.cuda.FloatTensor)` is a copy to the GPU too, and loops in other
    modules count. CPU-only scripts, and loaders whose `pin_memory` is truthy directly, through
    `**kwargs` (also when only the CUDA branch of a conditional dict sets it) or through a config
    lookup with a truthy default, are not flagged. A `pin_memory: false` in a config file the code
    reads is reported on its line.

    When the value is a command-line option's default or a config dataclass field's default
    (`pin_memory=args.pin_memory` with a `store_true` flag, `pin_memory: bool = False` parsed by
    `tyro`/`HfArgumentParser`), the default's line is reported as well.

    ## Why is this slow?
    A host-to-device copy from ordinary (pageable) memory goes through a staging buffer: the driver
    first copies the batch into page-locked memory, then DMAs it, and the copy cannot overlap with
    compute. With `pin_memory=True` the loader's pin-memory thread puts batches in page-locked memory
    ahead of time, the copy is faster, and `non_blocking=True` copies can overlap with the GPU work.

    ## Example
    ```python
    device = torch.device("cuda")
    loader = DataLoader(dataset, batch_size=64, num_workers=4)
    for x, y in loader:
        x, y = x.to(device), y.to(device)
    ```

    ## Use instead
    ```python
    device = torch.device("cuda")
    loader = DataLoader(dataset, batch_size=64, num_workers=4, pin_memory=torch.cuda.is_available())
    for x, y in loader:
        x, y = x.to(device), y.to(device)
    ```

    ## Fix safety
    Safe: adds `pin_memory=torch.cuda.is_available()` (so the same script still runs on machines
    without CUDA), or edits the entry of the keyword dict the loader's `**kwargs` come from, or
    sets the config file's value to `true` (pinning is skipped with a warning where CUDA is absent). Never
    offered when `pin_memory` could also arrive through a `**kwargs` dict that cannot be resolved
    (that would raise `got multiple values for keyword argument`). A falsy value from a command-line
    option gets advice only: the option is the user's knob.

    ## References
    - PyTorch docs, `torch.utils.data`: "Memory Pinning"
    - PyTorch performance tuning guide: "Use pinned memory and non_blocking"
    """

    code = "SPD102"
    name = "dataloader-pageable-memory"
    impact = Impact(
        wastes="host-device transfers (staged copies from pageable memory)",
        when="GPU training",
        typical="1.05-1.3x steps/s; more with large batches and non_blocking copies",
        evidence="PyTorch docs, Memory Pinning; PyTorch performance tuning guide",
        level=MEDIUM,
    )
    fixes = (SAFE, DISPLAY_ONLY)
    triggers = LOADER_TRIGGERS + LOADER_KNOB_WORDS
    ast_precondition = staticmethod(
        lambda facts: (facts.may_use_gpu and may_build_loader(facts) and facts.has_stmt_loop and facts.calls_any("to", "cuda", "type"))
        or facts.text_has_word(*LOADER_KNOB_WORDS)
    )

    def visit_Module(self, node: cst.Module) -> None:
        """Loaders a framework builds from its knobs: pinning switched off (its default is on)."""
        for fw in framework_loaders(self.ctx):
            if fw.pin is False and fw.pin_node is not None:
                fix = Fix.replace(fw.constructor, fw.pin_fixed, f"Set `{fw.pin_key}=True`", SAFE) if _literal_arg(fw.pin_node) and fw.pin_fixed is not None else None
                self.report(fw.pin_node, f"`{fw.pin_key}` is off: the {fw.owner}'s loaders hand pageable batches to the GPU copy", fix=fix)

    def visit_Call(self, node: cst.Call) -> None:
        ctx = self.ctx
        if not ctx.may_use_gpu or not is_dataloader(ctx, node):
            return
        pin = kwarg(ctx, node, "pin_memory")
        if pin.unknown or (pin.value is not None and pin.value.any(bool)):
            return
        move = batches_to_cuda(ctx, node)
        elsewhere = ctx.loader_use(node).get("moved") if move is None else None
        if move is None and elsewhere is None:
            return
        from speedlint.analyzer.fixes import keywords_edit

        if move is not None:
            where = f"`{ctx.code(move)}` on line {ctx.position(move).start.line}"
        else:
            where = f"in the loop at {elsewhere}"
        message = f"batches of this loader are copied to the GPU ({where}) from pageable memory: `pin_memory` is not set"
        fix = None
        title = "Add `pin_memory=torch.cuda.is_available()`"
        if pin.missing:
            site = keyword_site(ctx, node)
            if site is not None:
                new = keywords_edit(ctx, site, [("pin_memory", cst.parse_expression(PIN_CODE))])
                fix = Fix.replace(site, new, title, SAFE, [ImportSpec("torch")])
        elif config_site(pin) is not None:  # false in a config file: the finding (and fix) go there
            site = config_site(pin)
            key = site.name
            edit = value_edit(site, True)
            message = message.replace("is not set", f"is false in the config file (`{key}`)")
            fix = Fix.config(edit, f"Set `{key}` to true in the config file", SAFE) if edit else None
            self.report(_code_site(pin, node), message, fix=fix or Fix.advice(f"Set `{key}` to true in the config file when training on CUDA"), at=site)
            return
        else:
            message = message.replace("is not set", "is false")
            value = pin.value
            origin = value.origin if value is not None else None
            if value is not None and not pin.conditional and value.kind in ("literal", "dict") and isinstance(origin, cst.Name) and origin.value == "False":
                fix = Fix.replace(origin, cst.parse_expression(PIN_CODE), "Set `pin_memory=torch.cuda.is_available()`", SAFE, [ImportSpec("torch")])
        self.report(keyword_anchor(pin, node), message, fix=fix or Fix.advice("Pin host memory: `pin_memory=True` when training on CUDA"))
        # an option's or config field's default decides it: that line too
        report_default(self, default_site(ctx, pin.value, pin.node.value if isinstance(pin.node, cst.Arg) else None), message, node, fix=Fix.advice("Make the default true when training on CUDA"))
