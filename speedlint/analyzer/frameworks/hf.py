"""The Hugging Face `Trainer`: what `TrainingArguments` / `Seq2SeqTrainingArguments` decide.

The `Trainer` runs the training loop itself (its steps are not in the user's code), so the
knobs of its arguments are the findings' anchors:

* precision: `fp16=True` or `bf16=True` runs forward and backward under autocast; neither (both
  left out, or False) is FP32 training on the GPU the `Trainer` picks (not with `no_cuda=True` /
  `use_cpu=True`). A value that stays unknown (an option with no default, a dataclass parsed by
  `HfArgumentParser` from the command line) gives nothing;
* loaders: `dataloader_num_workers` (default 0), `dataloader_pin_memory` (default True),
  `dataloader_persistent_workers` (default False, from transformers 4.32 on). 0 workers is low
  impact when the dataset is tokenized in memory beforehand (`dataset.map(tokenize)`), high for
  per-sample decoding;
* `tf32=True` switches TF32 matmuls on (see `_knobs_hf.tf32_enabled`).

Values are traced like any value (`ctx.values`): literals, module constants, and function
defaults, which covers `fire.Fire(train)` scripts, where the parameters' defaults are the
command-line defaults.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import TYPE_CHECKING, List, Optional, Tuple

import libcst as cst

from speedlint.analyzer.configs.reader import Mapping, Scalar
from speedlint.analyzer.configs.sources import load
from speedlint.analyzer.frameworks._knobs_hf import FP32, HF_FILES_KEY, MIXED, UNKNOWN, Knob, keyword_added
from speedlint.analyzer.providers.configs import ConfigSite
from speedlint.analyzer.providers.inference import is_test_file

if TYPE_CHECKING:  # pragma: no cover
    from speedlint.analyzer.context import FileContext

TRAINING_ARGUMENTS = (
    "transformers.TrainingArguments",
    "transformers.Seq2SeqTrainingArguments",
    "transformers.training_args.TrainingArguments",
    "transformers.training_args_seq2seq.Seq2SeqTrainingArguments",
)
#: Workers a fix proposes for the `Trainer`'s loaders.
FIX_WORKERS = 4


def training_arguments(ctx: "FileContext") -> List[cst.Call]:
    """The `TrainingArguments(...)` constructions of the file, in source order."""
    if "TrainingArguments" not in ctx.source or is_test_file(ctx.path):
        return []  # (a test suite's tiny Trainer runs are not training runs)
    return [c for c in ctx.torch.calls if ctx.matches(c.func, *TRAINING_ARGUMENTS)]


def _flag(ctx: "FileContext", call: cst.Call, name: str) -> Optional[bool]:
    """True / False when keyword `name` is surely true / false (left out: False); None: unknown."""
    kw = ctx.values.kwarg(call, name)
    if kw.missing:
        return False
    if kw.unknown or kw.value is None:
        return None
    if kw.value.all(lambda v: v is True or v == 1):
        return True
    if kw.value.all(lambda v: v in (False, None, 0)):
        return False
    return None


def on_cpu(ctx: "FileContext", call: cst.Call) -> bool:
    return bool(_flag(ctx, call, "no_cuda") or _flag(ctx, call, "use_cpu"))


def precision(ctx: "FileContext") -> Optional[Knob]:
    """The precision of the `Trainer` runs this file configures (None: no `TrainingArguments`)."""
    from_files = _from_argument_files(ctx)
    if from_files is not None and from_files.state == FP32:
        return from_files  # a shipped argument file trains in FP32
    calls = [c for c in training_arguments(ctx) if not on_cpu(ctx, c)]
    if not calls:
        return from_files
    knobs = [_knob(ctx, call) for call in calls]
    for state in (MIXED, UNKNOWN):
        for knob in knobs:
            if knob.state == state:
                return knob
    return knobs[0]


def _knob(ctx: "FileContext", call: cst.Call) -> Knob:
    fp16, bf16 = _flag(ctx, call, "fp16"), _flag(ctx, call, "bf16")
    if fp16 or bf16:
        return Knob(MIXED, call)
    if fp16 is None or bf16 is None:
        return Knob(UNKNOWN, call)
    written = [a for a in call.args if a.keyword is not None and a.keyword.value in ("fp16", "bf16")]
    anchor: cst.CSTNode = written[0] if written else call
    name = ctx.code(call.func).rsplit(".", 1)[-1]
    fix: Optional[Tuple[cst.CSTNode, cst.CSTNode, str]]
    fix = (call, keyword_added(call, "bf16", cst.Name("True")), f"Set `{name}(bf16=True)`")
    if any(not isinstance(a.value, cst.Name) for a in written):
        fix = None  # the value comes from elsewhere (an option, a constant): edit it there
    return Knob(
        FP32, anchor,
        f"`{name}(...)` with neither `fp16` nor `bf16` on: the Trainer runs forward and backward in FP32",
        certain=True, fix=fix,
    )


@dataclass(frozen=True)
class LoaderKnob:
    """What the `Trainer`'s loaders get from one `TrainingArguments(...)`."""

    call: cst.Call
    workers: Optional[int]  # None: unknown
    workers_node: Optional[cst.CSTNode]  # the keyword, when written
    pin: Optional[bool]
    pin_node: Optional[cst.CSTNode]
    persistent: Optional[bool]
    persistent_node: Optional[cst.CSTNode]
    in_memory: bool  # the dataset was tokenized in memory (`.map(...)`) before training


