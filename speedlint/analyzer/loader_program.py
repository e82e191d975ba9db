"""Whole-program facts for the data-loading rules (SPD101-SPD107) and for config files.

Added to the seeds of `speedlint.analyzer.program.link`, next to what the program model says:

* `loader_classes`: names a module imports that are project subclasses of a data loader defined
  in another module (`from data.samplers import BucketLoader`): calls of them build loaders;
* `in_memory`: the parameters (per function ordinal) that every call site in the project gives an
  in-memory dataset (`TensorDataset(...)` built in `data.py` and passed in, an instance of an
  in-memory dataset class, an element of a tuple a helper returns), the call lines whose callee
  returns one, and the names the module calls in-memory dataset classes by (`classes`): no
  worker processes needed for those (SPD101);
* `distributed`: some module of the project runs one process per GPU (DDP, torchrun), for SPD107;
* `configs` / `config_problems`: config objects and the files they read (`configs.flow`).

Per-file facts come from `loader_summary` (part of each file's summary): functions that return
an in-memory dataset, dataset classes whose `__getitem__` only indexes data held in memory,
and whether the file starts distributed training.
"""

from __future__ import annotations

import ast
import re
from typing import Any, Callable, Dict, Iterable, List, Optional, Set, Tuple

from speedlint.analyzer.configs.summary import all_statements, block_statements, dotted_name, walk
from speedlint.analyzer.sources import source_lines

#: `program.Hotness` and `program.FileSeeds` (not imported: the program imports this module)
Hotness = Any
FileSeeds = Any

_DISTRIBUTED = re.compile(r"\b(DistributedDataParallel|init_process_group|torchrun|LOCAL_RANK|mp\.spawn|DistributedSampler)\b")
#: Substrings one of which `_DISTRIBUTED` needs (a `\b` pattern scans slowly: most files have none).
_DISTRIBUTED_HINTS = ("Distributed", "init_process_group", "torchrun", "LOCAL_RANK", "spawn")
_IN_MEMORY_CALLS = frozenset({"TensorDataset", "StackDataset"})


def loader_summary(tree: ast.Module, text: str) -> Optional[Dict[str, Any]]:
    """Per file: `in_memory` (def lines of functions returning an in-memory dataset),
    `in_memory_classes` (class line -> the attributes its `__getitem__` indexes), `yields`
    (generators that yield what they iterate), `moves` (parameters a function copies to the GPU),
    `distributed` (it starts one process per GPU), `cpu_count` (it reads the CPU count) and
    `splat_kws` (loader keywords read out of `**kwargs` dicts)."""
    out: Dict[str, Any] = {}
    if "**" in text and ("Loader" in text or "Sampler" in text):
        splats = _splat_keywords(tree)
        if splats:
            out["splat_kws"] = splats
    if any(w in text for w in _DISTRIBUTED_HINTS) and _DISTRIBUTED.search(text):
        out["distributed"] = True
    if "cpu_count" in text or "sched_getaffinity" in text:
        out["cpu_count"] = True  # a file SPD107 may look at
    if "__getitem__" in text:
        classes = _in_memory_classes(tree, text)
        if classes:
            out["in_memory_classes"] = classes
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


# -- loader keywords from `**kwargs` dicts --------------------------------------------------------
#: At most this many ways of building one dict are followed (`_MAX_ALTERNATIVES` of the values).
_MAX_DICTS = 8
#: One way a dict may be built: key -> value expression, and whether every key is known.
_Dict = Tuple[Dict[str, ast.expr], bool]
#: How the names of the loader classes end (`program.LOADER_NAMES`, project subclasses).
_LOADER_ENDINGS = ("Loader", "Sampler")
#: A keyword whose value is not followed (`program.SPLAT`: not imported, the program imports this module).
_NOT_FOLLOWED = ("k", "\x00splat")
#: Dict methods that change it (other than `update`, which is followed): a dict changed by one is not read.
_MUTATORS = frozenset({"pop", "popitem", "setdefault", "clear", "__setitem__", "__delitem__"})


