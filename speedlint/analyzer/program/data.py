"""Whole-program facts for the data-loading rules (SPD101-SPD107) and for config files.

Added to the seeds that `facts.link` makes, next to what the program model says:

* `loader_classes`: names a module imports that are project subclasses of a data loader defined
  in another module (`from data.samplers import BucketLoader`): calls of them build loaders;
* `in_memory`: the parameters (per function ordinal) that every call site in the project gives an
  in-memory dataset (`TensorDataset(...)` built in `data.py` and passed in, an instance of an
  in-memory dataset class, an element of a tuple a helper returns), the call lines whose callee
  returns one, and the names the module calls in-memory dataset classes by (`classes`): no
  worker processes needed for those (SPD101);
* `distributed`: some module of the project runs one process per GPU (DDP, torchrun), for SPD107;
* `configs` / `config_problems`: config objects and the files they read (`configs.flow`).

Per-file facts come from `loader_summary.loader_summary` (part of each file's summary).
`moved_by_callees` answers `ProgramFacts.loader_uses`.
"""

from __future__ import annotations

from typing import Any, Callable, Dict, Iterable, List, Optional, Set

from speedlint.analyzer.configs.flow import add_config_seeds
from speedlint.analyzer.program.hotness import Hotness
from speedlint.analyzer.program.link import Program
from speedlint.analyzer.program.seeds import FileSeeds
from speedlint.analyzer.program.loader_summary import _IN_MEMORY_CALLS
from speedlint.analyzer.program.optin_seeds import add_amp_gate_seeds
from speedlint.analyzer.program.settings_seeds import add_unused_setting_seeds

def moved_by_callees(hot: Hotness, mid: int, fid: Optional[int], body: Dict[str, Any], loop: int, targets: Iterable[str]) -> Set[str]:
    """Loop variables (batches) that a call in the loop hands to a function that copies that
    parameter to the GPU: `model(batch)` with `forward(self, x): x = x.to(self.device)`."""
    p = hot.p
    names = set(targets)
    inside = set(hot._loop_calls(body, loop))
    out: Set[str] = set()
    for index, callee in hot._edges(mid, fid):
        if index not in inside:
            continue
        moves = p.functions[callee][1].get("moves")
        if not moves:
            continue
        call = body["calls"][index]
        params = [q for q in p.functions[callee][1]["params"] if not q.startswith("*")]
        skip = hot._skip_of(callee)
        pairs = [(params[k + skip], a) for k, a in enumerate(call[2]) if k + skip < len(params)]
        pairs += [(kw, a) for kw, a in call[3].items() if kw in params]
        for name, arg in pairs:
            root = arg
            while root is not None and root[0] in ("a", "s", "i", "e"):
                root = root[1]
            if name in moves and root is not None and root[0] == "n" and root[1] in names:
                out.add(root[1])
    return out



def add_data_seeds(hot: Hotness, seeds: Dict[str, FileSeeds], new_seeds: Callable[[], FileSeeds], config_files: Iterable[str] = ()) -> None:
    """Add the data-loading and config facts of the whole program to the files' seeds
    (`new_seeds`: makes the seeds of a file that has none yet)."""
    out = _Seeds(seeds, new_seeds)
    _loader_classes(hot, out)
    _iter_wrappers(hot, out)
    _distributed(hot, out)
    _in_memory(hot, out)
    flow = add_config_seeds(hot, seeds, new_seeds, config_files)
    add_unused_setting_seeds(hot, out.project, flow)  # SPD704 (`settings_use`)
    add_amp_gate_seeds(hot.p, out.project)  # SPD301's opt-in AMP declared here, gated elsewhere


class _Seeds:
    """The seeds being built: `project(shown)` is a file's `project` facts (created on demand)."""

    def __init__(self, seeds: Dict[str, FileSeeds], new_seeds: Callable[[], FileSeeds]) -> None:
        self.seeds = seeds
        self.new_seeds = new_seeds

    def project(self, shown: str) -> Dict[str, Any]:
        got = self.seeds.get(shown)
        if got is None:
            got = self.seeds[shown] = self.new_seeds()
        return got.project


def _loader_classes(hot: Hotness, seeds: _Seeds) -> None:
    p = hot.p
    if not any(p.is_loader_class(cid) for cid in range(len(p.classes))):
        return
    for m in p.modules:
        names = []
        for name, imp in sorted(m.summary["imports"].items()):
            if imp[0] != "from":
                continue
            for obj in p.symbol(m.id, name):
                if obj.startswith("C:") and p.is_loader_class(int(obj[2:])) and p.classes[int(obj[2:])][0] != m.id:
                    names.append(name)
                    break
        if names:
            seeds.project(m.shown)["loader_classes"] = names