def loader_knobs(ctx: "FileContext") -> List[LoaderKnob]:
    out: List[LoaderKnob] = []
    in_memory = _tokenized_in_memory(ctx)
    for call in training_arguments(ctx):
        workers = ctx.values.kwarg(call, "dataloader_num_workers")
        if workers.missing:
            n: Optional[int] = 0
        elif workers.value is not None and workers.value.single is not None and isinstance(workers.value.single, int):
            n = workers.value.single
        else:
            n = None
        pin = _flag(ctx, call, "dataloader_pin_memory")
        pin_kw = ctx.values.kwarg(call, "dataloader_pin_memory")
        if pin_kw.missing:
            pin = True  # the default
        persistent = _flag(ctx, call, "dataloader_persistent_workers")
        out.append(LoaderKnob(
            call, n, workers.node, pin, pin_kw.node, persistent,
            ctx.values.kwarg(call, "dataloader_persistent_workers").node, in_memory,
        ))
    return out


def workers_fix(ctx: "FileContext", call: cst.Call) -> cst.Call:  # noqa: ARG001 (ctx: the spelling may need it)
    """`TrainingArguments(..., dataloader_num_workers=4, dataloader_persistent_workers=True)`."""
    new = keyword_added(call, "dataloader_num_workers", cst.Integer(str(FIX_WORKERS)))
    return keyword_added(new, "dataloader_persistent_workers", cst.Name("True"))


def _tokenized_in_memory(ctx: "FileContext") -> bool:
    """A `datasets` dataset mapped with a function before training (`data.map(tokenize)`): the
    samples are token ids in memory, and the `Trainer`'s collator only pads them."""
    if ".map(" not in ctx.source or "datasets" not in ctx.source:
        return False
    return any(
        isinstance(c.func, cst.Attribute) and c.func.attr.value == "map" and c.args
        for c in ctx.torch.calls
    )


# -- `HfArgumentParser(...).parse_json_file(...)`: the arguments in a file of the repository ---------
_PARSE_FILE = ("parse_json_file", "parse_yaml_file")


def _from_argument_files(ctx: "FileContext") -> Optional[Knob]:
    """The precision of `TrainingArguments` parsed from the repository's argument files: FP32
    when one of them turns neither `fp16` nor `bf16` on (on its `fp16: false` line when written,
    else on the call that parses the file); None when the file parses none or they all use AMP."""
    files = ctx.seeds.project.get(HF_FILES_KEY) if ctx.seeds is not None else None
    if not files or "HfArgumentParser" not in ctx.source:
        return None
    parse = next((c for c in ctx.torch.calls if isinstance(c.func, cst.Attribute) and c.func.attr.value in _PARSE_FILE), None)
    if parse is None:
        return None
    for config, _ in files:
        doc, _ = load(config)
        top = doc.root if doc is not None else None
        if not isinstance(top, Mapping):
            continue
        flags = {k: top.get(k) for k in ("fp16", "bf16")}
        if any(isinstance(v, Scalar) and v.value is True for v in flags.values()):
            continue
        written = next((v for v in flags.values() if isinstance(v, Scalar) and v.located), None)
        name = os.path.basename(config)
        site = None
        if written is not None:
            key = next(k for k, v in flags.items() if v is written)
            site = ConfigSite(config, written.line, written.col, written.end_col, written.raw, written.style, written.shared, (key,), written.value, doc.kind, key)  # type: ignore[union-attr]
        return Knob(
            FP32, parse,
            f"the `TrainingArguments` read from `{name}` turn neither `fp16` nor `bf16` on: the Trainer runs forward and backward in FP32",
            certain=True, config_site=site,
        )
    return Knob(MIXED, parse)
