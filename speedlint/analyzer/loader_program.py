"""Whole-program facts for the data-loading rules (SPD101-SPD107) and for config files.

Added to the seeds of `speedlint.analyzer.program.link`, next to what the program model says:

* `loader_classes`: names a module imports that are project subclasses of a data loader defined
  in another module (`from data.samplers import BucketLoader`): calls of them build loaders;
* `in_memory`: the parameters (per function ordinal) that every call site in the project gives an
  in-memory dataset (`TensorDataset(...)` built in `data.py` and passed in), and the call lines
  whose callee returns one: no worker processes needed for those (SPD101);
* `distributed`: some module of the project runs one process per GPU (DDP, torchrun), for SPD107;
* `configs` / `config_problems`: config objects and the files they read (`configs.flow`).

Per-file facts come from `loader_summary` (part of each file's summary): functions that return
an in-memory dataset, and whether the file starts distributed training.
"""

from __future__ import annotations

import ast
import re
from typing import Any, Callable, Dict, Iterable, List, Optional, Set, Tuple

from speedlint.analyzer.configs.summary import block_statements, all_statements

#: `program.Hotness` and `program.FileSeeds` (not imported: the program imports this module)
Hotness = Any
FileSeeds = Any

_DISTRIBUTED = re.compile(r"\b(DistributedDataParallel|init_process_group|torchrun|LOCAL_RANK|mp\.spawn|DistributedSampler)\b")
#: Substrings one of which `_DISTRIBUTED` needs (a `\b` pattern scans slowly: most files have none).
_DISTRIBUTED_HINTS = ("Distributed", "init_process_group", "torchrun", "LOCAL_RANK", "spawn")
_IN_MEMORY_CALLS = frozenset({"TensorDataset", "StackDataset"})


def loader_summary(tree: ast.Module, text: str) -> Optional[Dict[str, Any]]:
    """Per file: `in_memory` (def lines of functions returning an in-memory dataset), `yields`
    (generators that yield what they iterate), `moves` (parameters a function copies to the GPU),
    `distributed` (it starts one process per GPU) and `cpu_count` (it reads the CPU count)."""
    out: Dict[str, Any] = {}
    if any(w in text for w in _DISTRIBUTED_HINTS) and _DISTRIBUTED.search(text):
        out["distributed"] = True
    if "cpu_count" in text or "sched_getaffinity" in text:
        out["cpu_count"] = True  # a file SPD107 may look at
    wanted = (".cuda(" in text or ".to(" in text or ".type(" in text, "yield" in text, any(n in text for n in _IN_MEMORY_CALLS))
    if not any(wanted):
        return out or None
    functions = _functions(tree)
    for key, want, facts in (("moves", wanted[0], _moved_parameters), ("yields", wanted[1], _generator_wrappers), ("in_memory", wanted[2], _returning_in_memory)):
        if want:
            found = facts(functions, text)
            if found:
                out[key] = found
    return out or None


Functions = List[Tuple[Any, List[ast.stmt]]]


def _functions(tree: ast.Module) -> Functions:
    """Each function of the module with the statements of its own body (nested blocks included,
    nested functions apart)."""
    own: Dict[int, List[ast.stmt]] = {}
    functions = []
    for stmt, fn in all_statements(tree):
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
            functions.append(stmt)
        if fn is not None:
            own.setdefault(id(fn), []).append(stmt)
    return [(f, own.get(id(f), [])) for f in functions]


def _returning_in_memory(functions: Functions, text: str) -> List[int]:
    """def lines of the functions whose every return is an in-memory dataset (`TensorDataset`)."""
    lines = []
    for fn, body in functions:
        returns = [s.value for s in body if isinstance(s, ast.Return) and s.value is not None]
        local: Dict[str, List[ast.AST]] = {}
        for s in body:
            if isinstance(s, ast.Assign) and len(s.targets) == 1 and isinstance(s.targets[0], ast.Name):
                local.setdefault(s.targets[0].id, []).append(s.value)
        if returns and all(_in_memory_expr(r, local, 0) for r in returns):
            lines.append(fn.lineno)
    return lines


