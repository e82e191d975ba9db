"""Whole-program facts for SPD601: functions that only ever run under `no_grad` for inference.

`inference_only` (per file, function ordinals): a function decorated with `@torch.no_grad()`
whose every call comes from inference code: a `no_grad` function named for evaluation or
inference (`sample`, `evaluate`), a function run per evaluation batch, another such function, or a
training step's periodic call without grad (`if should_log(step): with torch.no_grad():
log_images(...)`); and that runs no backward. Sampling loops and logging helpers of generative
models are such functions: nothing they compute reaches autograd. Weight initialisation under
`no_grad` (called from setup code, not inference) is not.
"""

from __future__ import annotations

import re
from typing import Any, Callable, Dict, List, Optional, Tuple

from speedlint.analyzer.program.hotness import Hotness
from speedlint.analyzer.program.seeds import FileSeeds
from speedlint.analyzer.program.schema import GRAD_OFF as _GRAD_OFF
from speedlint.analyzer.program.schema import GUARDED as _GUARDED
from speedlint.analyzer.vocabulary import INFERENCE_VERB


def add_inference_seeds(
    hot: Hotness,
    seeds: Dict[str, FileSeeds],
    new_seeds: Callable[[], FileSeeds],
    eval_name: "re.Pattern[str]",
    extra: Optional[Dict[int, List[Tuple[int, int]]]] = None,
) -> None:
    """`eval_name`: the program model's evaluation names; `extra`: calls the program's resolution
    does not see (callee -> [(caller, call index)])."""
    p = hot.p
    extra = extra or {}

    def callers(fid: int) -> List[Tuple[int, int]]:
        return list(p.callers[fid]) + list(extra.get(fid, ()))

    def root(fid: int) -> bool:
        """Inference code by itself: a `no_grad` function named for evaluation or inference, or
        one run per evaluation batch (and not per training step)."""
        fn = p.functions[fid][1]
        kinds = hot.hot[fid]
        if "step" in kinds:
            return False
        name = fn["q"].rsplit(".", 1)[-1]
        return bool(fn["grad_off"] and (eval_name.search(name) or INFERENCE_VERB.search(name))) or "eval" in kinds

    def inference_site(caller: int, index: int, known: set) -> bool:
        flags = _flags(p, caller, index)
        if hot.reaches(caller, "backward"):
            return False
        if caller in known or root(caller):
            return True
        # a periodic call from the training step, without grad (image logging every N steps)
        return "step" in hot.hot[caller] and bool(flags & _GUARDED) and bool(flags & _GRAD_OFF)

    # The least set closed under "every call site is an inference site": a work-list, checking
    # every function once, then again the callees of each function found (the only ones whose
    # sites changed). Exact: the test only grows with `known`, so any order reaches the same set.
    extra_callees: Dict[int, List[int]] = {}
    for callee, sites in extra.items():
        for caller, _ in sites:
            extra_callees.setdefault(caller, []).append(callee)
    known: set = set()
    todo = list(range(len(p.functions) - 1, -1, -1))  # (popped from the end: in order)
    queued = set(todo)
    while todo:
        fid = todo.pop()
        queued.discard(fid)
        if fid in known or hot.reaches(fid, "backward") or "step" in hot.hot[fid]:
            continue
        sites = callers(fid)
        if sites and all(inference_site(c, i, known) for c, i in sites):
            known.add(fid)
            for callee in (*(edge[1] for edge in p.edges[fid]), *extra_callees.get(fid, ())):
                if callee not in known and callee not in queued:
                    queued.add(callee)
                    todo.append(callee)
    for fid in sorted(known):
        mid, fn = p.functions[fid]
        if not fn["grad_off"]:
            continue
        shown = p.modules[mid].shown
        got = seeds.get(shown)
        if got is None:
            got = seeds[shown] = new_seeds()
        got.project.setdefault("inference_only", []).append(p.local_index[fid])


def _flags(p: Any, caller: int, index: int) -> int:
    return int(p.functions[caller][1]["calls"][index][5])