def _iter_wrappers(hot: Hotness, seeds: _Seeds) -> None:
    """Calls of a project generator that yields the items of one of its arguments: [line, the
    called name, the argument's position at the call]."""
    p = hot.p
    if not any(fn.get("yields") is not None for _, fn in p.functions):
        return
    found: Dict[int, List[List[Any]]] = {}
    for caller_fid, callee, call, skip, caller_mid in hot._all_calls():
        index = p.functions[callee][1].get("yields")
        if index is None or index - skip < 0:
            continue
        name = _dotted_expr(call[1])
        if name is None:
            continue
        entry = [call[0], name, index - skip]
        if entry not in found.setdefault(caller_mid, []):
            found[caller_mid].append(entry)
    for mid, entries in found.items():
        seeds.project(p.modules[mid].shown)["iter_wrappers"] = sorted(entries)


def _dotted_expr(expr: Any) -> Optional[str]:
    """`a.b.c` for a summary expression `["a", ["a", ["n", "a"], "b"], "c"]`."""
    if expr is None:
        return None
    if expr[0] == "n":
        return str(expr[1])
    if expr[0] == "a":
        base = _dotted_expr(expr[1])
        return f"{base}.{expr[2]}" if base else None
    return None


def _distributed(hot: Hotness, seeds: _Seeds) -> None:
    p = hot.p
    if not any((m.summary.get("loaders") or {}).get("distributed") for m in p.modules):
        return
    for m in p.modules:
        if (m.summary.get("loaders") or {}).get("cpu_count"):
            seeds.project(m.shown)["distributed"] = True


def _in_memory(hot: Hotness, seeds: _Seeds) -> None:
    """Parameters every call site gives an in-memory dataset; calls returning one; the names of
    the in-memory dataset classes."""
    p = hot.p
    classes = _in_memory_class_ids(p)
    returning: Set[int] = set()
    for m in p.modules:
        lines = set((m.summary.get("loaders") or {}).get("in_memory", ()))
        if lines:
            returning |= {fid for fid in m.fids if p.functions[fid][1]["line"] in lines}
    if not returning and not classes:
        return
    known = _InMemory(p, returning, classes)
    # calls (in any module) whose callee returns an in-memory dataset, by module and line
    call_lines: Dict[int, Set[int]] = {}
    for caller_fid, callee, call, _, caller_mid in hot._all_calls():
        if p.functions[callee][0] != caller_mid and known.returns(callee):
            call_lines.setdefault(caller_mid, set()).add(call[0])
    # parameters whose every argument is such a call (or a name bound to one), in the modules
    # that build loaders (only their rules ask)
    builders = p.loader_modules()
    params: Dict[int, Dict[str, Optional[bool]]] = {}
    for caller_fid, callee, call, skip, caller_mid in hot._all_calls():
        if p.functions[callee][0] not in builders:
            continue
        fn = p.functions[callee][1]
        names = [q for q in fn["params"] if not q.startswith("*")]
        local = hot._body(caller_mid, caller_fid)["assign"]
        got = params.setdefault(callee, {})
        pairs = [(names[k + skip], a) for k, a in enumerate(call[2]) if k + skip < len(names)]
        pairs += [(kw, a) for kw, a in call[3].items() if kw in names]
        for name, arg in pairs:
            ok = known.expr(caller_mid, arg, local)
            got[name] = ok if got.get(name, True) else False
    for fid, given in params.items():
        chosen = sorted(n for n, ok in given.items() if ok)
        if chosen:
            mid = p.functions[fid][0]
            facts = seeds.project(p.modules[mid].shown).setdefault("in_memory", {})
            facts.setdefault("params", {})[str(p.local_index[fid])] = chosen
    for mid, lines in call_lines.items():
        facts = seeds.project(p.modules[mid].shown).setdefault("in_memory", {})
        facts["calls"] = sorted(lines)
    for mid, names in _class_names(p, classes).items():
        seeds.project(p.modules[mid].shown).setdefault("in_memory", {})["classes"] = names


def _in_memory_class_ids(p: Program) -> Set[int]:
    """The project classes whose `__getitem__` only indexes data in memory (`loader_summary`),
    unless the program sees one of those attributes given an instance of a project class."""
    out: Set[int] = set()
    for m in p.modules:
        found = (m.summary.get("loaders") or {}).get("in_memory_classes")
        if not found:
            continue
        for cid in m.cids.values():
            read = found.get(str(p.classes[cid][2]["line"]))
            if read is None:
                continue
            types = p.attr_types.get(cid, {})
            if not any(o.startswith("I:") for attr in read for o in types.get(attr, ())):
                out.add(cid)
    return out