_MOVES = re.compile(r"\.(cuda|to)\(|\.type\([^)]*cuda")


def _moved_parameters(functions: Functions, text: str) -> Dict[str, List[str]]:
    """def line -> the parameters a function copies to the GPU (`x.cuda()`, `x.to(device)`,
    `x[0].to(...)`, `x.type(torch.cuda.FloatTensor)`): a batch passed to it is moved there."""
    lines = text.splitlines()
    out: Dict[str, List[str]] = {}
    for fn, _ in functions:
        end = getattr(fn, "end_lineno", None) or fn.lineno
        if not any(_MOVES.search(line) for line in lines[fn.lineno - 1:end]):
            continue
        params = {a.arg for a in (*fn.args.posonlyargs, *fn.args.args, *fn.args.kwonlyargs)}
        moved: List[str] = []
        for node in ast.walk(fn):
            if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in ("cuda", "to", "type")):
                continue
            if node.func.attr == "type" and "cuda" not in ast.dump(node):
                continue
            if node.func.attr == "to" and not (node.args or node.keywords):
                continue
            root = node.func.value
            while isinstance(root, (ast.Attribute, ast.Subscript, ast.Call)):
                root = root.func if isinstance(root, ast.Call) else root.value
            if isinstance(root, ast.Name) and root.id in params and root.id not in ("self", "cls") and root.id not in moved:
                moved.append(root.id)
        if moved:
            out[str(fn.lineno)] = moved
    return out


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


def _generator_wrappers(functions: Functions, text: str) -> Dict[str, int]:
    """def line -> the parameter (index) whose items a generator yields: `for obj in iterable:
    ... yield obj` (`metric_logger.log_every(loader, 10)`), `yield from iterable`."""
    out: Dict[str, int] = {}
    for fn, body in functions:
        found = [(s, s.value) for s in body if isinstance(s, ast.Expr) and isinstance(s.value, (ast.Yield, ast.YieldFrom))]
        if not found:
            continue
        params = [a.arg for a in (*fn.args.posonlyargs, *fn.args.args)]
        target = None
        for _, value in found:
            if isinstance(value, ast.YieldFrom) and isinstance(value.value, ast.Name) and value.value.id in params:
                target = value.value.id
        for loop in (s for s in body if isinstance(s, ast.For)):
            it = loop.iter
            while isinstance(it, ast.Call) and isinstance(it.func, ast.Name) and it.func.id in ("enumerate", "iter", "tqdm", "islice") and it.args:
                it = it.args[0]
            if not isinstance(it, ast.Name) or it.id not in params:
                continue
            items = {n.id for n in ast.walk(loop.target) if isinstance(n, ast.Name)}
            inside = {id(s) for s in block_statements(loop.body)}
            if any(id(y) in inside and isinstance(v, ast.Yield) and isinstance(v.value, ast.Name) and v.value.id in items for y, v in found):
                target = it.id
        if target is not None:
            out[str(fn.lineno)] = params.index(target)
    return out


def _in_memory_expr(node: ast.AST, local: Dict[str, List[ast.AST]], depth: int) -> bool:
    """`TensorDataset(...)`, `Subset(TensorDataset(...), idx)`."""
    if depth > 4:
        return False
    if isinstance(node, ast.Call):
        func = node.func
        name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
        if name in _IN_MEMORY_CALLS:
            return True
        if name == "Subset" and node.args:
            return _in_memory_expr(node.args[0], local, depth + 1)
        return False
    if isinstance(node, ast.Name):
        values = local.get(node.id, [])
        return bool(values) and all(_in_memory_expr(v, local, depth + 1) for v in values)
    return False


