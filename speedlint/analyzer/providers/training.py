"""Where the training step is: torch-aware structure of one module, computed once per file.

One pass over the module's reading (`walk.TreeIndex`, which also answers parents and source
order) records functions, classes, loops and the calls each loop body and function body makes.
From that:

* a **training-step loop** is a loop whose body, directly or through functions and methods of the
  same module that it calls (transitively), runs a `backward()` and an optimizer step
  (`opt.step()`, `scaler.step(opt)`), and that contains no smaller such loop;
* an **epoch loop** contains a training-step loop (lexically or through calls);
* a function with an epoch loop of its own (that runs no backward at its own level) is a whole
  **training run**; a loop that runs one is a **loop over runs** (`run_loops`: hyper-parameter
  evolution, sweeps), not an epoch loop;
* **step functions** run once per step (called from a step loop's body), **epoch functions** once
  per epoch;
* an **eval loop** is a loop with no backward inside `no_grad`/`inference_mode`, after
  `model.eval()`, or in a function whose name says eval/valid/test/predict/infer;
* **per-sample functions** are `Dataset.__getitem__`, functions passed as `collate_fn`, and the
  same-file functions they call.
"""

from __future__ import annotations

import re
from bisect import bisect_left
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Dict, Iterable, Iterator, List, Mapping, Optional, Set, Tuple, Union, cast

import libcst as cst

from speedlint.analyzer.providers.names import ImportMap, dotted
from speedlint.analyzer.providers.walk import TreeIndex, index_of, preorder
from speedlint.analyzer.textscan import says_grad_off
from speedlint.analyzer.vocabulary import EVAL_NAME, INFERENCE_VERB, SCHEDULER_HINT  # noqa: F401 - INFERENCE_VERB re-exported

if TYPE_CHECKING:  # pragma: no cover
    from speedlint.analyzer.program.seeds import FileSeeds

Loop = Union[cst.For, cst.While]
Unit = Union[cst.For, cst.While, cst.FunctionDef]

GRAD_OFF = ("torch.no_grad", "torch.inference_mode")


@dataclass(eq=False)
class UnitInfo:
    node: Unit
    function: Optional[cst.FunctionDef]  # the function a loop is in (None at module level)
    calls: List[cst.Call] = field(default_factory=list)
    callees: Set[cst.FunctionDef] = field(default_factory=set)
    backward: bool = False
    step: bool = False
    inner_loops: List[Loop] = field(default_factory=list)  # lexically nested, same function


class _Walker:
    """Records functions, classes, loops and the calls of each unit, in one pass over the tree's
    reading (`walk.TreeIndex`: a loop over a list, no field reads).

    Units are what runs as a whole: a function (its whole subtree), a `for` loop's body (its
    target and iterable run once, its `else` once), a `while` loop's test and body. A call belongs
    to every unit around it up to and including its innermost function.
    """

    def __init__(self, facts: "TorchFacts", tree: TreeIndex) -> None:
        self.f = facts
        self.tree = tree
        self.units: List[Tuple[int, int, UnitInfo]] = []  # (first, end) node indices of the part that runs
        self.classes: List[Tuple[int, cst.ClassDef]] = []  # (end, class)

    def run(self) -> None:
        tree = self.tree
        nodes, ends = tree.nodes, tree.ends
        units, classes = self.units, self.classes
        Call, Assign, For, While = cst.Call, cst.Assign, cst.For, cst.While
        FunctionDef, ClassDef = cst.FunctionDef, cst.ClassDef
        for i, node in enumerate(nodes):
            while units and units[-1][1] <= i:
                units.pop()
            while classes and classes[-1][0] <= i:
                classes.pop()
            kind = node.__class__
            if kind is Call:
                self.visit_Call(node, i)  # type: ignore[arg-type]
            elif kind is Assign:
                if node.value.__class__ is Call:  # type: ignore[attr-defined]
                    self.f._note_scheduler(node)  # type: ignore[arg-type]
            elif kind is For:
                for_loop = cast(cst.For, node)
                body = cast(int, tree.index(for_loop.body))  # (a node's children are in its tree)
                self._push(for_loop, body, ends[body])
            elif kind is While:
                while_loop = cast(cst.While, node)
                test, body = cast(int, tree.index(while_loop.test)), cast(int, tree.index(while_loop.body))
                self._push(while_loop, test, ends[body])
            elif kind is FunctionDef:
                self.visit_FunctionDef(node, i)  # type: ignore[arg-type]
            elif kind is ClassDef:
                class_def = cast(cst.ClassDef, node)
                classes.append((ends[i], class_def))
                self.f.class_defs.setdefault(class_def.name.value, []).append(class_def)

    def _innermost_function(self) -> Optional[cst.FunctionDef]:
        for _, _, u in reversed(self.units):
            if isinstance(u.node, cst.FunctionDef):
                return u.node
        return None

    def _push(self, node: Unit, first: int, end: int) -> None:
        """`node`'s unit runs nodes[first:end]."""
        info = UnitInfo(node, self._innermost_function())
        if not isinstance(node, cst.FunctionDef):  # a loop: nested in the loops around it
            for _, _, u in reversed(self.units):
                if isinstance(u.node, cst.FunctionDef):
                    break
                u.inner_loops.append(node)
            self.f.loops.append(node)
            if info.function is not None:
                self.f.units[info.function].inner_loops.append(node)
        self.f.units[node] = info
        self.units.append((first, end, info))

    def visit_FunctionDef(self, node: cst.FunctionDef, i: int) -> None:
        tree = self.tree
        owner = None
        parent = tree.parents[i]
        if parent >= 0 and isinstance(tree.nodes[parent], cst.IndentedBlock) and self.classes:
            grandparent = tree.parents[parent]
            if grandparent >= 0 and tree.nodes[grandparent] is self.classes[-1][1]:
                owner = self.classes[-1][1]
        self.f.function_class[node] = owner
        if owner is None:
            self.f.functions.setdefault(node.name.value, []).append(node)
        else:
            self.f.methods.setdefault((owner.name.value, node.name.value), []).append(node)
        self.f.all_functions.append(node)
        self._push(node, i, tree.ends[i])

    def visit_Call(self, node: cst.Call, i: int) -> None:
        self.f.calls.append(node)
        for first, _, u in reversed(self.units):
            if first > i:
                continue  # a `for` loop's body, and this call is in its target or iterable
            u.calls.append(node)
            if isinstance(u.node, cst.FunctionDef):
                break
        for kw in node.args:
            if kw.keyword is not None and kw.keyword.value == "collate_fn":
                self.f._collate_refs.append(kw.value)


