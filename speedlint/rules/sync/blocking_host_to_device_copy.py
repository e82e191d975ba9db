"""SPD202 blocking-host-to-device-copy."""

from __future__ import annotations

from typing import Optional

import libcst as cst

from speedlint.analyzer.frameworks.hf_accelerate import placed_by_framework

from speedlint.analyzer.fixes import with_keyword
from speedlint.analyzer.rule import LOW, MEDIUM, SAFE, Fix, Impact, Rule
from speedlint.analyzer.providers.flow import flow
from speedlint.analyzer.providers.loaders import kwarg
from speedlint.analyzer.vocabulary import PINNED_ON_GPU

_TRUE = cst.Name("True")


class BlockingHostToDeviceCopy(Rule):
    """
    ## What it does
    Flags `.to(device)` / `.cuda()` of a batch that comes from a `DataLoader` with
    `pin_memory=True` when the copy is not asked to be asynchronous (`non_blocking=True`).
    The batch is followed from the loop over the loader (`for x, y in loader`,
    `enumerate(loader)`, `tqdm(loader)`, `next(iter(loader))`, `self.train_loader`), through
    tuple unpacking, indexing, `batch.items()` and comprehensions, and into same-file helpers
    the batch is passed to. Which loader a loop runs is the identity SPD102 and SPD103 read
    too: a loader stored on `self` from a constructor argument, wrapped by a project generator
    or by a `tqdm` bound to a name, returned in a tuple on either branch of an `if`, passed to a
    nested function or in a list; a copy of batches that may come from several loaders is
    flagged when one of them pins memory. `pin_memory` is read like SPD102 reads it, also out
    of a `**kwargs` dict (in this module, or the one that builds a loader iterated here): a
    dict that pins only when CUDA is used (`if use_cuda: kwargs.update(pin_memory=True)`,
    `{...} if use_cuda else {}`), and `pin_memory=(device != "cpu")`, count as pinned, since
    that is where the copy costs. A dict that cannot be read (built by a function, passed in,
    `**vars(args)`) says nothing.

    ## Why is this slow?
    Pinning is only half of the job: a copy from pinned memory without `non_blocking=True` still
    makes the host wait until the copy has finished, so the CPU cannot queue the next kernels
    while the batch travels over PCIe. With `non_blocking=True` the copy overlaps with work
    already queued on the GPU and the host runs ahead.

    ## Example
    ```python
    loader = DataLoader(dataset, batch_size=64, num_workers=4, pin_memory=True)
    for images, labels in loader:
        images, labels = images.cuda(), labels.cuda()
        loss = F.cross_entropy(model(images), labels)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    ```

    ## Use instead
    ```python
    loader = DataLoader(dataset, batch_size=64, num_workers=4, pin_memory=True)
    for images, labels in loader:
        images, labels = images.cuda(non_blocking=True), labels.cuda(non_blocking=True)
        loss = F.cross_entropy(model(images), labels)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    ```

    ## Fix safety
    Safe: the copy is queued on the current stream, so every kernel that uses the batch runs after
    it; batches from a loader are fresh tensors that nothing overwrites while the copy runs. Loaders
    that do not pin memory are not flagged (the copy could not be asynchronous: see SPD102), nor are
    model or parameter moves, nor copies outside a loop.

    ## References
    - PyTorch docs, "A guide on good usage of non_blocking and pin_memory() in PyTorch"
    """

    code = "SPD202"
    name = "blocking-host-to-device-copy"
    impact = Impact(
        wastes="host-device transfer (the host waits for each batch copy)",
        when="GPU, with a pinned-memory DataLoader",
        typical="0-10% steps/s; more for large batches and small models",
        evidence="PyTorch non_blocking/pin_memory tutorial",
        level=MEDIUM,
    )
    fixes = (SAFE,)
    triggers = ("pin_memory",)
    seed_triggers = ("pinned_loops",)
    ast_precondition = staticmethod(
        lambda facts: facts.may_use_gpu and facts.calls_any("DataLoader") and facts.has_loop and facts.calls_any("to", "cuda")
    )

    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        if not isinstance(func, cst.Attribute) or func.attr.value not in ("to", "cuda"):
            return
        if not self.ctx.may_use_gpu:
            return
        info = flow(self.ctx)
        move = info.parse_move(node)
        if move is None or not move.moves_to_device or move.non_blocking is not None:
            return
        level = self._level(node)
        if level is None or placed_by_framework(self.ctx, func.value):
            return  # (a loader prepared by a framework already placed the batch: a no-op move)
        origin = info.batch_origins(func.value)
        if origin is not None:
            loaders, whole = origin
            pinned = [loader for loader in loaders if self._pinned(loader)]
            if not pinned or not all(self._accepts_non_blocking(loader, whole) for loader in loaders):
                return
            where: Optional[str] = f"line {self.ctx.position(pinned[0]).start.line}"
        else:
            where = self._pinned_elsewhere(func.value)  # a loader built in another module
            if where is None:
                return
        self.report(
            node,
            f"blocking `.{move.method}(...)` of a batch from a pinned-memory DataLoader ({where}): "
            "pass `non_blocking=True` so the copy overlaps with GPU work",
            fix=Fix.replace(node, with_keyword(node, "non_blocking", _TRUE), "Add `non_blocking=True`", SAFE),
            impact=self.impact if level == MEDIUM else self.impact.with_level(level),
        )

    def _pinned_elsewhere(self, expr: cst.BaseExpression) -> Optional[str]:
        """Where the pinned-memory loader is built, for a batch of a loop over a loader from
        another module (the whole program knows it: `pin_memory=True` there)."""
        seeds = self.ctx.seeds
        loops = seeds.project.get("pinned_loops") if seeds is not None else None
        if not loops:
            return None
        found = flow(self.ctx).batch_loop(expr)  # also `[b.to(device) for b in batch[1:]]`
        if found is None:
            return None
        b, whole = found
        entry = loops.get(str(self.ctx.position(b.site).start.line))
        if entry is None:
            return None
        where, collate = entry
        return None if whole and collate else where

    def _level(self, node: cst.CSTNode) -> Optional[int]:
        facts = self.ctx.torch
        if facts.in_training_step(node):
            return MEDIUM
        if facts.eval_loop_of(node) is not None or facts.in_loop(node) is not None:
            return LOW
        return None  # a one-off copy

    def _accepts_non_blocking(self, loader: cst.Call, whole: bool) -> bool:
        """Whether the object moved surely takes `non_blocking=`.

        Elements taken out of a batch (`x, y = batch`, `batch["x"]`) are tensors. A whole batch
        is not known to be one when the loader has a custom `collate_fn` (it may return any
        object), or when this file defines a class whose own `.to(...)` lacks `non_blocking`.
        """
        if not whole:
            return True
        if not self.ctx.values.kwarg(loader, "collate_fn").missing:
            return False
        for (cls, name), fns in self.ctx.torch.methods.items():
            if name == "to" and any(not _takes_non_blocking(fn) for fn in fns):
                return False
        return True

    def _pinned(self, loader: cst.Call) -> bool:
        """The loader pins memory, at least on some path: `pin_memory` set truthy, also in a
        `**kwargs` dict that sets it only when CUDA is used (`if use_cuda: kwargs.update(...)`,
        `{...} if use_cuda else {}`), which is where a blocking copy costs."""
        kw = kwarg(self.ctx, loader, "pin_memory")
        if kw.missing:
            return False
        value = kw.value
        if value is not None:
            if value.any(bool):
                return True
            # `--pin-memory` with action="store_true": off by default, on when asked for
            return value.kind == "argparse" and isinstance(value.origin, cst.Call)
        node = kw.node
        # the expression that sets it (not a `**kwargs` splat we cannot read: its name says nothing)
        expr = node.value if isinstance(node, cst.DictElement) or (isinstance(node, cst.Arg) and not node.star) else None
        if expr is None:
            return False
        return self._mentions_cuda(expr)

    def _mentions_cuda(self, expr: cst.BaseExpression) -> bool:
        """`torch.cuda.is_available()`, `device.type == "cuda"`, `device != "cpu"`, `use_cuda` bound
        to one of those (`vocabulary.PINNED_ON_GPU`: the program reads the same for loaders built
        in other modules)."""
        if PINNED_ON_GPU.search(self.ctx.code(expr)):
            return True
        if isinstance(expr, cst.Name):
            b = flow(self.ctx).binding(expr)
            if b is not None and b.kind == "assign" and b.value is not None:
                return bool(PINNED_ON_GPU.search(self.ctx.code(b.value)))
        return False


def _takes_non_blocking(fn: cst.FunctionDef) -> bool:
    params = fn.params
    if isinstance(params.star_kwarg, cst.Param):
        return True
    return any(p.name.value == "non_blocking" for p in [*params.params, *params.kwonly_params])
