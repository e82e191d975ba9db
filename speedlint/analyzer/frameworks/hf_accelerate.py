"""The entry points of the Hugging Face `Trainer` / accelerate knowledge that the program model
and the rules call: whole-run seeds, the precision of a training run, the loaders a framework
builds, batches a framework already placed (`hf.py`, `accelerate.py` hold the knowledge,
`_knobs_hf.py` the shared types)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Optional, Tuple

import libcst as cst

import speedlint.analyzer.frameworks.accelerate as accelerate
import speedlint.analyzer.frameworks.hf as hf
from speedlint.analyzer.frameworks._knobs_hf import (
    LOADER_KNOB_WORDS,
    REDUCED_KEY,
    TF32_KEY,
    FrameworkLoader,
    Knob,
    keyword_added,
    summary_facts,
)

if TYPE_CHECKING:  # pragma: no cover
    from speedlint.analyzer.context import FileContext


def precision_knob(ctx: "FileContext") -> Optional[Knob]:
    """The precision the framework of this file gives its training (None: no framework knob)."""
    for ask in (hf.precision, accelerate.precision):
        knob = ask(ctx)
        if knob is not None:
            return knob
    return None


def tf32_enabled(ctx: "FileContext") -> bool:
    """TF32 matmuls switched on, or the matmul precision set on purpose, in this file or anywhere
    in the project (`torch.set_float32_matmul_precision`, `torch.backends.cuda.matmul.allow_tf32`,
    HF `TrainingArguments(tf32=...)`)."""
    if summary_facts(ctx.source).get("tf32"):
        return True
    return bool(ctx.seeds is not None and ctx.seeds.project.get(TF32_KEY))


def reduced_precision(ctx: "FileContext") -> bool:
    """The run is in reduced precision without autocast: an FSDP `MixedPrecision` policy, or
    model weights loaded or cast to float16/bfloat16 (`torch_dtype=torch.bfloat16`, `"auto"`,
    `.half()`), in this file or anywhere in the project. Not FP32 training."""
    if summary_facts(ctx.source).get("reduced"):
        return True
    return bool(ctx.seeds is not None and ctx.seeds.project.get(REDUCED_KEY))


def framework_loaders(ctx: "FileContext") -> Tuple[FrameworkLoader, ...]:
    """The framework-built loaders configured in this file (empty for most files)."""
    if not any(w in ctx.source for w in LOADER_KNOB_WORDS):
        return ()
    out = []
    for k in hf.loader_knobs(ctx):
        out.append(FrameworkLoader(
            k.call, ctx.code(k.call.func).rsplit(".", 1)[-1], k.workers, k.workers_node, k.pin, k.pin_node, k.persistent, k.persistent_node, k.in_memory,
            workers_fixed=hf.workers_fix(ctx, k.call),
            persistent_fixed=keyword_added(k.call, "dataloader_persistent_workers", cst.Name("True")),
            pin_fixed=keyword_added(k.call, "dataloader_pin_memory", cst.Name("True")),
        ))
    return tuple(out)


def placed_by_framework(ctx: "FileContext", expr: cst.BaseExpression) -> bool:
    """`expr` is (part of) a batch that a framework already put on the device: a loop over a
    loader returned by accelerate's `prepare(...)`. A `.to(device)` of it moves nothing."""
    return accelerate.batch_of_prepared_loader(ctx, expr)