def add_data_seeds(hot: Hotness, seeds: Dict[str, FileSeeds], new_seeds: Callable[[], FileSeeds], config_files: Iterable[str] = ()) -> None:
    """Add the data-loading and config facts of the whole program to the files' seeds
    (`new_seeds`: makes the seeds of a file that has none yet)."""
    from speedlint.analyzer.configs.flow import add_config_seeds

    out = _Seeds(seeds, new_seeds)
    _loader_classes(hot, out)
    _iter_wrappers(hot, out)
    _distributed(hot, out)
    _in_memory(hot, out)
    add_config_seeds(hot, seeds, new_seeds, config_files)


class _Seeds:
    """The seeds being built: `project(shown)` is a file's `project` facts (created on demand)."""

    def __init__(self, seeds: Dict[str, FileSeeds], new_seeds: Callable[[], FileSeeds]) -> None:
        self.seeds = seeds
        self.new_seeds = new_seeds

    def project(self, shown: str) -> Dict[str, Any]:
        got = self.seeds.get(shown)
        if got is None:
            got = self.seeds[shown] = self.new_seeds()
        return got.project  # type: ignore[no-any-return]


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
    """Parameters every call site gives an in-memory dataset; calls returning one."""
    p = hot.p
    returning: Set[int] = set()
    for m in p.modules:
        lines = set((m.summary.get("loaders") or {}).get("in_memory", ()))
        if lines:
            returning |= {fid for fid in m.fids if p.functions[fid][1]["line"] in lines}
    if not returning:
        return
    # calls (in any module) whose callee returns an in-memory dataset, by module and line
    call_lines: Dict[int, Set[int]] = {}
    for caller_fid, callee, call, _, caller_mid in hot._all_calls():
        if callee in returning and p.functions[callee][0] != caller_mid:
            call_lines.setdefault(caller_mid, set()).add(call[0])
    # parameters whose every argument is such a call (or a name bound to one)
    params: Dict[int, Dict[str, Optional[bool]]] = {}
    for caller_fid, callee, call, skip, caller_mid in hot._all_calls():
        fn = p.functions[callee][1]
        names = [q for q in fn["params"] if not q.startswith("*")]
        local = hot._body(caller_mid, caller_fid)["assign"]
        got = params.setdefault(callee, {})
        pairs = [(names[k + skip], a) for k, a in enumerate(call[2]) if k + skip < len(names)]
        pairs += [(kw, a) for kw, a in call[3].items() if kw in names]
        for name, arg in pairs:
            ok = _returns_in_memory(p, caller_mid, arg, local, returning)
            got[name] = ok if got.get(name, True) else False
    for fid, names in params.items():
        chosen = sorted(n for n, ok in names.items() if ok)
        if chosen:
            mid = p.functions[fid][0]
            facts = seeds.project(p.modules[mid].shown).setdefault("in_memory", {})
            facts.setdefault("params", {})[str(p.local_index[fid])] = chosen
    for mid, lines in call_lines.items():
        facts = seeds.project(p.modules[mid].shown).setdefault("in_memory", {})
        facts["calls"] = sorted(lines)


def _returns_in_memory(p: Any, mid: int, arg: Any, local: Dict[str, List[Any]], returning: Set[int], depth: int = 0) -> bool:
    if arg is None or depth > 3:
        return False
    if arg[0] == "n" and arg[1] in local:
        values = local[arg[1]]
        return bool(values) and all(_returns_in_memory(p, mid, v, local, returning, depth + 1) for v in values)
    if arg[0] == "c":
        func = arg[1]
        if func[0] == "n" and func[1] in _IN_MEMORY_CALLS:
            return True
        objs: Set[str] = set()
        if func[0] == "n":
            objs = p.symbol(mid, func[1])
        elif func[0] == "a" and func[1] is not None and func[1][0] == "n":
            for o in p.symbol(mid, func[1][1]):
                if o.startswith("M:"):
                    objs |= p.symbol(int(o[2:]), func[2])
        fids = [int(o[2:]) for o in objs if o[0] == "F"]
        return bool(fids) and all(f in returning for f in fids)
    return False