def _class_names(p: Program, classes: Set[int]) -> Dict[int, List[str]]:
    """module -> the names its code calls an in-memory dataset class by: its own classes, the ones
    it imports by name (`from datautils import MyTrainDataset`) or through a module
    (`datautils.MyTrainDataset`). Names, not lines: they stay true while fixes move lines."""
    out: Dict[int, List[str]] = {}
    if not classes:
        return out
    by_module: Dict[int, List[str]] = {}
    for cid in sorted(classes):
        by_module.setdefault(p.classes[cid][0], []).append(p.classes[cid][1])
    for m in p.modules:
        names = set(by_module.get(m.id, ()))
        for name, imp in m.summary["imports"].items():
            if imp[0] == "from":
                objs = p.symbol(m.id, name)
                if objs and all(o.startswith("C:") and int(o[2:]) in classes for o in objs):
                    names.add(name)
            for o in p.symbol(m.id, name):
                if o.startswith("M:"):
                    names.update(f"{name}.{q}" for q in by_module.get(int(o[2:]), ()))
        if names:
            out[m.id] = sorted(names)
    return out


class _InMemory:
    """Which summary expressions are in-memory datasets: `TensorDataset(...)`, a constructor of an
    in-memory dataset class, a call of a function returning one, an element of a tuple a function
    always returns with one there (`dataset, model, optimizer = load_train_objs()`), and names
    bound only to such. Functions are looked at when a call asks (memoised)."""

    def __init__(self, p: Program, returning: Set[int], classes: Set[int]) -> None:
        self.p = p
        self.known = set(returning)  # the files' own word (`TensorDataset` returned)
        self.classes = classes
        #: fid -> whether it returns one; the positions of the literal tuple it always returns
        #: that hold one (None while being decided: recursion says no)
        self._returns: Dict[int, Optional[bool]] = {}
        self._elements: Dict[int, Optional[Set[int]]] = {}

    def returns(self, fid: int) -> bool:
        if fid in self.known:
            return True
        if fid not in self._returns:
            self._returns[fid] = None
            mid, fn = self.p.functions[fid]
            rets = fn["returns"]
            self._returns[fid] = bool(rets) and all(self.expr(mid, r, fn["assign"]) for r in rets)
        return bool(self._returns[fid])

    def elements(self, fid: int) -> Set[int]:
        if fid not in self._elements:
            self._elements[fid] = None
            mid, fn = self.p.functions[fid]
            rets = fn["returns"]
            found: Set[int] = set()
            if rets and all(r[0] == "t" and len(r) > 2 for r in rets) and len({len(r[1]) for r in rets}) == 1:
                found = {k for k in range(len(rets[0][1])) if all(self.expr(mid, r[1][k], fn["assign"]) for r in rets)}
            self._elements[fid] = found
        return self._elements[fid] or set()

    def expr(self, mid: int, arg: Any, local: Dict[str, List[Any]], depth: int = 0) -> bool:
        if arg is None or depth > 3:
            return False
        if arg[0] == "n" and arg[1] in local:
            values = local[arg[1]]
            return bool(values) and all(self.expr(mid, v, local, depth + 1) for v in values)
        if arg[0] == "i" and len(arg) > 2 and arg[1] is not None and arg[1][0] == "c":  # `ds, model = build()`
            fids = self._functions(mid, arg[1][1])
            return bool(fids) and all(arg[2] in self.elements(f) for f in fids)
        if arg[0] == "c":
            func = arg[1]
            if func[0] == "n" and func[1] in _IN_MEMORY_CALLS:
                return True
            if self.constructs(mid, func):
                return True
            fids = self._functions(mid, func)
            return bool(fids) and all(self.returns(f) for f in fids)
        return False

    def constructs(self, mid: int, func: Any) -> bool:
        """`func` names an in-memory dataset class (`MyTrainDataset`, `datautils.MyTrainDataset`)."""
        objs = self._objects(mid, func)
        return bool(objs) and all(o.startswith("C:") and int(o[2:]) in self.classes for o in objs)

    def _functions(self, mid: int, func: Any) -> List[int]:
        objs = self._objects(mid, func)
        fids = [int(o[2:]) for o in objs if o[0] == "F"]
        return fids if len(fids) == len(objs) else []

    def _objects(self, mid: int, func: Any) -> Set[str]:
        p = self.p
        if func[0] == "n":
            return set(p.symbol(mid, func[1]))
        out: Set[str] = set()
        if func[0] == "a" and func[1] is not None and func[1][0] == "n":
            for o in p.symbol(mid, func[1][1]):
                if o.startswith("M:"):
                    out |= p.symbol(int(o[2:]), func[2])
        return out