class _Order(Mapping):
    """node -> its position in visiting order (`TorchFacts.order`), read off the tree's index."""

    def __init__(self, tree: TreeIndex) -> None:
        self.tree = tree

    def __getitem__(self, node: cst.CSTNode) -> int:
        i = self.tree.index(node)
        if i is None:
            raise KeyError(node)
        return i

    def get(self, node: cst.CSTNode, default: Optional[int] = None) -> Optional[int]:  # type: ignore[override]
        i = self.tree.index(node)
        return default if i is None else i

    def __contains__(self, node: object) -> bool:
        return self.tree.index(node) is not None  # type: ignore[arg-type]

    def __iter__(self) -> Iterator[cst.CSTNode]:
        return iter(self.tree.nodes)

    def __len__(self) -> int:
        return len(self.tree.nodes)


def _leaves_on_first_iteration(loop: Loop) -> bool:
    """A loop whose body always leaves on its first iteration: it ends with a `return`, `break`
    or `raise`, and has no `continue` of its own (Swin's `throughput()` times one batch and
    returns; `for x, y in loader: ...; break` takes a sample)."""
    body = loop.body
    if not isinstance(body, cst.IndentedBlock) or not body.body:
        return False
    last = body.body[-1]
    if not (isinstance(last, cst.SimpleStatementLine) and any(isinstance(s, (cst.Return, cst.Break, cst.Raise)) for s in last.body)):
        return False
    return not any(isinstance(n, cst.Continue) for n in preorder(body, skip=(cst.For, cst.While, cst.FunctionDef, cst.ClassDef)))


#: A loop that leaves after at most this many iterations (`if i >= 5: break`) runs a few
#: examples (a demo, a sample grid), not a pass over an evaluation set.
FEW_ITERATIONS = 16


def _leaves_after_few_iterations(loop: Loop) -> bool:
    """`for i in ...: ...; if i >= 5: break` at the body's own level: the loop counter compared
    with a small constant, then a `break` (or `return`)."""
    if not isinstance(loop, cst.For) or not isinstance(loop.body, cst.IndentedBlock):
        return False
    target = loop.target
    counter = target.value if isinstance(target, cst.Name) else None
    if counter is None:
        return False
    for stmt in loop.body.body:
        if not (isinstance(stmt, cst.If) and isinstance(stmt.body, cst.IndentedBlock) and stmt.orelse is None):
            continue
        last = stmt.body.body[-1] if stmt.body.body else None
        if not (isinstance(last, cst.SimpleStatementLine) and any(isinstance(s, (cst.Break, cst.Return)) for s in last.body)):
            continue
        test = stmt.test
        if not (isinstance(test, cst.Comparison) and len(test.comparisons) == 1):
            continue
        op, right = test.comparisons[0].operator, test.comparisons[0].comparator
        if (
            isinstance(test.left, cst.Name) and test.left.value == counter
            and isinstance(op, (cst.GreaterThanEqual, cst.GreaterThan, cst.Equal))
            and isinstance(right, cst.Integer) and int(right.value) <= FEW_ITERATIONS
        ):
            return True
    return False


