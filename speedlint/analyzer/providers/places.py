"""Where a node's code runs, in the words the reports read: on every training step, in an
evaluation or inference loop, on every evaluation batch, for every sample, once per epoch, or in
inference code (under `no_grad` or `inference_mode`, outside training).

Every finding's message says where its code runs: a rule that words it itself (`... on every
training step`, `this training step runs ...`) keeps its words; otherwise the engine adds the place
the analysis knows (`place_of`) after the message, the way it adds a cross-module call chain. The
reports rank by it (`report.ranking.runs_where` reads `PLACE_PHRASES`).

Not a rule module (no `Rule` subclass).
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Optional, Tuple

if TYPE_CHECKING:  # a warm run's report reads the phrases and imports no LibCST
    import libcst as cst

    from speedlint.analyzer.context import FileContext

STEP, EVAL, EPOCH = "step", "eval", "epoch"

#: Phrases of `Impact.when` and messages that say where code runs, checked in this order (eval
#: before step: "an evaluation step"; epoch last: "per step ... (the loader is iterated every
#: epoch)" is a per-step cost only when the step phrases say so). "every step of this loop" is an
#: iteration of some loop, not a training step.
PLACE_PHRASES: Tuple[Tuple[str, "re.Pattern[str]"], ...] = (
    (EVAL, re.compile(r"evaluation batch|evaluation loop|evaluation only|eval(uation)?/inference|\beval loops?\b|eval throughput|inference (code|loop)", re.I)),
    (STEP, re.compile(r"training step|every step(?! of this loop)|per step|optimizer step|every sample|per sample|element of a batch|compute-bound training", re.I)),
    (EPOCH, re.compile(r"once per epoch|every epoch|per epoch", re.I)),
)


def says_where(text: str) -> bool:
    """The text already says where the code runs."""
    return any(pattern.search(text) for _, pattern in PLACE_PHRASES)


def stated_when(when: str) -> str:
    """The parts of an impact's `when` that state where the code runs, without its conditions
    and asides: "GPU; per step when it runs in a step or a forward" (SPD203's record for every
    finding) and "always; worst per sample in DataLoader workers" say where the cost would be
    largest, not where this finding's code runs."""
    parts = [p for p in when.split(";") if not re.match(r"\s*(worst|most|more)\b", p) and not re.search(r"\bwhen\b|\bif\b", p)]
    return ";".join(parts)


def place_of(ctx: "FileContext", node: "cst.CSTNode") -> Optional[str]:
    """Where the analysis of this file says `node` runs, as a phrase for a message; None when it
    does not know (module-level setup, a loader setting, code no loop reaches)."""
    facts = ctx.torch_if_built
    if facts is None:
        return None
    if facts.step_of(node) is not None:
        return "on every training step"
    if facts.eval_loop_of(node) is not None:
        return "in an evaluation or inference loop"  # (a loop without backward: over batches, or tokens)
    if facts.eval_function_of(node) is not None:
        return "on every evaluation batch"
    if facts.sample_function_of(node) is not None:
        return "for every sample"
    if facts.epoch_of(node) is not None:
        return "once per epoch"
    fn = facts.enclosing_function(node)
    if facts.grad_disabled_at(node) is not None and fn is not None and not facts.reaches_backward(fn):
        return "in inference code, with gradients off"
    return None
