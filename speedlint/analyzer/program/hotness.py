"""How hot each function of a linked `Program` is (`Hotness`).

Roots are training-step loops (a loop that reaches `backward()` and an optimizer step through
anything it calls), epoch loops around them (not a loop that runs a whole training run, i.e. a
function with its own epoch loop: that loop goes over runs, and the run's code outside its loops
is cold), evaluation loops and per-sample entry points (`__getitem__`, an `IterableDataset`'s
`__iter__`, `collate_fn`s). Hotness flows along the call graph from the roots through calls that
run every time (not behind `if step % N == 0`, not in an exception handler), keeping the shortest
chain of call sites that explains it. Whatever cold code alone reaches stays cold.
"""

from __future__ import annotations

import re
from collections import deque
from dataclasses import dataclass
from typing import Any, Dict, Iterable, List, Optional, Set, Tuple

from speedlint.analyzer.frameworks.hooks import class_hooks
from speedlint.analyzer.program.link import Program
from speedlint.analyzer.program.seeds import Hop
from speedlint.analyzer.program.schema import (
    CACHE_FILL, C_FLAGS, C_FUNC, C_KWS, C_LINE, C_LOOP, EPOCH, EVAL, EVAL_ONLY, GUARDED, HANDLER, ONE_ITERATION, PROPERTY, SAMPLE, STEP, TRAIN_ONLY,
)
from speedlint.analyzer.program.summary import _batch_size_range, label

# -- hotness --------------------------------------------------------------------------------------
#: Call-site flags that stop each kind of hotness from flowing through a call.
_SKIP = {STEP: GUARDED | HANDLER | EVAL_ONLY, SAMPLE: GUARDED | HANDLER | CACHE_FILL, EVAL: GUARDED | HANDLER | TRAIN_ONLY, EPOCH: HANDLER}
@dataclass
class _Unit:
    """A function (loop -1) or a loop of a function, or of a module's top level (fid None)."""

    mid: int
    fid: Optional[int]
    loop: int