class TorchFacts:
    """Training-step, epoch, eval and per-sample structure of one module."""

    def __init__(self, module: cst.Module, imports: ImportMap, seeds: "Optional[FileSeeds]" = None) -> None:
        self.module = module
        self.imports = imports
        self.seeds = seeds
        self.tree = index_of(module)
        self.units: Dict[Unit, UnitInfo] = {}
        self.loops: List[Loop] = []
        self.calls: List[cst.Call] = []
        self._call_starts: Optional[List[int]] = None  # the tree index of each call (`calls_inside`)
        self.functions: Dict[str, List[cst.FunctionDef]] = {}
        self.methods: Dict[Tuple[str, str], List[cst.FunctionDef]] = {}
        self.all_functions: List[cst.FunctionDef] = []
        self.function_class: Dict[cst.FunctionDef, Optional[cst.ClassDef]] = {}
        self.class_defs: Dict[str, List[cst.ClassDef]] = {}
        self._collate_refs: List[cst.BaseExpression] = []
        #: node -> its position in visiting order (source order)
        self.order: Mapping[cst.CSTNode, int] = _Order(self.tree)
        self._scheduler_names: Set[str] = set()
        self._training_exits: Dict[int, int] = {}  # block (its index) -> `_first_training_exit`
        _Walker(self, self.tree).run()
        for info in self.units.values():
            for call in info.calls:
                info.callees.update(self.resolve_call(call, info))
                if self._is_backward(call):
                    info.backward = True
                elif self._is_optimizer_step(call):
                    info.step = True
        self._memo: Dict[Tuple[str, cst.CSTNode], bool] = {}
        self.step_loops: Set[Loop] = set()
        self.epoch_loops: Set[Loop] = set()
        #: loops over whole training runs: each iteration runs a function with its own epoch loop
        self.run_loops: Set[Loop] = set()
        self._classify()

    # -- call classification ---------------------------------------------------------------
    def _note_scheduler(self, node: cst.Assign) -> None:
        call = node.value
        assert isinstance(call, cst.Call)
        q = self.imports.qualname(call.func)
        func_name = dotted(call.func) or ""
        if (q and q.startswith("torch.optim.lr_scheduler")) or re.search(
            r"(Scheduler|LR|Annealing\w*|get_\w*schedule\w*)$", func_name
        ):
            for t in node.targets:
                name = dotted(t.target)
                if name:
                    self._scheduler_names.add(name)

    def _is_backward(self, call: cst.Call) -> bool:
        func = call.func
        if isinstance(func, cst.Attribute) and func.attr.value in ("backward", "manual_backward"):
            return True
        return self.imports.matches(func, "torch.autograd.backward")

    def _is_optimizer_step(self, call: cst.Call) -> bool:
        func = call.func
        if not isinstance(func, cst.Attribute) or func.attr.value not in ("step", "optimizer_step"):
            return False
        receiver = dotted(func.value) or ""
        if receiver in self._scheduler_names:
            return False
        tail = receiver.rsplit(".", 1)[-1]
        return not SCHEDULER_HINT.search(tail)

    def is_backward(self, call: cst.Call) -> bool:
        return self._is_backward(call)

    def is_optimizer_step(self, call: cst.Call) -> bool:
        return self._is_optimizer_step(call)

    def resolve_call(self, call: cst.Call, where: Optional[UnitInfo] = None) -> List[cst.FunctionDef]:
        """Same-module functions/methods a call may run (`f(...)`, `self.f(...)`, `Cls.f(...)`)."""
        cls: Optional[cst.ClassDef]
        func = call.func
        if isinstance(func, cst.Name):
            found = self._visible(list(self.functions.get(func.value, ())), call)
            if func.value in self.class_defs:  # constructing a class runs its __init__
                for cls in self.class_defs[func.value]:
                    found += self.methods.get((cls.name.value, "__init__"), [])
            return found
        if isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name):
            owner_name = func.value.value
            if owner_name in ("self", "cls"):
                fn = self.enclosing_function(call)
                cls = self.function_class.get(fn) if fn is not None else None
                while cls is None and fn is not None:  # nested helper inside a method
                    fn = self.enclosing_function(fn)
                    cls = self.function_class.get(fn) if fn is not None else None
                if cls is not None:
                    return self._methods_in_hierarchy(cls, func.attr.value)
            elif owner_name in self.class_defs:
                return list(self.methods.get((owner_name, func.attr.value), ()))
        return []

    def _visible(self, found: List[cst.FunctionDef], call: cst.Call) -> List[cst.FunctionDef]:
        """Of the functions a name may call, the ones Python's scoping gives the call: a function
        nested in the innermost enclosing function that defines that name, else the module's
        (two helpers `def one_epoch(dl)` nested in two functions are two functions)."""
        if len(found) < 2:
            return found
        owners = {fn: self.enclosing_function(fn) for fn in found}
        if all(o is None for o in owners.values()):
            return found
        for a in self.ancestors(call):
            if isinstance(a, cst.FunctionDef):
                inner = [fn for fn in found if owners[fn] is a]
                if inner:
                    return inner
        outer = [fn for fn in found if owners[fn] is None]
        return outer or found

    def _methods_in_hierarchy(self, cls: cst.ClassDef, name: str, seen: Optional[Set[str]] = None) -> List[cst.FunctionDef]:
        seen = seen or set()
        if cls.name.value in seen:
            return []
        seen.add(cls.name.value)
        found = list(self.methods.get((cls.name.value, name), ()))
        if found:
            return found
        for base in cls.bases:
            base_name = dotted(base.value)
            for base_cls in self.class_defs.get(base_name or "", ()):
                found += self._methods_in_hierarchy(base_cls, name, seen)
        return found

    # -- transitive facts ----------------------------------------------------------------
    def _reach(self, unit: Unit, attr: str, stack: Optional[Set[cst.CSTNode]] = None) -> bool:
        key = (attr, unit)
        if key in self._memo:
            return self._memo[key]
        stack = stack or set()
        if unit in stack:
            return False
        stack.add(unit)
        info = self.units[unit]
        result = getattr(info, attr) or any(self._reach(fn, attr, stack) for fn in info.callees)
        stack.discard(unit)
        self._memo[key] = result
        return result

    def reaches_backward(self, unit: Unit) -> bool:
        return self._reach(unit, "backward")

    def reaches_step(self, unit: Unit) -> bool:
        return self._reach(unit, "step")

    def callees_closure(self, units: Iterable[Unit]) -> Set[cst.FunctionDef]:
        """Every same-module function run (transitively) from the given loop or function bodies."""
        seen: Set[cst.FunctionDef] = set()
        todo = [fn for u in units for fn in self.units[u].callees]
        while todo:
            fn = todo.pop()
            if fn in seen:
                continue
            seen.add(fn)
            todo.extend(self.units[fn].callees)
        return seen

    def runs_backward_itself(self, unit: Unit) -> bool:
        """`unit` (a loop or a function) runs a backward at its own level, not only in the loops
        inside it: a direct `backward()`, or a call of a same-file function that reaches one and
        holds no training loop. Such a unit is (part of) a training step, even around an inner
        step loop (a GAN's generator update around the critic's loop)."""
        info = self.units[unit]
        inner = {id(c) for loop in info.inner_loops for c in self.units[loop].calls}
        for call in info.calls:
            if id(call) in inner:
                continue
            if self._is_backward(call):
                return True
            for fn in self.resolve_call(call, info):
                if self.reaches_backward(fn) and not self._holds_training_loop(fn):
                    return True
        return False

    def _holds_training_loop(self, fn: cst.FunctionDef) -> bool:
        """`fn`, or a same-file function it runs, holds a training-step or epoch loop (or a loop
        over runs: the loops that were epoch loops before the runs were told apart)."""
        key = ("holds", fn)
        if key not in self._memo:
            trains = self.step_loops | self.epoch_loops | self.run_loops
            self._memo[key] = any(loop in trains for f in {fn} | self.callees_closure([fn]) for loop in self.units[f].inner_loops)
        return self._memo[key]

    def inner_loops(self, loop: Loop) -> Set[Loop]:
        """Loops run inside `loop`'s body: nested lexically or in functions it calls."""
        result: Set[Loop] = set(self.units[loop].inner_loops)
        for fn in self.callees_closure([loop]):
            result.update(self.units[fn].inner_loops)
        result.discard(loop)
        return result

    def _seeded(self, kind: str) -> Set[cst.FunctionDef]:
        """This file's functions that the whole program makes hot in this way (`FileSeeds`)."""
        if self.seeds is None:
            return set()
        fns = self.all_functions
        return {fns[i] for i, kinds in self.seeds.functions.items() if kind in kinds and i < len(fns)}

    def passed_constants(self, fn: cst.FunctionDef, name: str) -> Optional[Tuple[bool, list, bool]]:
        """What call sites in other modules pass to parameter `name` of `fn` (the whole program):
        None when the program knows no such call sites; else (all constants?, the constants,
        may a call site leave it to its default?)."""
        if self.seeds is None:
            return None
        params = self.seeds.project.get("params", {}).get(str(self._function_ordinal.get(fn, -1)))
        if not params:
            return None
        from speedlint.analyzer.program.schema import DEFAULT

        if name not in params:
            return (True, [], True)  # no call site passes it: the default
        values = params[name]
        if values is None:
            return (False, [], False)
        return (True, [v for v in values if v != DEFAULT], DEFAULT in values)

    def scalar_parameter(self, fn: cst.FunctionDef, name: str) -> bool:
        """Some call site (anywhere in the program) passes a Python number or string to it."""
        if self.seeds is None:
            return False
        return name in self.seeds.project.get("scalars", {}).get(str(self._function_ordinal.get(fn, -1)), ())

    def host_parameter(self, fn: cst.FunctionDef, name: str) -> bool:
        """Every call site that runs `fn` on each training step or evaluation batch (the whole
        program) passes a Python value to this parameter, or leaves it to its default (`name`:
        "x", "*args" or "**kwargs" as written; `Hotness.host_parameters`)."""
        if self.seeds is None:
            return False
        return name in self.seeds.project.get("host_params", {}).get(str(self._function_ordinal.get(fn, -1)), ())

    def program_hot(self, fn: cst.FunctionDef, kind: str) -> bool:
        """Whether the whole program runs `fn` in this way (`step`, `sample`, `eval`, `epoch`)
        from a call that runs every time (the program follows only such calls)."""
        if self.seeds is None:
            return False
        kinds = self.seeds.functions.get(self._function_ordinal.get(fn, -1))
        return bool(kinds and kind in kinds)

    def chain_of(self, node: cst.CSTNode) -> Tuple[str, tuple]:
        """(kind, the call chain of `program.Hop`s) that makes the function holding `node` hot
        through other modules; ("", ()) when it is hot in its own file, or not hot."""
        if self.seeds is None:
            return "", ()
        if isinstance(self.step_of(node), (cst.For, cst.While)) or self.eval_loop_of(node) is not None:
            return "", ()  # hot through a loop of its own function
        fn = self.enclosing_function(node)
        while fn is not None:
            if fn in self._local_hot:
                return "", ()
            kinds = self.seeds.functions.get(self._function_ordinal.get(fn, -1))
            if kinds:
                for k in ("step", "sample", "eval", "epoch"):
                    chain = kinds.get(k)
                    if chain:
                        return k, chain
            fn = self.enclosing_function(fn)
        return "", ()

    def _classify(self) -> None:
        sat = {loop for loop in self.loops if self.reaches_backward(loop) and self.reaches_step(loop)}
        if self.seeds is not None:  # loops whose backward / optimizer step is in another module
            sat |= {self.loops[i] for i in self.seeds.step_loops if i < len(self.loops)}
        for loop in sat:
            if not (self.inner_loops(loop) & sat):
                self.step_loops.add(loop)
        for loop in self.loops:
            if loop not in self.step_loops and self.inner_loops(loop) & self.step_loops:
                self.epoch_loops.add(loop)
        # A function with an epoch loop of its own is a whole training run: a loop that runs one
        # (hyper-parameter evolution, a sweep, repeated experiments) loops over runs, not epochs,
        # and the run's code outside its own loops runs once per run
        runs = {
            self.units[loop].function for loop in self.epoch_loops
            if self.units[loop].function is not None and not self.runs_backward_itself(loop)
        }
        if runs:
            self.run_loops = {loop for loop in self.epoch_loops if self.callees_closure([loop]) & runs}
            self.epoch_loops -= self.run_loops
        local_steps = self.callees_closure(self.step_loops)
        seeded_steps = self._seeded("step")
        self.step_functions: Set[cst.FunctionDef] = local_steps | seeded_steps | self.callees_closure(seeded_steps)
        local_epochs = self.callees_closure(self.epoch_loops)
        seeded_epochs = self._seeded("epoch")
        self.epoch_functions: Set[cst.FunctionDef] = (local_epochs | seeded_epochs) - self.step_functions
        #: functions run once per evaluation batch through a call in another module
        seeded_evals = self._seeded("eval")
        self.eval_functions: Set[cst.FunctionDef] = (seeded_evals | self.callees_closure(seeded_evals)) - self.step_functions
        self._function_ordinal = {fn: i for i, fn in enumerate(self.all_functions)}
        self.forward_functions: Set[cst.FunctionDef] = {
            fn for (cls, name), fns in self.methods.items() if name == "forward" for fn in fns
        }
        local_samples = self.local_sample_functions = self._per_sample_functions()
        seeded_samples = self._seeded("sample")
        self.sample_functions: Set[cst.FunctionDef] = local_samples | seeded_samples | self.callees_closure(seeded_samples)
        #: hot without the rest of the program (no chain to name)
        self._local_hot: Set[cst.FunctionDef] = local_steps | local_samples
        self.eval_loops: Set[Loop] = {loop for loop in self.loops if self._is_eval_loop(loop)}
        # keep only the outermost eval loops: that is the per-batch loop
        self.eval_loops = {
            loop for loop in self.eval_loops
            if not any(isinstance(a, (cst.For, cst.While)) and a in self.eval_loops for a in self.ancestors(loop))
        }

    def _per_sample_functions(self) -> Set[cst.FunctionDef]:
        roots: Set[cst.FunctionDef] = set()
        for (cls, name), fns in self.methods.items():
            if name == "__getitem__" or name == "__getitems__":
                roots.update(fns)
        for ref in self._collate_refs:
            if isinstance(ref, cst.Name):
                roots.update(self.functions.get(ref.value, ()))
            elif isinstance(ref, cst.Attribute) and isinstance(ref.value, cst.Name) and ref.value.value == "self":
                for (cls, name), fns in self.methods.items():
                    if name == ref.attr.value:
                        roots.update(fns)
        for (cls, name), fns in self.methods.items():
            if name == "__call__" and re.search(r"collat", cls, re.I):
                roots.update(fns)
        return roots | self.callees_closure(roots)

    # -- eval loops ------------------------------------------------------------------------
    def _is_eval_loop(self, loop: Loop) -> bool:
        if loop in self.step_loops or loop in self.epoch_loops or self.reaches_backward(loop):
            return False
        if _leaves_on_first_iteration(loop):
            return False  # one batch, taken for a measurement or a sample: not a loop over batches
        if _leaves_after_few_iterations(loop) or any(
            type(a) is cst.For and _leaves_after_few_iterations(a) for a in self.ancestors(loop)
        ):
            return False  # a few examples (`if i >= 5: break`), and loops inside: not a loop over batches
        if self.grad_disabled_at(loop):
            return True
        fn = self.enclosing_function(loop)
        if fn is None:
            return False
        if EVAL_NAME.search(fn.name.value):
            return True
        return self._eval_called_before(fn, loop)

    def _eval_called_before(self, fn: cst.FunctionDef, loop: Loop) -> bool:
        """An argument-less `.eval()` before `loop` in its function; for a loop inside a training
        step loop, one inside that step loop (a `teacher.eval()` before the training loop says
        nothing about the loops of its steps, such as one over the logged losses)."""
        step = next((a for a in self.ancestors(loop) if a in self.step_loops), None)
        for call in self.units[fn].calls:
            func = call.func
            if isinstance(func, cst.Attribute) and func.attr.value == "eval" and not call.args:
                if self.is_before(call, loop) and (step is None or self.contains(step, call)):
                    return True
        return False

    def is_before(self, a: cst.CSTNode, b: cst.CSTNode) -> bool:
        """Whether `a` comes before `b` in source order."""
        return self.order.get(a, -1) < self.order.get(b, -1)

    # -- queries about a node --------------------------------------------------------------
    def parent(self, node: cst.CSTNode) -> Optional[cst.CSTNode]:
        return self.tree.parent(node)

    def ancestors(self, node: cst.CSTNode) -> Iterator[cst.CSTNode]:
        tree = self.tree
        i = tree.index(node)
        if i is None:
            return
        nodes, parents = tree.nodes, tree.parents
        i = parents[i]
        while i >= 0:
            yield nodes[i]
            i = parents[i]

    def contains(self, outer: cst.CSTNode, node: cst.CSTNode) -> bool:
        """Whether `node` is `outer` or lies inside it: a subtree is a range of the tree's
        reading (constant time, where walking up the ancestors is linear in the depth)."""
        tree = self.tree
        i, j = tree.index(outer), tree.index(node)
        if i is None or j is None:  # not nodes of this tree
            return node is outer
        return i <= j < tree.ends[i]

    def calls_inside(self, node: cst.CSTNode) -> List[cst.Call]:
        """The calls in `node`'s subtree (`node` included), in reading order: a range of
        `self.calls` (recorded in reading order), found by bisection."""
        tree = self.tree
        i = tree.index(node)
        if i is None:  # not a node of this tree
            return [c for c in self.calls if c is node]
        starts = self._call_starts
        if starts is None:
            starts = self._call_starts = [tree.index(c) for c in self.calls]  # type: ignore[misc]
        return self.calls[bisect_left(starts, i):bisect_left(starts, tree.ends[i])]

    def enclosing_function(self, node: cst.CSTNode) -> Optional[cst.FunctionDef]:
        for a in self.ancestors(node):
            if isinstance(a, cst.FunctionDef):
                return a
        return None

    def enclosing_class(self, node: cst.CSTNode) -> Optional[cst.ClassDef]:
        fn = self.enclosing_function(node)
        while fn is not None:
            cls = self.function_class.get(fn)
            if cls is not None:
                return cls
            fn = self.enclosing_function(fn)
        return None

    def _body_ancestors(self, node: cst.CSTNode) -> Iterator[Unit]:
        """Loops whose per-iteration part contains `node`, and the enclosing functions, innermost first."""
        # (node types compared exactly: LibCST's node classes are not subclassed, and an
        # `isinstance` against them goes through `ABCMeta`, several times slower on these hot paths)
        tree = self.tree
        i = tree.index(node)
        if i is None:
            return
        nodes, parents = tree.nodes, tree.parents
        child = node
        i = parents[i]
        while i >= 0:
            a = nodes[i]
            kind = type(a)
            if kind is cst.For:
                if child is a.body:  # type: ignore[attr-defined]
                    yield a  # type: ignore[misc]
            elif kind is cst.While:
                if child is a.body or child is a.test:  # type: ignore[attr-defined]
                    yield a  # type: ignore[misc]
            elif kind is cst.FunctionDef and child is a.body:  # type: ignore[attr-defined]
                yield a  # type: ignore[misc]
            child = a
            i = parents[i]

    def eval_mode_only(self, node: cst.CSTNode) -> bool:
        """`node` runs only when the module is in eval mode: under `if not self.training:` or in
        the `else` of `if self.training:` (a model's inference path), within its function."""
        tree = self.tree
        i = tree.index(node)
        if i is None:
            return False
        nodes, parents = tree.nodes, tree.parents
        child, at = node, i
        i = parents[i]
        while i >= 0:
            a = nodes[i]
            kind = type(a)
            if kind is cst.FunctionDef:
                return False
            if kind is cst.If:
                if child is not a.test:  # type: ignore[attr-defined]
                    mode = _training_test(a.test)  # type: ignore[attr-defined]
                    if mode is not None:
                        in_body = child is a.body  # type: ignore[attr-defined]
                        return in_body != mode  # the body when the test is `not self.training`
            elif kind is cst.IndentedBlock or kind is cst.Module:
                # `if self.training: return loss` earlier in the block: what follows is inference
                if self._first_training_exit(i, a) < at:
                    return True
            child, at = a, i
            i = parents[i]
        return False

    def _first_training_exit(self, index: int, block: cst.CSTNode) -> int:
        """Where (visiting order) the first `if self.training: return ...` statement of a block is
        (a number past every node when there is none); once per block."""
        got = self._training_exits.get(index)
        if got is None:
            got = len(self.tree.nodes)
            for stmt in block.body:  # type: ignore[attr-defined]
                if type(stmt) is cst.If and stmt.orelse is None and _training_test(stmt.test) is True and _leaves(stmt.body):
                    found = self.tree.index(stmt)
                    got = got if found is None else found
                    break
            self._training_exits[index] = got
        return got

    def step_of(self, node: cst.CSTNode) -> Optional[Unit]:
        """The step loop or step function whose every iteration runs `node`, if any."""
        if self.eval_mode_only(node):
            return None
        for unit in self._body_ancestors(node):
            if unit in self.step_loops or unit in self.step_functions:
                return unit
            if isinstance(unit, cst.FunctionDef) and unit not in self.step_functions:
                return None
        return None

    def in_training_step(self, node: cst.CSTNode) -> bool:
        return self.step_of(node) is not None

    def epoch_of(self, node: cst.CSTNode) -> Optional[Unit]:
        """The epoch loop or per-epoch function running `node` once per epoch (not per step)."""
        if self.in_training_step(node):
            return None
        for unit in self._body_ancestors(node):
            if unit in self.epoch_loops or unit in self.epoch_functions:
                return unit
            if isinstance(unit, cst.FunctionDef):
                return None
        return None

    def between_steps(self, node: cst.CSTNode) -> Optional[Unit]:
        """The epoch loop, per-epoch function, loop over runs or training function whose own
        level runs `node` outside every training step (once per epoch or once per run), when that
        level runs no backward itself; None otherwise (in a step, or not known)."""
        if self.in_training_step(node):
            return None
        unit = next(iter(self._body_ancestors(node)), None)  # the innermost
        if unit is None:
            return None
        if isinstance(unit, cst.FunctionDef):
            training = unit in self.epoch_functions or self._holds_training_loop(unit)
        else:
            training = unit in self.epoch_loops or unit in self.run_loops
        return unit if training and not self.runs_backward_itself(unit) else None

    def eval_loop_of(self, node: cst.CSTNode) -> Optional[Loop]:
        for unit in self._body_ancestors(node):
            if unit in self.eval_loops:
                return unit  # type: ignore[return-value]
            if isinstance(unit, cst.FunctionDef):
                return None
        return None

    def eval_function_of(self, node: cst.CSTNode) -> Optional[cst.FunctionDef]:
        """The function run once per evaluation batch (from another module) holding `node`; also
        a training-step function's inference path (`if not self.training:`)."""
        if self.eval_mode_only(node):
            fn = self.enclosing_function(node)
            if fn is not None and (fn in self.step_functions or fn in self.eval_functions):
                return fn
        return self._function_in(node, self.eval_functions) if self.eval_functions else None

    def _function_in(self, node: cst.CSTNode, functions: Set[cst.FunctionDef]) -> Optional[cst.FunctionDef]:
        """The innermost function around `node` (nested ones included) that is in `functions`."""
        fn = self.enclosing_function(node)
        while fn is not None:
            if fn in functions:
                return fn
            fn = self.enclosing_function(fn)
        return None

    def in_loop(self, node: cst.CSTNode) -> Optional[Loop]:
        """The innermost loop (same function) whose body runs `node` repeatedly."""
        for unit in self._body_ancestors(node):
            if isinstance(unit, cst.FunctionDef):
                return None
            return unit
        return None

    def sample_function_of(self, node: cst.CSTNode) -> Optional[cst.FunctionDef]:
        return self._function_in(node, self.sample_functions)

    def is_eval_function(self, fn: cst.FunctionDef) -> bool:
        """An evaluation by name (`evaluate`, `validate` ...) or by what it does, whatever its
        name (`estimate_loss`): it puts a model in eval mode and runs under `no_grad` /
        `inference_mode` (decorated, or a `with` block of its own); never with a backward."""
        if self.reaches_backward(fn):
            return False
        if EVAL_NAME.search(fn.name.value):
            return True
        info = self.units.get(fn)
        calls = info.calls if info is not None else []
        if not any(isinstance(c.func, cst.Attribute) and c.func.attr.value == "eval" and not c.args for c in calls):
            return False
        return any(self.is_grad_off(d.decorator) for d in fn.decorators) or any(self.is_grad_off(c) for c in calls)

    def grad_disabled_at(self, node: cst.CSTNode) -> Optional[cst.CSTNode]:
        """The `with no_grad()/inference_mode()` or decorated function that covers `node`."""
        for a in self.ancestors(node):
            if isinstance(a, cst.With) and any(self.is_grad_off(item.item) for item in a.items):
                return a
            if isinstance(a, cst.FunctionDef) and any(self.is_grad_off(d.decorator) for d in a.decorators):
                return a
        return None

    def is_grad_off(self, expr: cst.BaseExpression) -> bool:
        """`torch.no_grad()`, `torch.inference_mode()` under any alias, or a helper named after
        them (`@smart_inference_mode()`)."""
        target = expr.func if isinstance(expr, cst.Call) else expr
        if self.imports.matches(target, *GRAD_OFF):
            return True
        name = dotted(target)
        return name is not None and says_grad_off(name.rsplit(".", 1)[-1])

    def guarding_ifs(self, node: cst.CSTNode, boundary: Optional[cst.CSTNode] = None) -> List[cst.CSTNode]:
        """`if`/ternary/`except` constructs between `node` and `boundary` (exclusive)."""
        found: List[cst.CSTNode] = []
        child = node
        for a in self.ancestors(node):
            if a is boundary:
                break
            if isinstance(a, cst.If) and child is not a.test:
                found.append(a)
            elif isinstance(a, cst.IfExp) and child is not a.test:
                found.append(a)
            elif isinstance(a, (cst.ExceptHandler, cst.ExceptStarHandler)):
                found.append(a)
            elif isinstance(a, cst.BooleanOperation) and child is a.right:
                found.append(a)
            child = a
        return found


def _training_test(test: cst.BaseExpression) -> Optional[bool]:
    """True for `self.training`, False for `not self.training`, None for any other test."""
    if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
        inner = _training_test(test.expression)
        return None if inner is None else not inner
    if isinstance(test, cst.Attribute) and test.attr.value == "training":
        return True
    return None


def _leaves(body: cst.BaseSuite) -> bool:
    """The block ends by leaving the function (`return` / `raise`)."""
    stmts = body.body
    if not stmts:
        return False
    last = stmts[-1]
    if isinstance(last, cst.SimpleStatementLine):
        return bool(last.body) and isinstance(last.body[-1], (cst.Return, cst.Raise))
    return False