def _splat_keywords(tree: ast.Module) -> Dict[str, Dict[str, Any]]:
    """call line -> keyword -> its summary form, for the loader calls whose keywords come through
    `**name` dicts that this module builds where the call is (the function, else module level):
    a literal, `dict(...)`, a conditional between such dicts, with `name.update(...)` and
    `name["key"] = value` after it (under an `if`: the dict may or may not get them). The same
    reading as `ValueTracer.dict_alternatives` over LibCST, here on `ast` for the program model
    (`Hotness.loader_uses`, which pins loops over a loader built in another module):

    * `pin_memory`: `["k", True]` when some way of building the dict sets it to `True` and every
      way that sets it sets a literal bool (`if use_cuda: kwargs.update(pin_memory=True)` pins
      whenever CUDA is used, which is where a blocking copy costs);
    * `collate_fn`: present when some way sets it.

    A call with a dict that may hide keys (built by a function, a parameter, `**vars(args)`, an
    unreadable merge or change) is left out: nothing is said about it."""
    scopes = _Scopes(tree)
    out: Dict[str, Dict[str, Any]] = {}
    for scope, statements in scopes.statements.items():
        for stmt, _ in statements:
            for call in _own_calls(stmt):
                name = dotted_name(call.func)
                splats = [k.value for k in call.keywords if k.arg is None]
                if not splats or name is None or not name.endswith(_LOADER_ENDINGS):
                    continue  # (the program asks only about the calls it knows build loaders)
                ways: List[_Dict] = [({}, True)]
                for splat in splats:
                    inner = scopes.read(splat, scope, 0)
                    if inner is None:
                        break
                    ways = [({**items, **more}, a and b) for items, a in ways for more, b in inner]
                else:
                    if not ways or not all(complete for _, complete in ways) or len(ways) > _MAX_DICTS:
                        continue
                    got: Dict[str, Any] = {}
                    pins = [items["pin_memory"] for items, _ in ways if "pin_memory" in items]
                    if pins and all(isinstance(v, ast.Constant) and isinstance(v.value, bool) for v in pins) and any(v.value for v in pins):  # type: ignore[attr-defined]
                        got["pin_memory"] = ["k", True]
                    if any("collate_fn" in items for items, _ in ways):
                        got["collate_fn"] = list(_NOT_FOLLOWED)
                    if got:
                        out[str(call.lineno)] = got
    return out


def _own_calls(stmt: ast.stmt) -> Iterable[ast.Call]:
    """The calls in a statement's own expressions (not in the statements of its blocks)."""
    for field in stmt._fields:
        value = getattr(stmt, field, None)
        values = value if isinstance(value, list) else [value]
        for v in values:
            if isinstance(v, (ast.expr, ast.keyword, ast.withitem)):
                for node in walk(v):
                    if isinstance(node, ast.Call):
                        yield node


