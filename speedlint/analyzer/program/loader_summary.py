"""Per-file facts for the data-loading rules (`loader_summary`, part of each file's summary):
functions that return an in-memory dataset, dataset classes whose `__getitem__` only indexes data
held in memory, how loader calls unpack dicts (`_splat_keywords`), parameters functions copy to
the GPU, generators that wrap an iterable, and whether the file starts distributed training. The
whole-program side is `data`.
"""

from __future__ import annotations

import ast
import re
from typing import Any, Dict, Iterable, List, Optional, Set, Tuple

from speedlint.analyzer.configs.summary import all_statements, block_statements, walk
from speedlint.analyzer.program.schema import SPLAT as _NOT_FOLLOWED  # a keyword whose value is not followed
from speedlint.analyzer.sources import source_lines
from speedlint.analyzer.textscan import has_word
from speedlint.analyzer.vocabulary import DISTRIBUTED_WORDS as _DISTRIBUTED_WORDS
from speedlint.analyzer.vocabulary import LOADER_TRIGGERS as _LOADER_ENDINGS
from speedlint.analyzer.vocabulary import PINNED_ON_GPU as _PINNED_ON_GPU
from speedlint.analyzer.vocabulary import dotted_name

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
    if "pin_memory" in text:
        pins = _pinned_on_gpu(tree, text)
        if pins:
            out["pin_kws"] = pins
    if has_word(text, *_DISTRIBUTED_WORDS):  # (`vocabulary.DISTRIBUTED.search(text)`, exactly)
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


def _pinned_on_gpu(tree: ast.Module, text: str) -> Dict[str, Dict[str, Any]]:
    """call line -> `{"pin_memory": ["k", True]}` for the loader calls whose `pin_memory=` is
    true on the GPU path (`PINNED_ON_GPU`: `device != "cpu"`, `torch.cuda.is_available()`, a
    name that the function binds only to such an expression): pinned where a blocking copy to the
    GPU costs (`Hotness.loader_uses`, for loops over the loader in other modules)."""
    out: Dict[str, Dict[str, Any]] = {}
    scopes = _Scopes(tree)
    for scope, statements in scopes.statements.items():
        for stmt, _ in statements:
            for call in _own_calls(stmt):
                name = dotted_name(call.func)
                pin = next((k.value for k in call.keywords if k.arg == "pin_memory"), None)
                if pin is None or isinstance(pin, ast.Constant) or name is None or not name.endswith(_LOADER_ENDINGS):
                    continue
                values: List[ast.expr] = [pin]
                if isinstance(pin, ast.Name) and not _PINNED_ON_GPU.search(pin.id):  # `pin = device != "cpu"`
                    values = scopes.values_of(pin.id, scope)
                if values and all(_PINNED_ON_GPU.search(ast.get_source_segment(text, v) or "") for v in values):
                    out[str(call.lineno)] = {"pin_memory": ["k", True]}
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

    def values_of(self, name: str, scope: Any) -> List[ast.expr]:
        """What a name is bound to in its scope (the function, else the module): [] when some
        binding is not an assignment of a value (a parameter, a loop variable, an unpacking)."""
        if scope is not None and name in self.params.get(scope, ()):
            return []
        self._index(scope)
        if scope is not None and name not in self._binds[scope]:
            scope = None
            self._index(scope)
        bound = self._binds[scope].get(name) or []
        return [v for v, _ in bound] if bound and all(v is not None for v, _ in bound) else []  # type: ignore[misc]

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
        if params <= {"self", "cls"}:
            continue  # (only a parameter other than these is noted: nothing to look for)
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

