"""Shared types and helpers of the Hugging Face `Trainer` / accelerate knowledge (`hf.py`,
`accelerate.py`; their entry points for the program model and the rules are in
`hf_accelerate.py`):

* `summary_facts` and the project-fact keys live in `hf_facts` (no LibCST: the summaries use them);
* `Knob`: the precision a framework knob gives a training run (FP32, mixed, or unknown), where
  the knob is written and how to fix it; `FrameworkLoader`: the loaders a framework builds;
* `keyword_added` / `literal_arg`: editing a constructor's keywords.

Nothing here imports a framework: the facts are read from source text, config files and
launch scripts.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, Optional, Tuple

import libcst as cst

from speedlint.analyzer.frameworks.hf_facts import (  # noqa: F401 - re-exported for hf.py, accelerate.py and the rules
    ACCELERATE_KEY, FP32, HF_FILES_KEY, MIXED, REDUCED_KEY, TF32_KEY, UNKNOWN, summary_facts,
)


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