class _Scopes:
    """The statements of each function (and of the module), with the conditional blocks around
    each, and what the dicts bound there are made of."""

    def __init__(self, tree: ast.Module) -> None:
        #: scope (a function, or None: module level) -> (statement, the conditional blocks around it)
        self.statements: Dict[Any, List[Tuple[ast.stmt, Tuple[int, ...]]]] = {}
        self.params: Dict[Any, Set[str]] = {}
        self._walk(tree.body, None, ())
        self._binds: Dict[Any, Dict[str, List[Tuple[Optional[ast.expr], Tuple[int, ...]]]]] = {}
        #: scope -> name -> (line, changed dict -> dicts, conditional blocks) for updates and item writes
        self._changes: Dict[Any, Dict[str, List[Tuple[int, Any, Tuple[int, ...]]]]] = {}

    def _walk(self, body: List[ast.stmt], scope: Any, guards: Tuple[int, ...]) -> None:
        for stmt in body:
            self.statements.setdefault(scope, []).append((stmt, guards))
            if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
                args = stmt.args
                self.params[stmt] = {a.arg for a in (*args.posonlyargs, *args.args, *args.kwonlyargs, args.vararg, args.kwarg) if a is not None}
                self._walk(stmt.body, stmt, ())
                continue
            if isinstance(stmt, ast.ClassDef):
                continue
            inner = guards + (id(stmt),) if isinstance(stmt, (ast.If, ast.For, ast.AsyncFor, ast.While)) else guards
            for field in ("body", "orelse", "finalbody"):
                block = getattr(stmt, field, None)
                if isinstance(block, list):
                    self._walk([s for s in block if isinstance(s, ast.stmt)], scope, inner)
            for handler in getattr(stmt, "handlers", None) or ():
                self._walk(handler.body, scope, guards + (id(handler),))
            for case in getattr(stmt, "cases", None) or ():  # pragma: no cover - rare in training code
                self._walk(case.body, scope, guards + (id(case),))

    def _index(self, scope: Any) -> None:
        if scope in self._binds:
            return
        binds: Dict[str, List[Tuple[Optional[ast.expr], Tuple[int, ...]]]] = {}
        changes: Dict[str, List[Tuple[int, Any, Tuple[int, ...]]]] = {}
        self._binds[scope], self._changes[scope] = binds, changes
        for stmt, guards in self.statements.get(scope, ()):
            if isinstance(stmt, ast.Assign):
                for t in stmt.targets:
                    if isinstance(t, ast.Name):
                        binds.setdefault(t.id, []).append((stmt.value, guards))
                    elif isinstance(t, ast.Subscript) and isinstance(t.value, ast.Name):
                        key = t.slice
                        if isinstance(key, ast.Constant) and isinstance(key.value, str):
                            changes.setdefault(t.value.id, []).append((stmt.lineno, ("set", key.value, stmt.value), guards))
                        else:
                            changes.setdefault(t.value.id, []).append((stmt.lineno, ("unknown",), guards))
                    else:
                        for n in walk(t):
                            if isinstance(n, ast.Name):
                                binds.setdefault(n.id, []).append((None, guards))
            elif isinstance(stmt, (ast.AugAssign, ast.AnnAssign)):
                target = stmt.target
                if isinstance(target, ast.Name):
                    binds.setdefault(target.id, []).append((stmt.value if isinstance(stmt, ast.AnnAssign) else None, guards))
            elif isinstance(stmt, (ast.For, ast.AsyncFor, ast.With, ast.AsyncWith, ast.Delete, ast.Global, ast.Nonlocal)):
                for n in walk(stmt.target) if isinstance(stmt, (ast.For, ast.AsyncFor)) else ():
                    if isinstance(n, ast.Name):
                        binds.setdefault(n.id, []).append((None, guards))
                for item in getattr(stmt, "items", None) or ():
                    for n in walk(item.optional_vars) if item.optional_vars is not None else ():
                        if isinstance(n, ast.Name):
                            binds.setdefault(n.id, []).append((None, guards))
                for t in getattr(stmt, "targets", None) or ():  # `del d["k"]`
                    root = t.value if isinstance(t, ast.Subscript) else t
                    if isinstance(root, ast.Name):
                        changes.setdefault(root.id, []).append((stmt.lineno, ("unknown",), guards))
                for name in getattr(stmt, "names", None) or ():
                    binds.setdefault(name, []).append((None, guards))
            for call in _own_calls(stmt):
                func = call.func
                if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name):
                    if func.attr == "update":
                        changes.setdefault(func.value.id, []).append((call.lineno, ("update", call), guards))
                    elif func.attr in _MUTATORS:
                        changes.setdefault(func.value.id, []).append((call.lineno, ("unknown",), guards))

    def read(self, expr: ast.expr, scope: Any, depth: int) -> Optional[List[_Dict]]:
        """The dicts `expr` may be (None: not a dict this module builds, or too many ways)."""
        if depth > 8:
            return None
        if isinstance(expr, ast.Dict):
            ways: List[_Dict] = [({}, True)]
            for key, value in zip(expr.keys, expr.values):
                if key is None:  # `{**other}`
                    got = self._merge(ways, value, scope, depth)
                    if got is None:
                        return None
                    ways = got
                elif isinstance(key, ast.Constant) and isinstance(key.value, str):
                    ways = [({**items, key.value: value}, complete) for items, complete in ways]
                else:
                    ways = [(items, False) for items, _ in ways]
            return ways
        if isinstance(expr, ast.Call) and isinstance(expr.func, ast.Name) and expr.func.id == "dict":
            return self._merge_call(expr, [({}, True)], scope, depth)
        if isinstance(expr, ast.IfExp):
            body, orelse = self.read(expr.body, scope, depth + 1), self.read(expr.orelse, scope, depth + 1)
            if body is None or orelse is None or len(body) + len(orelse) > _MAX_DICTS:
                return None
            return body + orelse
        if isinstance(expr, ast.Name):
            return self._read_name(expr.id, scope, depth + 1)
        return None

    def _read_name(self, name: str, scope: Any, depth: int) -> Optional[List[_Dict]]:
        if scope is not None:
            if name in self.params.get(scope, ()):
                return None
            self._index(scope)
            if name not in self._binds[scope] and name not in self._changes[scope]:
                scope = None  # a module-level dict
        self._index(scope)
        bound = self._binds[scope].get(name)
        if not bound or any(value is None for value, _ in bound):
            return None
        ways: List[_Dict] = []
        for value, _ in bound:
            got = self.read(value, scope, depth)  # type: ignore[arg-type]
            if got is None:
                return None
            ways += got
        if len(ways) > _MAX_DICTS:
            return None
        for _, change, guards in sorted(self._changes[scope].get(name, ()), key=lambda c: c[0]):
            if change[0] == "set":
                changed: Optional[List[_Dict]] = [({**items, change[1]: change[2]}, complete) for items, complete in ways]
            elif change[0] == "update":
                changed = self._merge_call(change[1], [(dict(items), complete) for items, complete in ways], scope, depth)
            else:
                return None
            if changed is None:
                return None
            # under a condition the bindings are not under: it may or may not happen
            if any(not all(g in bguards for _, bguards in bound) for g in guards):
                ways = ways + changed
            else:
                ways = changed
            if len(ways) > _MAX_DICTS:
                return None
        return ways

    def _merge_call(self, call: ast.Call, ways: List[_Dict], scope: Any, depth: int) -> Optional[List[_Dict]]:
        """`ways` with the entries of `dict(...)` / `d.update(...)` arguments added."""
        for arg in call.args:
            got = self._merge(ways, arg, scope, depth)
            if got is None:
                return None
            ways = got
        for kw in call.keywords:
            if kw.arg is None:
                got = self._merge(ways, kw.value, scope, depth)
                if got is None:
                    return None
                ways = got
            else:
                ways = [({**items, kw.arg: kw.value}, complete) for items, complete in ways]
        return ways

    def _merge(self, ways: List[_Dict], expr: ast.expr, scope: Any, depth: int) -> Optional[List[_Dict]]:
        """`ways` with the entries of the dict `expr` added; an unreadable one makes them incomplete."""
        inner = self.read(expr, scope, depth + 1)
        if inner is None:
            return [(items, False) for items, _ in ways]
        out = [({**items, **more}, a and b) for items, a in ways for more, b in inner]
        return out if len(out) <= _MAX_DICTS else None


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