class Hotness:
    """Roots and propagation over a linked `Program`."""

    def __init__(self, program: Program) -> None:
        self.p = program
        p = program
        self._deps: Optional[List[Set[int]]] = None
        self._kws_memo: Dict[int, Dict[int, Dict[str, Any]]] = {}
        self._loop_envs: Dict[int, Dict[str, Set[str]]] = {}  # (`ProgramFacts.loader_uses`)
        #: (module, fid or None) -> the calls its epoch loops run once per epoch (seeded by `_roots`)
        self.epoch_sites: Dict[Tuple[int, Optional[int]], Set[int]] = {}
        #: module -> {line of a loop: [where its loader is built, with a collate_fn?]} for loops
        #: over a pinned-memory loader built in another module (filled by `loader_uses`)
        self.pinned_loops: Dict[int, Dict[str, List[Any]]] = {}
        n = len(p.functions)
        self.mod_edges = [p.module_calls(m.id) for m in p.modules]
        self._reach = {
            what: self._reaching(fid for fid, (_, fn) in enumerate(p.functions) if fn[what]) for what in ("backward", "step")
        }
        self._step_holders = self._reaching(
            fid for fid, (mid, fn) in enumerate(p.functions)
            if fid in self._reach["backward"] and fid in self._reach["step"]
            and any(self._is_step_candidate(mid, fid, i) for i in range(len(fn["loops"])))
        )
        self.hot: List[Dict[str, Tuple[Hop, ...]]] = [dict() for _ in range(n)]
        self.step_loops: Set[Tuple[int, Optional[int], int]] = set()  # (mid, fid, loop index)
        #: fid -> the call sites that run it on every training step or evaluation batch:
        #: (caller's module, caller's fid or None, index of the call)
        self.hot_sites: Dict[int, Set[Tuple[int, Optional[int], int]]] = {}
        self._by_shown: Optional[Dict[str, int]] = None
        self.framework_modules: Set[int] = set()  # modules with hooks a framework's loop runs
        self._roots()

    # calls of a function or module body, with the callee fids
    def _body(self, mid: int, fid: Optional[int]) -> Dict[str, Any]:
        return self.p.functions[fid][1] if fid is not None else self.p.modules[mid].summary["module"]

    def _edges(self, mid: int, fid: Optional[int]) -> List[Tuple[int, int]]:
        return self.p.edges[fid] if fid is not None else self.mod_edges[mid]

    def _reaching(self, direct: Iterable[int]) -> Set[int]:
        """The functions that run one of `direct` (themselves included), along the call graph
        backwards: linear in the graph, cycles included."""
        found = set(direct)
        todo = list(found)
        callers = self.p.callers
        while todo:
            fid = todo.pop()
            for caller, _ in callers[fid]:
                if caller not in found:
                    found.add(caller)
                    todo.append(caller)
        return found

    def reaches(self, fid: int, what: str) -> bool:
        return fid in self._reach[what]

    def _has_step_loop(self, fid: int) -> bool:
        """`fid` (or something it calls) holds a training-step loop."""
        return fid in self._step_holders

    def _loop_calls(self, body: Dict[str, Any], loop: int) -> List[int]:
        """Indices of the calls inside loop `loop` (nested loops included)."""
        inside = self._loops_within(body, loop)
        return [i for i, c in enumerate(body["calls"]) if c[C_LOOP] in inside]

    @staticmethod
    def _loops_within(body: Dict[str, Any], loop: int) -> Set[int]:
        loops = body["loops"]
        inside = {loop}
        for j in range(loop + 1, len(loops)):
            if loops[j]["parent"] in inside:
                inside.add(j)
        return inside

    def _is_step_candidate(self, mid: int, fid: Optional[int], loop: int) -> bool:
        body = self._body(mid, fid)
        calls = set(self._loop_calls(body, loop))
        inside = self._loops_within(body, loop)
        direct = [d for j in inside for d in body["loops"][j].get("direct", ())]
        callees = [c for i, c in self._edges(mid, fid) if i in calls]
        backward = "b" in direct or any(self.reaches(c, "backward") for c in callees)
        step = "s" in direct or any(self.reaches(c, "step") for c in callees)
        return backward and step

    def _runs_backward_itself(self, mid: int, fid: Optional[int], loop: int) -> bool:
        """Loop `loop` runs a backward at its own level (not only in the loops inside it): a
        direct `backward()`, or a call of a function holding no training-step loop that reaches
        one. Such a loop is a training step too (a GAN's generator update around the critic's
        inner loop), not an epoch loop."""
        body = self._body(mid, fid)
        if "b" in body["loops"][loop].get("direct", ()):
            return True
        calls = body["calls"]
        return any(
            calls[ci][C_LOOP] == loop and self.reaches(c, "backward") and not self._has_step_loop(c)
            for ci, c in self._edges(mid, fid)
        )

    def _roots(self) -> None:
        p = self.p
        queue: deque = deque()
        units: List[Tuple[int, Optional[int]]] = [(m.id, None) for m in p.modules] + [(mid, fid) for fid, (mid, _) in enumerate(p.functions)]
        epoch_loops: List[Tuple[int, Optional[int], int]] = []
        for mid, fid in units:
            body = self._body(mid, fid)
            loops = body["loops"]
            if not loops:
                continue
            cands = [i for i in range(len(loops)) if self._is_step_candidate(mid, fid, i)]
            cand_set = set(cands)
            edges = self._edges(mid, fid)
            for i in cands:
                inner = self._loops_within(body, i) - {i}
                if inner & cand_set:
                    epoch_loops.append((mid, fid, i))  # a smaller loop inside is the step
                    continue
                calls = set(self._loop_calls(body, i))
                if any(self._has_step_loop(c) for ci, c in edges if ci in calls):
                    epoch_loops.append((mid, fid, i))  # the step loop is in a callee
                    continue
                self.step_loops.add((mid, fid, i))
                self._seed_loop(queue, mid, fid, i, STEP)
        # A function with an epoch loop of its own is a whole training run (its code outside its
        # loops runs once per run): a loop that calls it, or anything that runs it, is a loop over
        # runs (hyper-parameter evolution, a sweep, repeated experiments), not over epochs.
        self._run_holders = self._reaching(
            fid for mid, fid, i in epoch_loops if fid is not None and not self._runs_backward_itself(mid, fid, i)
        )
        trains = self.step_loops | set(epoch_loops)
        for mid, fid, i in epoch_loops:
            body = self._body(mid, fid)
            calls = set(self._loop_calls(body, i))
            if any(c in self._run_holders for ci, c in self._edges(mid, fid) if ci in calls):
                continue  # a loop over training runs: nothing in it runs once per epoch
            self._seed_loop(queue, mid, fid, i, EPOCH, exclude_steps=True)
        for mid, fid in units:
            body = self._body(mid, fid)
            loops = body["loops"]
            if not loops:
                continue
            for i in range(len(loops)):
                if (mid, fid, i) in trains:
                    continue
                if fid is not None and self._is_eval_loop(mid, fid, i):
                    parent = loops[i]["parent"]
                    if parent < 0 or not self._is_eval_loop(mid, fid, parent):
                        self._seed_loop(queue, mid, fid, i, EVAL)
        for cid, (mid, q, c) in enumerate(p.classes):
            for name in ("__getitem__", "__getitems__"):
                idx = c["methods"].get(name)
                if idx is not None:
                    self._seed(queue, p.modules[mid].fids[idx], SAMPLE, ())
            if "__iter__" in c["methods"] and any("IterableDataset" in b for b in p.all_base_names(cid)):
                self._seed(queue, p.modules[mid].fids[c["methods"]["__iter__"]], SAMPLE, ())
            if "__call__" in c["methods"] and re.search(r"collat", q, re.I):
                self._seed(queue, p.modules[mid].fids[c["methods"]["__call__"]], SAMPLE, ())
        self._hand_written_loaders(queue, units)
        # hooks a framework's own loop runs per step / per eval batch (frameworks.hooks)
        for cid, (mid, q, c) in enumerate(p.classes):
            for name, kind in class_hooks(p.all_base_names(cid), c["methods"]).items():
                if kind in (STEP, EVAL):
                    fid = p.modules[mid].fids[c["methods"][name]]
                    self.framework_modules.add(mid)
                    self._seed(queue, fid, kind, (Hop(p.modules[mid].shown, p.functions[fid][1]["line"], f"{q}.{name}"),))
        # functions passed as collate_fn=
        for mid, fid in units:
            body = self._body(mid, fid)
            env = None
            for call in body["calls"]:
                ref = call[C_KWS].get("collate_fn")
                if ref is None:
                    continue
                if env is None:
                    env = p._local_env(mid, fid, body) if fid is not None else p.modules[mid].globals_env
                for obj in sorted(p.eval(mid, fid, ref, env)):
                    for callee, _ in p.callees_of(obj) if obj[0] in "IC" else [(int(obj[2:]), 0)] if obj[0] in "FB" else []:
                        self._seed(queue, callee, SAMPLE, (Hop(p.modules[mid].shown, call[0], "collate_fn"),))
        self._propagate(queue)

    def _hand_written_loaders(self, queue: deque, units: List[Tuple[int, Optional[int]]]) -> None:
        """Per-sample entry points of a data loader written by hand: a loop that runs once per
        element of a batch (`for _ in range(self.batch_size):`) and fetches each sample through a
        method of a project `Dataset` subclass (`self.dataset.get_item(i)`) runs that method once
        per sample, every epoch, like `__getitem__` (the call site is the chain)."""
        p = self.p
        for mid, fid in units:
            body = self._body(mid, fid)
            edges = None
            for i, lp in enumerate(body["loops"]):
                if not _batch_size_range(lp.get("iter")):
                    continue
                if edges is None:
                    edges = self._edges(mid, fid)
                inside = set(self._loop_calls(body, i))
                for ci, callee in edges:
                    call = body["calls"][ci]
                    cid = p.fn_class[callee]
                    if ci not in inside or cid is None or call[C_FLAGS] & _SKIP[SAMPLE]:
                        continue
                    name = p.functions[callee][1]["q"].rsplit(".", 1)[-1]
                    if name.startswith("__") or not any(b.rsplit(".", 1)[-1].endswith("Dataset") for b in p.all_base_names(cid)):
                        continue  # `__init__`, `__len__`; or not a dataset
                    self._seed(queue, callee, SAMPLE, (Hop(p.modules[mid].shown, call[C_LINE], label(call[C_FUNC])),))

    def _is_eval_loop(self, mid: int, fid: int, loop: int) -> bool:
        fn = self.p.functions[fid][1]
        lp = fn["loops"][loop]
        if self.reaches(fid, "backward"):
            body_calls = set(self._loop_calls(fn, loop))
            inside = self._loops_within(fn, loop)
            if any("b" in fn["loops"][j].get("direct", ()) for j in inside):
                return False
            if any(self.reaches(c, "backward") for i, c in self.p.edges[fid] if i in body_calls):
                return False
        if lp["grad_off"] or fn["grad_off"]:
            return True
        # a model put in eval mode before the loop; a name alone (`test_*` in a test suite) is
        # no evidence of a model here: the file's own analysis still looks at such loops
        return 0 < fn["eval_call"] <= lp["line"]

    def _seed_loop(self, queue: deque, mid: int, fid: Optional[int], loop: int, kind: str, exclude_steps: bool = False) -> None:
        body = self._body(mid, fid)
        calls = set(self._loop_calls(body, loop))
        if exclude_steps:
            steps = set()
            for (m2, f2, l2) in self.step_loops:
                if m2 == mid and f2 == fid:
                    steps |= set(self._loop_calls(body, l2))
            calls -= steps
        shown = self.p.modules[mid].shown
        skip = _SKIP[kind]
        if kind == EVAL and body["loops"][loop].get("guarded", 0) & GUARDED:
            skip &= ~GUARDED  # an evaluation run every N steps: the guard is around it, not in it
        for i, callee in self._edges(mid, fid):
            if i not in calls:
                continue
            call = body["calls"][i]
            if call[C_FLAGS] & skip:  # guarded, in an exception handler, or another mode's branch
                continue
            if call[C_FLAGS] & ONE_ITERATION and call[C_LOOP] == loop and kind in (STEP, EVAL):
                continue  # `if i == len(loader) - 1:` in the step loop: once per epoch
            if kind in (STEP, EVAL):
                self.hot_sites.setdefault(callee, set()).add((mid, fid, i))
            elif kind == EPOCH:
                self.epoch_sites.setdefault((mid, fid), set()).add(i)
            self._seed(queue, callee, kind, (Hop(shown, call[0], label(call[C_FUNC], call[C_FLAGS] & PROPERTY)),))

    def _seed(self, queue: deque, fid: int, kind: str, chain: Tuple[Hop, ...]) -> None:
        known = self.hot[fid].get(kind)
        if known is not None and len(known) <= len(chain):
            return
        self.hot[fid][kind] = chain
        queue.append((fid, kind))

    def _propagate(self, queue: deque) -> None:
        p = self.p
        while queue:
            fid, kind = queue.popleft()
            chain = self.hot[fid][kind]
            if len(chain) > 12:
                continue
            mid, fn = p.functions[fid]
            shown = p.modules[mid].shown
            for i, callee in p.edges[fid]:
                call = fn["calls"][i]
                if call[C_FLAGS] & _SKIP[kind]:
                    continue
                if kind == EPOCH and call[C_LOOP] >= 0:
                    continue  # a loop in a per-epoch function: its own roots decide
                if kind in (STEP, EVAL):
                    self.hot_sites.setdefault(callee, set()).add((mid, fid, i))
                self._seed(queue, callee, kind, chain + (Hop(shown, call[0], label(call[C_FUNC], call[C_FLAGS] & PROPERTY)),))


    def _all_calls(self) -> Iterable[Tuple[Optional[int], int, Any, int, int]]:
        """(caller fid or None, callee fid, the call, parameters skipped, caller module)."""
        p = self.p
        for m in p.modules:
            body = m.summary["module"]
            for i, callee in self.mod_edges[m.id]:
                call = body["calls"][i]
                yield None, callee, call, self._skip_of(callee), m.id
        for fid, edges in enumerate(p.edges):
            mid, fn = p.functions[fid]
            for i, callee in edges:
                call = fn["calls"][i]
                yield fid, callee, call, self._skip_of(callee), mid

    def _skip_of(self, callee: int) -> int:
        """How many leading parameters a call skips: `self` when it runs a method (through an
        instance, `self.meth()`, or a constructor); `Cls.meth(obj, ...)` is rare enough to ignore."""
        fn = self.p.functions[callee][1]
        return 1 if self.p.fn_class[callee] is not None and not fn.get("static") else 0

    def _env(self, mid: int, fid: Optional[int]) -> Dict[str, Set[str]]:
        """The types of a function's (or a module's) names; not kept: the program is large."""
        return self.p._local_env(mid, fid, self._body(mid, fid)) if fid is not None else self.p.modules[mid].globals_env

