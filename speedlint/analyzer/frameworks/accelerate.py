"""accelerate: the precision `Accelerator(...)` gives the user's own training loop.

`Accelerator(mixed_precision=...)` decides whether the loop that calls `accelerator.backward(loss)`
runs under autocast:

* `"fp16"`, `"bf16"`, `"fp8"`: mixed precision;
* `"no"`: FP32 (on the keyword; medium when the value is a command-line default the user may
  change);
* left out (or `None`): accelerate reads the environment that `accelerate launch` sets from
  `accelerate config` or `--mixed_precision`. An accelerate config file shipped in the repository
  (a YAML/JSON file with `mixed_precision:` next to `distributed_type:` or
  `compute_environment:`), or `--mixed_precision` in a launch script or README command of the
  repository, gives the value; with neither, the documented run is FP32 (on the constructor,
  medium: it depends on the user's own `accelerate config`);
* any other expression (`args.mixed_precision` with no default, a config value): unknown.

A `.to(device)` of a batch from a loader passed to `accelerator.prepare(...)` moves nothing (the
prepared loader already placed it): `prepared_loaders` names them.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, List, Optional, Set

import libcst as cst

from speedlint.analyzer.frameworks._knobs_hf import ACCELERATE_KEY, FP32, MIXED, UNKNOWN, Knob, keyword_added
from speedlint.analyzer.providers.flow import flow

if TYPE_CHECKING:  # pragma: no cover
    from speedlint.analyzer.context import FileContext

ACCELERATOR = ("accelerate.Accelerator", "accelerate.accelerator.Accelerator")
MIXED_VALUES = frozenset({"fp16", "bf16", "fp8"})


def accelerators(ctx: "FileContext") -> List[cst.Call]:
    """The `Accelerator(...)` constructions of the file, in source order."""
    if "Accelerator" not in ctx.source:
        return []
    return [c for c in ctx.torch.calls if ctx.matches(c.func, *ACCELERATOR)]


def precision(ctx: "FileContext") -> Optional[Knob]:
    """The precision of the file's accelerate training (None: no `Accelerator` here)."""
    calls = accelerators(ctx)
    if not calls or not ctx.torch.step_loops:
        return None  # (inference with accelerate: no training step to speak of)
    knobs = [_knob(ctx, call) for call in calls]
    for state in (MIXED, UNKNOWN):  # several accelerators: any mixed or unknown one wins
        for knob in knobs:
            if knob.state == state:
                return knob
    return knobs[0]


def _knob(ctx: "FileContext", call: cst.Call) -> Knob:
    kw = ctx.values.kwarg(call, "mixed_precision")
    bf16 = cst.SimpleString('"bf16"')
    fix = (call, keyword_added(call, "mixed_precision", bf16), 'Set `Accelerator(mixed_precision="bf16")`')
    if kw.missing or (kw.value is not None and kw.value.all(lambda v: v is None) and kw.value.kind == "literal"):
        repo = ctx.seeds.project.get(ACCELERATE_KEY) if ctx.seeds is not None else None
        if repo:
            source, value, path, line = repo
            state = MIXED if value in MIXED_VALUES else FP32 if value == "no" else UNKNOWN
            where = f"{os.path.basename(path)}:{line}"
            return Knob(
                state, call,
                f"`Accelerator(...)` takes `mixed_precision` from the {source} ({where}), which says `{value}`: the training step runs in FP32",
                certain=False, fix=fix,
            )
        return Knob(
            FP32, call,
            "`Accelerator(...)` without `mixed_precision`, and no accelerate config or `--mixed_precision` launch flag "
            "in the repository: the training step runs in FP32 unless the user's own `accelerate config` says otherwise",
            certain=False, fix=fix,
        )
    if kw.unknown or kw.value is None:
        return Knob(UNKNOWN, kw.node)
    value = kw.value
    if value.all(lambda v: isinstance(v, str) and v in MIXED_VALUES):
        return Knob(MIXED, kw.node)
    if value.all(lambda v: v == "no"):
        node = kw.node
        written = isinstance(node, cst.Arg) and isinstance(node.value, cst.SimpleString)
        return Knob(
            FP32, node,
            "`Accelerator(mixed_precision=\"no\")`: the training step runs in FP32" if written
            else "`Accelerator(mixed_precision=...)` is `\"no\"` by default: unless the run passes another value, the training step runs in FP32",
            certain=written and value.certain, fix=fix if written else None,
        )
    return Knob(UNKNOWN, kw.node)


def prepared_loaders(ctx: "FileContext") -> Set[str]:
    """Names bound to the results of `accelerator.prepare(...)` (loaders among them place their
    batches on the device themselves)."""
    if "prepare" not in ctx.source or not accelerators(ctx):
        return set()
    out: Set[str] = set()
    for node in ctx.torch.calls:
        func = node.func
        if not (isinstance(func, cst.Attribute) and func.attr.value == "prepare"):
            continue
        parent = ctx.torch.parent(node)
        if isinstance(parent, cst.Assign):
            for t in parent.targets:
                target = t.target
                names = [e.value for e in target.elements] if isinstance(target, (cst.Tuple, cst.List)) else [target]
                out |= {n.value for n in names if isinstance(n, cst.Name)}
    return out


def batch_of_prepared_loader(ctx: "FileContext", expr: cst.BaseExpression) -> bool:
    """`expr` (`x`, `batch["x"]`, `batch.x`) comes from a loop over a loader returned by
    `accelerator.prepare(...)`: accelerate already moved it to the device."""
    prepared = prepared_loaders(ctx)
    if not prepared:
        return False
    found = flow(ctx).batch_loop(expr)  # `x, y = batch`, `[b.to(device) for b in batch]` after `for batch in loader:`
    if found is None:
        return False
    it = found[0].value
    while isinstance(it, cst.Call) and isinstance(it.func, cst.Name) and it.func.value in ("enumerate", "tqdm", "iter") and it.args:
        it = it.args[0].value
    return isinstance(it, cst.Name) and it.value in prepared