#: A copy to the GPU in a line; searched in lines joined by newlines (`[^)\n]`: in one of them).
_MOVES = re.compile(r"\.(cuda|to)\(|\.type\([^)\n]*cuda")


def _moved_parameters(functions: Functions, text: str) -> Dict[str, List[str]]:
    """def line -> the parameters a function copies to the GPU (`x.cuda()`, `x.to(device)`,
    `x[0].to(...)`, `x.type(torch.cuda.FloatTensor)`, the values of a dict or list parameter:
    `for k, v in batch.items(): v.to(device)`, `{k: v.cuda() for k, v in batch.items()}`): a batch
    passed to it is moved there."""
    lines = source_lines(text)
    out: Dict[str, List[str]] = {}
    for fn, _ in functions:
        end = getattr(fn, "end_lineno", None) or fn.lineno
        if not _MOVES.search("\n".join(lines[fn.lineno - 1:end])):
            continue
        params = {a.arg for a in (*fn.args.posonlyargs, *fn.args.args, *fn.args.kwonlyargs)}
        moved: List[str] = []
        nodes = walk(fn)
        held = _elements_of(nodes, params)
        for node in nodes:
            if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in ("cuda", "to", "type")):
                continue
            if node.func.attr == "type" and "cuda" not in ast.dump(node):
                continue
            if node.func.attr == "to" and not (node.args or node.keywords):
                continue
            root = node.func.value
            while isinstance(root, (ast.Attribute, ast.Subscript, ast.Call)):
                root = root.func if isinstance(root, ast.Call) else root.value
            name = held.get(root.id, root.id) if isinstance(root, ast.Name) else None
            if name is not None and name in params and name not in ("self", "cls") and name not in moved:
                moved.append(name)
        if moved:
            out[str(fn.lineno)] = moved
    return out


