"""What the Hugging Face `Trainer` and accelerate decide for the user's training step: shared types
and the entry points the program model and the rules call (`hf.py`, `accelerate.py` hold the
knowledge of each framework).

* `summary_facts(text)`: per file, at summary time (cached with the summary): whether the file
  enables TF32 matmuls, and whether it uses accelerate;
* `add_seeds(...)`: at link time, over the whole run: TF32 enabled anywhere in the project, and
  the mixed precision that an accelerate config file or a launch script of the repository sets;
* `precision_knob(ctx)`: the precision a framework knob gives the training of this file (FP32,
  mixed, or unknown), where the knob is written and how to fix it;
* `tf32_enabled(ctx)`: TF32 matmuls are switched on (or set on purpose) somewhere.

Nothing here imports a framework: the facts are read from source text, config files and
launch scripts.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Dict, Iterable, Optional, Tuple

import libcst as cst

if TYPE_CHECKING:  # pragma: no cover
    from speedlint.analyzer.context import FileContext

#: Knob states.
FP32, MIXED, UNKNOWN = "fp32", "mixed", "unknown"

#: Text that switches TF32 matmuls on, or sets the matmul precision on purpose ("highest").
_TF32 = re.compile(r"set_float32_matmul_precision|allow_tf32|\btf32\s*[=:]")
#: Text that puts a run in reduced precision by other means than autocast: FSDP mixed-precision
#: policies, model weights loaded or cast to float16/bfloat16.
_REDUCED = re.compile(
    r"\bMixedPrecision\(|torch_dtype\s*=\s*(torch\.(b?float16|half)|[\"']auto[\"'])|\.(half|bfloat16)\(\)"
    r"|\.to\(\s*(dtype\s*=\s*)?torch\.(b?float16|half)\s*\)"
)
#: Project facts (`FileSeeds.project` keys).
TF32_KEY = "tf32_enabled"
REDUCED_KEY = "reduced_precision"
ACCELERATE_KEY = "accelerate_precision"


@dataclass(frozen=True)
class Knob:
    """The precision a framework knob gives a training run."""

    state: str  # FP32 | MIXED | UNKNOWN
    anchor: Optional[cst.CSTNode] = None  # the keyword, or the constructor when it is left out
    message: str = ""
    certain: bool = True  # False: the value depends on something outside the code (medium)
    #: (node, replacement, title) of the unsafe fix, when the code can be edited in one place
    fix: Optional[Tuple[cst.CSTNode, cst.CSTNode, str]] = None
    #: a config-file site holding the value (`providers.configs.ConfigSite`), if any
    config_site: Any = None
    related: Tuple[Tuple[Any, ...], ...] = field(default=())


def summary_facts(text: str) -> Dict[str, Any]:
    """Per-file facts for the summary (empty for most files)."""
    out: Dict[str, Any] = {}
    if ("tf32" in text or "matmul_precision" in text) and _TF32.search(text):
        out["tf32"] = True
    if "accelerate" in text and "Accelerator" in text:
        out["accelerate"] = True
    if ("MixedPrecision" in text or "16" in text or "half" in text) and _REDUCED.search(text):
        out["reduced"] = True
    return out


def add_seeds(summaries: Iterable[Tuple[str, str, Dict[str, Any]]], seeds: Dict[str, Any], new_seeds: Callable[[], Any], config_files: Iterable[str]) -> None:
    """Whole-run facts for the frameworks' rules: `(path, shown, summary)` per file."""
    from speedlint.analyzer.frameworks.accelerate import repo_precision

    files = list(summaries)
    if any((s.get("fw") or {}).get("tf32") for _, _, s in files):
        for _, shown, _ in files:
            seeds.setdefault(shown, new_seeds()).project[TF32_KEY] = True
    if any((s.get("fw") or {}).get("reduced") for _, _, s in files):
        for _, shown, _ in files:
            seeds.setdefault(shown, new_seeds()).project[REDUCED_KEY] = True
    configs = list(config_files)
    for path, shown, s in files:
        if (s.get("fw") or {}).get("accelerate"):
            found = repo_precision(path, configs)
            if found is not None:
                seeds.setdefault(shown, new_seeds()).project[ACCELERATE_KEY] = list(found)


def precision_knob(ctx: "FileContext") -> Optional[Knob]:
    """The precision the framework of this file gives its training (None: no framework knob)."""
    from speedlint.analyzer.frameworks import accelerate, hf

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


def keyword_added(call: cst.Call, name: str, value: cst.BaseExpression) -> cst.Call:
    """`call` with `name=value` as its last keyword (replacing the value when it is written)."""
    args = list(call.args)
    for i, arg in enumerate(args):
        if arg.keyword is not None and arg.keyword.value == name:
            args[i] = arg.with_changes(value=value)
            return call.with_changes(args=args)
    new = cst.Arg(
        keyword=cst.Name(name),
        value=value,
        equal=cst.AssignEqual(whitespace_before=cst.SimpleWhitespace(""), whitespace_after=cst.SimpleWhitespace("")),
    )
    if args and isinstance(args[-1].comma, cst.Comma):  # a trailing comma (one argument a line)
        last = args[-1].comma
        between = args[-2].comma if len(args) > 1 and isinstance(args[-2].comma, cst.Comma) else last
        args[-1] = args[-1].with_changes(comma=between)
        new = new.with_changes(comma=last)
    return call.with_changes(args=[*args, new])


#: Words whose presence lets the loader rules look at a framework's loader knobs.
LOADER_KNOB_WORDS = ("TrainingArguments", "Seq2SeqTrainingArguments")


@dataclass(frozen=True)
class FrameworkLoader:
    """The loaders a framework builds from its knobs (the HF `Trainer`'s from `TrainingArguments`),
    said the way the loader rules read a `DataLoader(...)`."""

    constructor: cst.Call  # where the knobs are written (`TrainingArguments(`)
    name: str  # how the code spells the constructor
    workers: Optional[int]  # None: unknown
    workers_node: Optional[cst.CSTNode]  # the keyword, when written
    pin: Optional[bool]  # None: unknown
    pin_node: Optional[cst.CSTNode]
    persistent: Optional[bool]
    persistent_node: Optional[cst.CSTNode]
    in_memory: bool  # samples already in memory (tokenized up front): workers matter little
    owner: str = "Trainer"  # what builds the loaders
    workers_key: str = "dataloader_num_workers"
    pin_key: str = "dataloader_pin_memory"
    persistent_key: str = "dataloader_persistent_workers"
    #: the constructor with workers (and persistent workers) set, for an unsafe fix
    workers_fixed: Optional[cst.Call] = None
    persistent_fixed: Optional[cst.Call] = None
    pin_fixed: Optional[cst.Call] = None


def literal_arg(node: Optional[cst.CSTNode]) -> bool:
    """A keyword written with a literal `True`/`False`/number (a fix may edit it in place)."""
    return isinstance(node, cst.Arg) and (isinstance(node.value, cst.Integer) or (isinstance(node.value, cst.Name) and node.value.value in ("True", "False")))


def framework_loaders(ctx: "FileContext") -> Tuple[FrameworkLoader, ...]:
    """The framework-built loaders configured in this file (empty for most files)."""
    from speedlint.analyzer.frameworks import hf

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
    from speedlint.analyzer.frameworks.accelerate import batch_of_prepared_loader

    return batch_of_prepared_loader(ctx, expr)