def _elements_of(nodes: List[ast.AST], params: Set[str]) -> Dict[str, str]:
    """Loop variables that hold the elements of a parameter: `for k, v in batch.items()`
    (`v`), `for v in batch.values()`, `for x in batch` (also in comprehensions) -> the parameter."""
    out: Dict[str, str] = {}
    for node in nodes:
        if not isinstance(node, (ast.For, ast.AsyncFor, ast.comprehension)):
            continue
        it, target = node.iter, node.target
        method = None
        if isinstance(it, ast.Call) and isinstance(it.func, ast.Attribute) and not it.args:
            method, it = it.func.attr, it.func.value
        if not isinstance(it, ast.Name) or it.id not in params or method not in (None, "items", "values"):
            continue
        if method == "items":
            if isinstance(target, ast.Tuple) and len(target.elts) == 2 and isinstance(target.elts[1], ast.Name):
                out.setdefault(target.elts[1].id, it.id)
        elif isinstance(target, ast.Name):
            out.setdefault(target.id, it.id)
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
            items = {n.id for n in walk(loop.target) if isinstance(n, ast.Name)}
            inside = {id(s) for s in block_statements(loop.body)}
            if any(id(y) in inside and isinstance(v, ast.Yield) and isinstance(v.value, ast.Name) and v.value.id in items for y, v in found):
                target = it.id
        if target is not None:
            out[str(fn.lineno)] = params.index(target)
    return out


#: Calls a `__getitem__` may make and still only read memory: index arithmetic, tensor conversion
#: and cheap casts or reshapes of what it indexed.
_CHEAP_CALLS = frozenset({"int", "float", "len", "min", "max", "abs", "slice", "tensor", "as_tensor", "from_numpy", "asarray", "array"})
_CHEAP_METHODS = frozenset({"float", "long", "int", "double", "half", "bool", "clone", "squeeze", "unsqueeze", "view", "reshape", "permute", "contiguous", "copy"})
#: What an attribute that reads from storage on every index is made from (an HDF5 or LMDB file, a
#: memory map, a file handle, a Hugging Face dataset): indexing it is not an in-memory read.
_LAZY_STORAGE = re.compile(r"h5py|\.File\(|memmap|mmap|lmdb|zarr|open\(|Reader\(|load_dataset|load_from_disk|tables\.|\.Env\(")
#: Names of what may be another dataset (indexing it runs its `__getitem__`): a wrapper, not data.
_DATASET_NAMES = re.compile(r"dataset|(^|_)ds$|^base|wrapped|inner|subset|source", re.I)
#: Modules whose functions build data in memory (`torch.rand`, `np.stack`, `pd.read_csv(...).values`).
_DATA_MODULES = frozenset({"torch", "np", "numpy", "pd", "pandas", "math", "random"})
_DATA_BUILTINS = frozenset({"list", "tuple", "dict", "set", "sorted", "len", "range", "zip", "enumerate", "int", "float", "str", "sum", "min", "max", "map", "reversed"})
_ARRAY_METHODS = frozenset({
    "float", "long", "int", "double", "half", "bool", "to", "view", "reshape", "tolist", "astype", "values", "numpy",
    "copy", "clone", "split", "chunk", "unsqueeze", "squeeze", "permute", "transpose", "contiguous", "items", "keys",
    "detach", "cpu", "type", "flatten", "append", "extend",
})


def _in_memory_classes(tree: ast.Module, text: str) -> Dict[str, List[str]]:
    """class line -> the attributes its `__getitem__` reads, for the module-level classes whose
    `__getitem__` only indexes attributes of `self` (`return self.data[i]`, `return self.x[i],
    self.y[i]`) that hold data already in memory (built from literals, comprehensions,
    torch/numpy calls, or passed in): worker processes would only copy it. Loading (`Image.open(self.paths[i])`), a transform (`self.transform(x)`), any
    other call, an attribute never assigned in the class, one that may be another dataset
    (`self.dataset[i]`: its `__getitem__` runs) or one read from storage (HDF5, LMDB, a memory
    map, an open file) rules it out; the program also rules out attributes given an instance of a
    project class (a dataset wrapped)."""
    out: Dict[str, List[str]] = {}
    for cls in tree.body:
        if not isinstance(cls, ast.ClassDef):
            continue
        getitem = next((f for f in cls.body if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef)) and f.name == "__getitem__"), None)
        if getitem is None or len(getitem.args.args) < 2 or getitem.decorator_list:
            continue
        this = getitem.args.args[0].arg
        names = {a.arg for a in getitem.args.args[1:]}
        read: Set[str] = set()
        indexed = any(
            isinstance(n, ast.Subscript) and isinstance(n.value, ast.Attribute) and isinstance(n.value.value, ast.Name) and n.value.value.id == this
            for n in walk(getitem)
        )
        if indexed and _indexes_only(getitem.body, this, names, read) and _attributes_in_memory(cls, text, read):
            out[str(cls.lineno)] = sorted(read)
    return out


def _indexes_only(body: List[ast.stmt], this: str, names: Set[str], read: Set[str]) -> bool:
    """Every statement is a docstring, `pass`, a local assignment or a return of plain reads."""
    for i, stmt in enumerate(body):
        if isinstance(stmt, ast.Pass) or (i == 0 and isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant)):
            continue
        if isinstance(stmt, ast.Return):
            if stmt.value is not None and not _plain_read(stmt.value, this, names, read):
                return False
            continue
        if isinstance(stmt, (ast.Assign, ast.AnnAssign)) and stmt.value is not None:
            targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
            bound = [n for t in targets for n in walk(t)]
            if not all(isinstance(n, (ast.Name, ast.Tuple, ast.List, ast.Store)) for n in bound) or not _plain_read(stmt.value, this, names, read):
                return False
            names |= {n.id for n in bound if isinstance(n, ast.Name)}
            continue
        return False
    return True


def _plain_read(node: ast.AST, this: str, names: Set[str], read: Set[str]) -> bool:
    """Indexing, arithmetic and containers over the index, local names and `self` attributes."""
    if isinstance(node, ast.Constant):
        return True
    if isinstance(node, ast.Name):
        return node.id in names
    if isinstance(node, ast.Attribute):
        if isinstance(node.value, ast.Name) and node.value.id == this:
            read.add(node.attr)
            return True
        return _plain_read(node.value, this, names, read)
    if isinstance(node, ast.Call):
        func = node.func
        if isinstance(func, ast.Name):
            ok = func.id in _CHEAP_CALLS
        elif isinstance(func, ast.Attribute):
            base = func.value
            ok = (func.attr in _CHEAP_CALLS and isinstance(base, ast.Name) and base.id in ("torch", "np", "numpy")) or (
                func.attr in _CHEAP_METHODS and _plain_read(base, this, names, read)
            )
        else:
            ok = False
        return ok and all(_plain_read(a, this, names, read) for a in node.args) and all(_plain_read(k.value, this, names, read) for k in node.keywords)
    if isinstance(node, (ast.Subscript, ast.Slice, ast.Tuple, ast.List, ast.Dict, ast.BinOp, ast.UnaryOp, ast.Compare, ast.BoolOp, ast.IfExp, ast.Starred)):
        return all(_plain_read(c, this, names, read) for c in ast.iter_child_nodes(node) if not isinstance(c, (ast.expr_context, ast.operator, ast.unaryop, ast.cmpop, ast.boolop)))
    return False


def _attributes_in_memory(cls: ast.ClassDef, text: str, read: Set[str]) -> bool:
    """Every attribute `__getitem__` reads is assigned in the class, only ever to data in memory."""
    values: Dict[str, List[ast.AST]] = {}
    for node in walk(cls):
        if isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None:
            for t in node.targets if isinstance(node, ast.Assign) else [node.target]:
                if isinstance(t, ast.Attribute) and t.attr in read:
                    values.setdefault(t.attr, []).append(node.value)
    for attr in read:
        if attr not in values or _DATASET_NAMES.search(attr):
            return False
        for value in values[attr]:
            if _LAZY_STORAGE.search(ast.get_source_segment(text, value) or "") or not _data_value(value):
                return False
    return True


def _data_value(node: ast.AST) -> bool:
    """Literals, comprehensions, names not named like a dataset, torch/numpy/pandas calls and
    array methods: data built in memory."""
    for sub in walk(node):
        if isinstance(sub, ast.Name) and _DATASET_NAMES.search(sub.id):
            return False
        if not isinstance(sub, ast.Call):
            continue
        func = sub.func
        if isinstance(func, ast.Name):
            if func.id not in _DATA_BUILTINS:
                return False
        elif isinstance(func, ast.Attribute):
            root = func.value
            while isinstance(root, (ast.Attribute, ast.Subscript, ast.Call)):
                root = root.func if isinstance(root, ast.Call) else root.value
            if not (isinstance(root, ast.Name) and root.id in _DATA_MODULES) and func.attr not in _ARRAY_METHODS:
                return False
        else:
            return False
    return True


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
    from speedlint.analyzer.settings_use import add_unused_setting_seeds

    out = _Seeds(seeds, new_seeds)
    _loader_classes(hot, out)
    _iter_wrappers(hot, out)
    _distributed(hot, out)
    _in_memory(hot, out)
    flow = add_config_seeds(hot, seeds, new_seeds, config_files)
    add_unused_setting_seeds(hot, out.project, flow)  # SPD704 (`settings_use`)


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
    for fid, names in params.items():
        chosen = sorted(n for n, ok in names.items() if ok)
        if chosen:
            mid = p.functions[fid][0]
            facts = seeds.project(p.modules[mid].shown).setdefault("in_memory", {})
            facts.setdefault("params", {})[str(p.local_index[fid])] = chosen
    for mid, lines in call_lines.items():
        facts = seeds.project(p.modules[mid].shown).setdefault("in_memory", {})
        facts["calls"] = sorted(lines)
    for mid, names in _class_names(p, classes).items():
        seeds.project(p.modules[mid].shown).setdefault("in_memory", {})["classes"] = names


def _in_memory_class_ids(p: Any) -> Set[int]:
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


def _class_names(p: Any, classes: Set[int]) -> Dict[int, List[str]]:
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

    def __init__(self, p: Any, returning: Set[int], classes: Set[int]) -> None:
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
