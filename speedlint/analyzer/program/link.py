"""The link step of the program model (`Program`): module names from the layout (packages, `src/`,
a script's siblings), imports and re-exports resolved to project modules, classes with bases
across files, and a flow-insensitive type inference of the values that matter for calls
(instances of project classes, project functions, modules) through assignments, `self`
attributes, parameters (from every call site) and return values. Calls resolve through them:
`obj(...)` runs `forward` (or `__call__`), `obj.meth()` the method found along the bases,
`Cls(...)` its `__init__`. A module loaded by name (`importlib.import_module("losses." + name)`,
`import_module(args.model)`) is each module it may load (`plugins`). Unresolvable calls and
recursion end quietly: no guess.

What a file's rules get from the whole program (`FileSeeds`, `Hop`) lives in `seeds`.
"""

from __future__ import annotations

import itertools
import os
from types import MappingProxyType
from typing import AbstractSet, Any, Dict, FrozenSet, Iterable, List, Mapping, Optional, Sequence, Set, Tuple

from speedlint.analyzer.program.schema import C_ARGS, C_FLAGS, C_FUNC, C_KWS, WITH_ITEM
from speedlint.analyzer.program.plugins import plugin_modules
from speedlint.analyzer.program.summary import _callee_tail
from speedlint.analyzer.records import RECORD_CALLS
from speedlint.analyzer.vocabulary import LOADER_NAMES

#: Containers whose calls give back what they hold (`nn.ModuleList([Block(), ...])`).
_CONTAINERS = frozenset({"ModuleList", "Sequential", "ModuleDict", "ParameterList", "list", "tuple", "dict", "set", "sorted", "reversed", "iter", "enumerate", "zip", "tqdm", "cycle", "chain"})
_NOTHING: FrozenSet[str] = frozenset()  # the type of most names and attributes of a big program
#: The parameter types of a function given none, and the callers of one nothing calls (shared).
_NO_TYPES: Mapping[str, Set[str]] = MappingProxyType({})
_NO_CALLERS: Tuple[Tuple[int, int], ...] = ()

#: Base classes (last dotted part) that make a class a torch module.
_MODULE_BASES = frozenset({"Module", "Sequential", "ModuleList", "ModuleDict", "LightningModule", "MessagePassing"})
#: `nn.Module` methods that return the module itself.
_RETURNS_SELF = frozenset({"to", "cuda", "cpu", "train", "eval", "float", "half", "double", "bfloat16", "type", "requires_grad_", "share_memory", "apply", "to_empty"})


#: `Program._forwarded_elements`: a callee's returned positions are not known yet.
_NOT_YET = object()

#: A call that may run more functions than this, or a value that may be more things than this,
#: is not followed further: that is a guess, not an analysis.
MAX_TARGETS, MAX_TYPES = 4, 8


# -- the link step --------------------------------------------------------------------------------
class _Module:
    __slots__ = ("id", "path", "folder", "shown", "name", "root", "summary", "is_package", "fids", "cids", "fids_by_q", "globals_env")

    def __init__(self, mid: int, path: str, shown: str, summary: Dict[str, Any]) -> None:
        self.id = mid
        self.path = path
        self.folder = os.path.dirname(path)
        self.shown = shown
        self.summary = summary
        self.name = ""
        self.root = ""
        self.is_package = os.path.basename(path) == "__init__.py"
        self.fids: List[int] = []
        self.cids: Dict[str, int] = {}
        self.fids_by_q: Dict[str, List[int]] = {}  # qualified name -> its functions (redefinitions too)
        self.globals_env: Dict[str, Set[str]] = {}


def module_names(paths: Iterable[str]) -> Dict[str, Tuple[str, str]]:
    """path -> (dotted module name, the folder it is importable from), from the package layout."""
    known = set(paths)
    out: Dict[str, Tuple[str, str]] = {}
    folder_is_package: Dict[str, bool] = {}

    def is_package(folder: str) -> bool:
        got = folder_is_package.get(folder)
        if got is None:
            init = os.path.join(folder, "__init__.py")
            got = folder_is_package[folder] = init in known or os.path.isfile(init)
        return got

    for path in known:
        folder, base = os.path.split(path)
        stem = base[:-3] if base.endswith(".py") else base
        parts = [] if stem == "__init__" else [stem]
        while is_package(folder):
            folder, pkg = os.path.split(folder)
            parts.insert(0, pkg)
            if not pkg:
                break
        out[path] = (".".join(parts), folder)
    return out


class Program:
    """The linked project: resolution, types and hotness over every file's summary."""

    ROUNDS = 4
    #: classes with more subclasses than this are taken as themselves in their methods (`_selves`)
    MAX_SUBCLASSES = 32

    def __init__(self, files: Sequence[Tuple[str, str, Dict[str, Any]]]) -> None:
        """`files`: (absolute path, display path, summary) for every parsable file of the run."""
        self.modules: List[_Module] = []
        #: attribute records (`Munch(encoder=enc)`, see `speedlint.analyzer.records`): type -> fields
        self.records: Dict[str, Dict[str, Any]] = {}
        self._records_busy: Set[str] = set()
        self.functions: List[Tuple[int, Dict[str, Any]]] = []  # fid -> (module id, summary)
        self.classes: List[Tuple[int, str, Dict[str, Any]]] = []  # cid -> (module id, qualname, summary)
        names = module_names(p for p, _, _ in files)
        self.by_name: Dict[str, List[int]] = {}
        self.by_path: Dict[str, int] = {}
        for path, shown, summary in files:
            m = _Module(len(self.modules), path, shown, summary)
            m.name, m.root = names[path]
            self.modules.append(m)
            self.by_name.setdefault(m.name, []).append(m.id)
            self.by_path[path] = m.id
            for fn in summary["functions"]:
                m.fids.append(len(self.functions))
                m.fids_by_q.setdefault(fn["q"], []).append(len(self.functions))
                self.functions.append((m.id, fn))
            for q, c in summary["classes"].items():
                m.cids[q] = len(self.classes)
                self.classes.append((m.id, q, c))
        n = len(self.functions)
        self.local_index: List[int] = [0] * n  # fid -> its ordinal in its module
        for m in self.modules:
            for k, fid in enumerate(m.fids):
                self.local_index[fid] = k
        self.fn_class: List[Optional[int]] = [None] * n
        for fid, (mid, fn) in enumerate(self.functions):
            if fn["cls"] is not None:
                self.fn_class[fid] = self.modules[mid].cids.get(fn["cls"])
        #: the memoised types, read-only and shared: equal ones are one frozenset (`_shared`)
        self._symbol_memo: Dict[Tuple[int, str], FrozenSet[str]] = {}
        #: The memoised names and attributes that no round can change, kept from round to round:
        #: what only imports, definitions and methods give (no module global, no attribute type,
        #: no record, no cycle's placeholder, no depth cut, in any name it was resolved through).
        #: Exact: computed again they are the same, and whatever reads them reads the same.
        self._fixed_symbols: Dict[Tuple[int, str], FrozenSet[str]] = {}
        self._fixed_attrs: Dict[Tuple[str, str], FrozenSet[str]] = {}
        self._symbol_fixed = True  # (while `symbol` resolves a name: no round can change it)
        self._sets: Dict[FrozenSet[str], FrozenSet[str]] = {}
        self._mro: Dict[int, List[int]] = {}
        self._used: Dict[int, FrozenSet[str]] = {}
        self._method_memo: Dict[Tuple[int, str, bool], Optional[int]] = {}
        self._attr_memo: Dict[Tuple[str, str], FrozenSet[str]] = {}
        self._nested_memo: Dict[Tuple[int, str], FrozenSet[str]] = {}  # (function, name) -> a def inside
        #: functions that may hold a nested def (some function's qualified name extends theirs by
        #: one part): `eval` asks `_nested_def` only in these and in nested functions (in the
        #: others it has nothing: no memo entry for each name they read)
        self._encloses: Set[int] = {
            fid for m in self.modules for q in m.fids_by_q for fid in m.fids_by_q.get(q.rpartition(".")[0], ())
        }
        #: (module id, name, level) of a relative import, (folder, root, name) of an absolute one
        self._module_memo: Dict[Tuple[Any, str, Any], Optional[int]] = {}
        self._module_class_memo: Dict[int, bool] = {}
        self._loader_class_memo: Dict[int, bool] = {}
        self.bases: List[List[int]] = [self._resolve_bases(cid) for cid in range(len(self.classes))]
        self.base_names: List[Set[str]] = [self._external_bases(cid) for cid in range(len(self.classes))]
        self.subclasses: Dict[int, Set[int]] = {}
        self._selves_memo: Dict[int, Tuple[FrozenSet[str], FrozenSet[str]]] = {}
        self._outer_memo: Dict[int, Dict[str, Set[str]]] = {}  # per round: enclosing functions' names
        for cid in range(len(self.classes)):
            for anc in self.mro(cid)[1:]:
                self.subclasses.setdefault(anc, set()).add(cid)
        # function id -> parameter -> the types it may hold: only the functions given some
        self.param_types: Dict[int, Dict[str, Set[str]]] = {}
        #: fid -> parameter -> the types of each position of the literal sequence every call gives
        #: it (None: some call gives something else)
        self.param_elems: Dict[int, Dict[str, Optional[List[AbstractSet[str]]]]] = {}
        #: fid -> the types of each position of the literal tuple it always returns (None: not one)
        self.ret_elems: Dict[int, Optional[List[Set[str]]]] = {}
        self.attr_types: Dict[int, Dict[str, Set[str]]] = {}
        self.ret_types: List[FrozenSet[str]] = [_NOTHING] * n
        self.edges: List[List[Tuple[int, int]]] = [[] for _ in range(n)]  # fid -> [(call index, callee fid)]
        self.module_edges: List[List[Tuple[int, int]]] = [[] for _ in self.modules]
        #: what each function read in its latest visit of the rounds, flat: kind, key, key, value
        #: for each (`_inputs_unchanged`)
        self._inputs: List[Tuple[Any, ...]] = [()] * n
        #: what the visit under way reads: (kind, key, key) -> the value (`_input`)
        self._reads: Optional[Dict[Tuple[str, Any, Any], Any]] = None
        self._param_version: List[int] = [0] * n  # counts the changes of `param_types[fid]`
        self._ret_elems_version: List[int] = [0] * n  # and of `ret_elems[fid]`
        self._infer()

    # -- names and modules ----------------------------------------------------------------------
    def _find_module(self, mid: int, name: str, level: int) -> Optional[int]:
        m = self.modules[mid]
        # an absolute import is found the same from every module of a folder
        key = (mid, name, level) if level else (m.folder, m.root, name)
        if key in self._module_memo:
            return self._module_memo[key]
        found: Optional[int] = None
        if level:
            package = m.name.split(".") if m.is_package else m.name.split(".")[:-1]
            if level > 1:
                package = package[: len(package) - (level - 1)]
            full = ".".join([*package, name] if name else package)
            found = self._by_name_in(full, m.root)
        else:
            found = self._by_name_in(name, m.root)
            if found is None and name:  # a namespace package (a folder without __init__.py)
                base = m.folder
                for _ in range(5):  # the importing file's folder and the ones above it
                    stem = os.path.join(base, *name.split("."))
                    found = self.by_path.get(stem + ".py", self.by_path.get(os.path.join(stem, "__init__.py")))
                    if found is not None:
                        break
                    base = os.path.dirname(base)
            if found is None:
                candidates = self.by_name.get(name, [])
                if len(candidates) == 1:
                    found = candidates[0]
                elif candidates:  # the closest one to the importing file
                    best = max(candidates, key=lambda c: len(os.path.commonpath([m.folder, self.modules[c].path])))
                    found = best
        self._module_memo[key] = found
        return found

    def _by_name_in(self, name: str, root: str) -> Optional[int]:
        for c in self.by_name.get(name, ()):
            if self.modules[c].root == root:
                return c
        return None

    def symbol(self, mid: int, name: str, depth: int = 0) -> AbstractSet[str]:
        """What a module-level name of module `mid` may be: F:fid, C:cid, M:mid, or instances."""
        key = (mid, name)
        got = self._symbol_memo.get(key)
        if got is not None:
            if key not in self._fixed_symbols:
                self._symbol_fixed = False  # (one of the round, or a cycle's placeholder)
            return got
        if depth > 12:
            self._symbol_fixed = False
            return set()
        around, self._symbol_fixed = self._symbol_fixed, True
        self._symbol_memo[key] = _NOTHING  # cycles end quietly
        m = self.modules[mid]
        s = m.summary
        out: Set[str] = set()
        for fid in m.fids_by_q.get(name, ()):
            out.add(f"F:{fid}")
        cid = m.cids.get(name)
        if cid is not None:
            out.add(f"C:{cid}")
        if not out:
            imp = s["imports"].get(name)
            if imp is not None:
                if imp[0] == "mod":
                    target = self._find_module(mid, imp[1], 0)
                    if target is not None:
                        out.add(f"M:{target}")
                else:
                    _, module, level, orig = imp
                    target = self._find_module(mid, module, level)
                    if target is not None:
                        out |= self.symbol(target, orig, depth + 1)
                        if not out:  # `from pkg import submodule`
                            sub = self._find_module(mid, f"{module}.{orig}" if module else orig, level)
                            if sub is not None:
                                out.add(f"M:{sub}")
                    elif level or module:
                        sub = self._find_module(mid, f"{module}.{orig}" if module else orig, level)
                        if sub is not None:
                            out.add(f"M:{sub}")
            elif name in s["module"]["assign"]:
                self._symbol_fixed = False  # module globals grow from round to round
                out |= m.globals_env.get(name, set())
            elif s["star"] and not name.startswith("_"):
                # `from m import *` of a project module: the names it defines (its literal
                # `__all__` when it has one), exactly as Python binds them; nothing for others
                for module, level in s["star"]:
                    target = self._find_module(mid, module, level)
                    if target is not None and self._exports(target, name):
                        out |= self.symbol(target, name, depth + 1)
        got = self._symbol_memo[key] = self._shared(out)
        if self._symbol_fixed:
            self._fixed_symbols[key] = got
        self._symbol_fixed = around and self._symbol_fixed
        return got

    def _shared(self, types: AbstractSet[str]) -> FrozenSet[str]:
        """`types` as the one read-only set equal to it: a program of 40,000 functions memoises
        about 150,000 types, of which 10% differ and 60% are empty."""
        if not types:
            return _NOTHING
        frozen = frozenset(types)
        return self._sets.setdefault(frozen, frozen)

    def _exports(self, mid: int, name: str) -> bool:
        """Whether `from <module mid> import *` binds `name`."""
        declared = self.modules[mid].summary["module"]["assign"].get("__all__")
        if declared:
            names = {e[1] for v in declared if v and v[0] == "t" for e in v[1] if e and e[0] == "k"}
            return name in names
        return True

    def _external_name(self, mid: int, expr: Any) -> str:
        """The dotted name an expression stands for, through this module's imports."""
        if expr is None:
            return ""
        if expr[0] == "n":
            imp = self.modules[mid].summary["imports"].get(expr[1])
            if imp is None:
                return expr[1]
            if imp[0] == "mod":
                return imp[1]
            return f"{imp[1]}.{imp[3]}" if imp[1] else imp[3]
        if expr[0] == "a":
            base = self._external_name(mid, expr[1])
            return f"{base}.{expr[2]}" if base else ""
        return ""

    def _resolve_bases(self, cid: int) -> List[int]:
        mid, q, c = self.classes[cid]
        out = []
        for b in c["bases"]:
            for obj in sorted(self._eval_static(mid, b)):
                if obj.startswith("C:"):
                    out.append(int(obj[2:]))
        return out

    def _external_bases(self, cid: int) -> Set[str]:
        mid, q, c = self.classes[cid]
        return {self._external_name(mid, b) for b in c["bases"]} - {""}

    def _eval_static(self, mid: int, expr: Any) -> AbstractSet[str]:
        """Names and attributes of modules only (class bases, decorators)."""
        if expr is None:
            return set()
        if expr[0] == "n":
            return self.symbol(mid, expr[1])
        if expr[0] == "a":
            out: Set[str] = set()
            for o in self._eval_static(mid, expr[1]):
                if o.startswith("M:"):
                    out |= self.symbol(int(o[2:]), expr[2])
            return out
        return set()

    def mro(self, cid: int) -> List[int]:
        got = self._mro.get(cid)
        if got is not None:
            return got
        out: List[int] = []
        todo = [cid]
        while todo:
            c = todo.pop(0)
            if c in out:
                continue
            out.append(c)
            todo.extend(self.bases[c])
        self._mro[cid] = out
        return out

    def is_loader_class(self, cid: int) -> bool:
        """A project subclass of a data loader (GraphSAINT-style samplers are DataLoaders)."""
        got = self._loader_class_memo.get(cid)
        if got is None:
            got = self._loader_class_memo[cid] = any(name.rsplit(".", 1)[-1] in LOADER_NAMES for name in self.all_base_names(cid))
        return got

    def loader_modules(self) -> Set[int]:
        """The modules that call a data loader class by its name (torch's, the graph libraries',
        a project subclass), or make a `functools.partial` of one."""
        names = set(LOADER_NAMES) | {q.rsplit(".", 1)[-1] for cid, (_, q, _) in enumerate(self.classes) if self.is_loader_class(cid)}

        def builds(call: Any) -> bool:
            tail = _callee_tail(call[C_FUNC])
            args = call[C_ARGS]
            return tail in names or (tail == "partial" and bool(args) and args[0] is not None and _callee_tail(args[0]) in names)

        out: Set[int] = set()
        for m in self.modules:
            if any(builds(c) for body in (m.summary["module"], *m.summary["functions"]) for c in body["calls"]):
                out.add(m.id)
        return out

    def is_module_class(self, cid: int) -> bool:
        """A project subclass of `torch.nn.Module` (directly or through any `torch.nn` class)."""
        got = self._module_class_memo.get(cid)
        if got is None:
            got = self._module_class_memo[cid] = any(
                name.rsplit(".", 1)[-1] in _MODULE_BASES or name.startswith(("torch.nn.", "nn."))
                for name in self.all_base_names(cid)
            )
        return got

    def all_base_names(self, cid: int) -> Set[str]:
        names: Set[str] = set()
        for c in self.mro(cid):
            names |= self.base_names[c]
        return names

    def method(self, cid: int, name: str, skip_self: bool = False) -> Optional[int]:
        key = (cid, name, skip_self)
        if key in self._method_memo:
            return self._method_memo[key]
        found = None
        for c in self.mro(cid)[1 if skip_self else 0:]:
            mid, q, summ = self.classes[c]
            idx = summ["methods"].get(name)
            if idx is not None:
                found = self.modules[mid].fids[idx]
                break
        self._method_memo[key] = found
        return found

    # -- type inference -------------------------------------------------------------------------
    def _infer(self) -> None:
        for m in self.modules:  # module globals first (no parameters there)
            m.globals_env = {}
        for round_ in range(self.ROUNDS):
            changed = False
            for m in self.modules:
                env = self._local_env(m.id, None, m.summary["module"])
                for k, v in env.items():
                    if not v <= m.globals_env.get(k, set()):
                        m.globals_env.setdefault(k, set()).update(v)
                        changed = True
            self._symbol_memo.clear()  # module globals may have grown
            self._symbol_memo.update(self._fixed_symbols)
            self._outer_memo.clear()
            self._attr_memo.clear()  # attribute types grow from round to round
            self._attr_memo.update(self._fixed_attrs)
            self._sets.clear()
            for fid, (mid, fn) in enumerate(self.functions):
                if round_ and self._inputs_unchanged(fid):
                    continue  # its visit would give what it gave last time: nothing new
                if self._visit_function(fid, mid, fn):
                    changed = True
            if not changed:
                break  # the edges of this round are final
        # what only the rounds needed (asked again later, it is computed again)
        self._inputs = []
        self._used.clear()
        self._attr_memo.clear()
        self._fixed_symbols, self._fixed_attrs = {}, {}  # (memory: now they change nothing)
        self._outer_memo.clear()
        self._sets.clear()
        # (one empty tuple for every function nothing calls: most of a large program's)
        callers: List[List[Tuple[int, int]]] = [_NO_CALLERS] * len(self.functions)  # type: ignore[list-item]
        for fid, edges in enumerate(self.edges):
            for call_index, callee in edges:
                if callers[callee] is _NO_CALLERS:
                    callers[callee] = []
                callers[callee].append((fid, call_index))
        self.callers: Sequence[Sequence[Tuple[int, int]]] = callers

    def _inputs_unchanged(self, fid: int) -> bool:
        """Whether every input of the latest visit of `fid` (the types it read: its parameters',
        the returns, attributes and module names it used, ...) reads the same now. Then a visit
        would compute what that one did, and what it would add (unions) is there already. The
        inputs are read again in the order the visit first read them, up to the first that
        differs: the round's memos (attribute types, module names, closures' names), which
        whatever asks first fills, are filled at the same points and with the same values as a
        visit of every function would fill them, and each round ends as evaluating every
        function would end it. (A name or attribute no round can change, `_fixed_symbols`, is
        no input: it reads the same, and its memo is filled from round to round.)"""
        inputs = iter(self._inputs[fid])
        attrs, symbols = self._attr_memo, self._symbol_memo
        got: Any  # (each kind its own type, as `seen`)
        for kind, a, b, seen in zip(inputs, inputs, inputs, inputs):
            # the two most read kinds through their memos in place (as `_attr` and `symbol` do)
            if kind == "a":
                got = attrs.get((a, b))
                if got is None:
                    got = self._attr(a, b)
            elif kind == "s":
                got = symbols.get((a, b))
                if got is None:
                    got = self.symbol(a, b)
            else:
                got = self._input(fid, kind, a, b)
            if got is not seen and got != seen:
                return False
        return True

    def _input(self, fid: int, kind: str, a: Any, b: Any) -> Any:
        """What the input `kind` `a` `b` of a visit of `fid` is now (`_reads`). (The kinds most
        read come first.)"""
        if kind == "m":  # a parameter may be many things already
            got: Optional[AbstractSet[str]] = self.param_types.get(a, _NO_TYPES).get(b)
            return got is not None and len(got) > MAX_TYPES
        if kind == "x":  # some call does not give a parameter a literal sequence
            known = self.param_elems.get(a, {})
            return b in known and known[b] is None
        if kind == "s":  # a module-level name of a module
            return self.symbol(a, b)
        if kind == "a":  # an attribute of an object
            return self._attr(a, b)
        if kind == "p":  # the function's parameters (a version)
            return self._param_version[fid]
        if kind == "r":  # what a function returns
            return self.ret_types[a]
        if kind == "e":  # each position of the literal tuple a function returns (a version)
            return self._ret_elems_version[a]
        if kind == "o":  # a name of an enclosing function (a copy: the set may grow after)
            return frozenset(self._outer_name(a, b))
        if kind == "q":  # a position of the literal sequence a parameter is given (a copy)
            got = self._param_element(fid, a, b)
            return None if got is None else frozenset(got)
        raise ValueError(kind)

    def _read(self, fid: int, kind: str, a: Any, b: Any) -> Any:
        got = self._input(fid, kind, a, b)
        if self._reads is not None:
            self._reads.setdefault((kind, a, b), got)
        return got

    def _local_env(self, mid: int, fid: Optional[int], fn: Dict[str, Any]) -> Dict[str, Set[str]]:
        env: Dict[str, Set[str]] = {}
        if fid is not None:
            if self._reads is not None:
                self._reads.setdefault(("p", None, None), self._param_version[fid])
            for p, t in self.param_types.get(fid, _NO_TYPES).items():
                env[p] = set(t)
            cid = self.fn_class[fid]
            if cid is not None and fn["params"] and not fn.get("static"):
                kinds = self._selves(cid)
                is_classmethod = any(d == ("n", "classmethod") for d in fn["dec"])
                env[fn["params"][0]] = set(kinds[1] if is_classmethod else kinds[0])
        assigns = fn["assign"]
        for _ in range(2):  # a = B(); c = a  (flow-insensitive, two passes settle most chains)
            for name, values in assigns.items():
                got = env.setdefault(name, set())
                for v in values:
                    if v is None:
                        continue  # (nothing: as `eval` gives)
                    if v[0] == "n":  # `c = a` of a name here: its types, as `eval` gives them
                        known = env.get(v[1])
                        if known is not None:
                            got |= known
                            continue
                    got |= self.eval(mid, fid, v, env)
        return env

    def _selves(self, cid: int) -> Tuple[FrozenSet[str], FrozenSet[str]]:
        """What `self` (and `cls`) may be in a method of class `cid`: an instance of it or of any
        subclass, so that `self.step()` reaches the overrides. A class with more than
        `MAX_SUBCLASSES` subclasses (a library base such as `PreTrainedModel`, with 1,354 in
        transformers) is taken as itself alone: every attribute read in its methods would
        otherwise be evaluated once per subclass."""
        got = self._selves_memo.get(cid)
        if got is None:
            subs = self.subclasses.get(cid, ())
            family = (cid, *subs) if len(subs) <= self.MAX_SUBCLASSES else (cid,)
            got = self._selves_memo[cid] = (frozenset(f"I:{c}" for c in family), frozenset(f"C:{c}" for c in family))
        return got

    def _outer_env(self, mid: int, fid: int, fn: Dict[str, Any]) -> Dict[str, Set[str]]:
        """The names of a function that closures defined in it read (once per round)."""
        got = self._outer_memo.get(fid)
        if got is None:
            self._outer_memo[fid] = {}  # a closure read while it is computed: nothing yet
            reads, self._reads = self._reads, None  # its reader notes the value it reads
            try:
                got = self._outer_memo[fid] = self._local_env(mid, fid, fn)
            finally:
                self._reads = reads
        return got

    def _outer_name(self, ofid: int, name: str) -> Set[str]:
        """What `name` of the enclosing function `ofid` may be, for a closure."""
        omid, ofn = self.functions[ofid]
        got = self._outer_env(omid, ofid, ofn).get(name, set())
        if self._reads is not None:
            self._reads.setdefault(("o", ofid, name), frozenset(got))
        return got

    def eval(self, mid: int, fid: Optional[int], expr: Any, env: Dict[str, Set[str]], depth: int = 0) -> AbstractSet[str]:
        if expr is None or depth > 10:
            return set()
        tag = expr[0]
        if tag == "n":
            name = expr[1]
            got: Optional[AbstractSet[str]] = env.get(name)  # (an environment holds sets, never None)
            if got is not None:
                return got
            if fid is not None:
                fn = self.functions[fid][1]
                outer = fn.get("outer")
                if outer is not None:  # a closure reads its enclosing function's names
                    for ofid in self.modules[mid].fids_by_q.get(outer, ()):
                        ofn = self.functions[ofid][1]
                        if name in ofn["assign"]:
                            return self._outer_name(ofid, name)
                if outer is not None or fid in self._encloses:  # (else no def inside it or around it)
                    # (the memos read in place: the same values `_nested_def` and `symbol` give;
                    # they hold read-only sets, as those give them)
                    nested_memo: Dict[Any, Any] = self._nested_memo
                    nested = nested_memo.get((fid, name))
                    if nested is None:
                        nested = self._nested_def(mid, fid, name)
                    if nested:
                        return nested
            # A name no round can change is no input of the visit (`_inputs_unchanged` would
            # find it the same, and fill no memo: it is kept from round to round).
            at = (mid, name)
            fixed: Dict[Any, Any] = self._fixed_symbols
            got = fixed.get(at)
            if got is not None:
                return got
            symbols: Dict[Any, Any] = self._symbol_memo
            got = symbols.get(at)
            if got is None:
                got = self.symbol(mid, name)
            if self._reads is not None and at not in fixed:
                self._reads.setdefault(("s", mid, name), got)
            return got
        if tag == "a":
            out: Set[str] = set()
            reads = self._reads
            attr = expr[2]
            memo: Dict[Any, Any] = self._attr_memo
            base = expr[1]
            # (a name of the environment, the most common base, read in place: as `eval` reads it)
            objs: Optional[AbstractSet[str]] = env.get(base[1]) if base is not None and base[0] == "n" and depth < 10 else None
            if objs is None:
                objs = self.eval(mid, fid, base, env, depth + 1)
            fixed_attrs: Dict[Any, Any] = self._fixed_attrs
            for o in objs:
                key = (o, attr)
                got = fixed_attrs.get(key)  # (as for names above: no input of the visit)
                if got is None:
                    got = memo.get(key)
                    if got is None:
                        got = self._attr(o, attr)
                    if reads is not None and key not in fixed_attrs:
                        reads.setdefault(("a", o, attr), got)
                out |= got
            return out
        if tag == "c":
            out = set()
            func = expr[1]
            objs = env.get(func[1]) if func[0] == "n" and depth < 10 else None  # (as above)
            if objs is None:
                objs = self.eval(mid, fid, func, env, depth + 1)
            for o in objs:
                out |= self._call_result(o)
                if o[0] in "FB":  # a generator that yields the items of an argument (`log_every(loader)`)
                    index = self.functions[int(o[2:])][1].get("yields")
                    if index is not None and 0 <= index - (o[0] == "B") < len(expr[2]):
                        out |= self.eval(mid, fid, expr[2][index - (o[0] == "B")], env, depth + 1)
            tail = _callee_tail(func)
            if len(expr) > 4 and (tail in LOADER_NAMES or (out and any(o[0] == "C" and self.is_loader_class(int(o[2:])) for o in out))):
                out.add(f"L:{mid}:{expr[4]}")  # a data loader built here
            if func[0] == "a" and tail in _RETURNS_SELF:  # `Net(...).to(device)` is the Net
                out |= {o for o in self.eval(mid, fid, func[1], env, depth + 1) if o[0] == "I"}
            if tail in RECORD_CALLS and len(expr) > 4 and expr[3]:
                out.add(self._record_type(mid, fid, expr))  # `Munch(encoder=enc, ...)`: fields by name
            if tail in _CONTAINERS or tail == "partial":
                for a in expr[2]:
                    out |= self.eval(mid, fid, a, env, depth + 1)
                out |= self.eval(mid, fid, expr[3].get("*"), env, depth + 1)
            return out
        if tag == "k":  # a constant (the most common tag left)
            return set()
        if tag in ("s", "e"):
            return self.eval(mid, fid, expr[1], env, depth + 1)
        if tag == "i":
            inner = expr[1]
            if inner is not None and inner[0] == "t" and expr[2] < len(inner[1]):
                return self.eval(mid, fid, inner[1][expr[2]], env, depth + 1)
            element = self._element_types(fid, inner, expr[2], mid, env)
            if element is not None:
                return element
            return self.eval(mid, fid, inner, env, depth + 1)
        if tag == "t":
            out = set()
            for e in expr[1]:
                out |= self.eval(mid, fid, e, env, depth + 1)
            return out
        if tag == "super" and fid is not None:
            cid = self.fn_class[fid]
            return {f"S:{cid}"} if cid is not None else set()
        if tag == "imp":  # `importlib.import_module(args.model)`: each module it may load
            return {f"M:{c}" for c in plugin_modules(self, mid, expr[1])}
        return set()

    def _nested_def(self, mid: int, fid: int, name: str) -> FrozenSet[str]:
        """A function defined inside `fid` or one of the functions around it (`def main(): def
        one_epoch(loader): ...; one_epoch(train_loader)`): what the name calls."""
        key = (fid, name)
        got = self._nested_memo.get(key)
        if got is None:
            got = _NOTHING
            by_q = self.modules[mid].fids_by_q
            cur: Optional[int] = fid
            for _ in range(8):
                if cur is None:
                    break
                fn = self.functions[cur][1]
                found = by_q.get(f"{fn['q']}.{name}")
                if found:
                    got = frozenset(f"F:{f}" for f in found)
                    break
                outer = fn.get("outer")
                cur = by_q[outer][0] if outer is not None and by_q.get(outer) else None
            self._nested_memo[key] = got
        return got

    def _attr(self, obj: str, name: str) -> AbstractSet[str]:
        key = (obj, name)
        got = self._attr_memo.get(key)
        if got is None:
            types, fixed = self._attr_uncached(obj, name)
            got = self._attr_memo[key] = self._shared(types)
            if fixed:
                self._fixed_attrs[key] = got
        return got

    def _attr_uncached(self, obj: str, name: str) -> Tuple[AbstractSet[str], bool]:
        """The types of attribute `name` of `obj`, and whether no round can change them (a
        module's name that no round can change, a method)."""
        kind, _, rest = obj.partition(":")
        if kind == "M":
            got = self.symbol(int(rest), name)
            return got, (int(rest), name) in self._fixed_symbols
        if kind == "R":
            return self._record_field(obj, name), False
        if kind in ("I", "C", "S"):
            cid = int(rest)
            meth = self.method(cid, name, skip_self=kind == "S")
            if meth is not None:
                return ({f"B:{meth}"} if kind in ("I", "S") else {f"F:{meth}"}), True
            if kind == "I":
                out: Set[str] = set()
                for c in self.mro(cid):
                    out |= self.attr_types.get(c, {}).get(name, _NOTHING)
                return out, False
        return set(), True

    def _call_result(self, obj: str) -> AbstractSet[str]:
        kind, _, rest = obj.partition(":")
        if kind == "C":
            return {f"I:{rest}"}
        if kind in ("F", "B"):
            target = int(rest)
        elif kind == "I":
            found = self._instance_call_target(int(rest))
            if found is None:
                return _NOTHING
            target = found
        else:
            return set()
        got = self.ret_types[target]
        if self._reads is not None:
            self._reads.setdefault(("r", target, None), got)
        return got

    def _instance_call_target(self, cid: int) -> Optional[int]:
        target = self.method(cid, "__call__")
        if target is None:
            target = self.method(cid, "forward")
        return target

    def callees_of(self, obj: str) -> List[Tuple[int, int]]:
        """(callee fid, how many leading parameters the call skips) for calling `obj`."""
        kind, _, rest = obj.partition(":")
        if kind == "F":
            return [(int(rest), 0)]
        if kind == "B":
            return [(int(rest), 1)]
        if kind == "C":
            init = self.method(int(rest), "__init__")
            return [(init, 1)] if init is not None else []
        if kind == "I":
            target = self._instance_call_target(int(rest))
            return [(target, 1)] if target is not None else []
        return []

    def _visit_function(self, fid: int, mid: int, fn: Dict[str, Any]) -> bool:
        """Evaluate a function once more; whether that added anything. What it reads is kept for
        the next round (`_inputs_unchanged`)."""
        self._reads = {}
        try:
            changed = self._visit(fid, mid, fn)
            self._inputs[fid] = tuple(itertools.chain.from_iterable((*key, got) for key, got in self._reads.items()))
        finally:
            self._reads = None
        return changed

    def _visit(self, fid: int, mid: int, fn: Dict[str, Any]) -> bool:
        env = self._local_env(mid, fid, fn)
        changed = False
        cid = self.fn_class[fid]
        if cid is not None and fn["attrs"]:
            attrs = self.attr_types.setdefault(cid, {})
            for name, values in fn["attrs"].items():
                for v in values:
                    new = self.eval(mid, fid, v, env)
                    if new and not new <= attrs.get(name, _NOTHING):
                        attrs.setdefault(name, set()).update(new)
                        changed = True
        ret: Set[str] = set()
        for r in fn["returns"]:
            ret |= self.eval(mid, fid, r, env)
        if not ret <= self.ret_types[fid]:
            self.ret_types[fid] = self.ret_types[fid] | ret
            changed = True
        if fn["returns"] and self._note_returned_elements(fid, mid, fn, env):
            self._ret_elems_version[fid] += 1
            changed = True
        edges = []
        for i, call in enumerate(fn["calls"]):
            objs = self.eval(mid, fid, call[C_FUNC], env)
            if not objs:
                continue  # (it calls nothing known: no fields, callees nor edges)
            for o in objs:
                if o[0] == "C" and self._bind_fields(int(o[2:]), call, mid, fid, env):
                    changed = True
            callees = self._callees(objs)
            if call[C_FLAGS] & WITH_ITEM:
                callees = callees + self._context_methods(objs)
            for callee, skip in callees:
                edges.append((i, callee))
                params = self.functions[callee][1]["params"]
                used = self._used_names(callee)
                ptypes = self.param_types.get(callee, _NO_TYPES)
                pairs = [(params[k + skip], a) for k, a in enumerate(call[C_ARGS]) if k + skip < len(params)]
                pairs += [(kw, a) for kw, a in call[C_KWS].items() if kw in params]
                for name, a in pairs:
                    if name not in used or name.startswith("*"):
                        continue
                    if self._note_elements(callee, name, mid, fid, a, env):
                        changed = True
                    if self._read(fid, "m", callee, name):
                        continue  # already many things: stop refining it
                    new = self.eval(mid, fid, a, env)
                    got = ptypes.get(name)
                    if new and (got is None or not new <= got):
                        mine = self.param_types.get(callee)
                        if mine is None:
                            mine = self.param_types[callee] = {}
                        ptypes = mine
                        mine.setdefault(name, set()).update(new)
                        self._param_version[callee] += 1
                        changed = True
        self.edges[fid] = edges
        return changed

    def _record_type(self, mid: int, fid: Optional[int], call: Any) -> str:
        """The type of a record built by `call` (a summary call expression) in module `mid`,
        function `fid` (None at module level): `R:<module>:<function or -1>:<line>`."""
        key = f"R:{mid}:{-1 if fid is None else fid}:{call[4]}"
        self.records[key] = call[3]
        return key

    def _record_field(self, obj: str, name: str) -> Set[str]:
        """The types of field `name` of record `obj`: its keyword's value where the record is built."""
        fields = self.records.get(obj)
        if not fields or name not in fields or name in ("*", "**") or obj in self._records_busy:
            return set()  # (busy: a record holding itself)
        _, mid_text, fid_text, _ = obj.split(":")
        mid, fid = int(mid_text), int(fid_text)
        reads, self._reads = self._reads, None  # (the caller notes its read of this field)
        self._records_busy.add(obj)
        try:
            if fid < 0:
                return set(self.eval(mid, None, fields[name], self.modules[mid].globals_env))
            return set(self.eval(mid, fid, fields[name], self._local_env(mid, fid, self.functions[fid][1])))
        finally:
            self._records_busy.discard(obj)
            self._reads = reads

    def _context_methods(self, objs: AbstractSet[str]) -> List[Tuple[int, int]]:
        """`__enter__` and `__exit__` of the project classes a `with` constructs."""
        out: List[Tuple[int, int]] = []
        for o in sorted(objs):
            if o[0] == "C":
                for name in ("__enter__", "__exit__"):
                    m = self.method(int(o[2:]), name)
                    if m is not None:
                        out.append((m, 1))
        return out

    def _bind_fields(self, cid: int, call: List[Any], mid: int, fid: int, env: Dict[str, Set[str]]) -> bool:
        """`DataInfo(loader, sampler)` of a dataclass (or NamedTuple): the types of its fields, from
        the arguments (by position only when it has no bases, whose fields would come first)."""
        c = self.classes[cid][2]
        fields = c.get("init")
        if not fields:
            return False
        pairs = list(zip(fields, call[C_ARGS])) if not c["bases"] or self._named_tuple(c) else []
        pairs += [(k, a) for k, a in call[C_KWS].items() if k in fields]
        attrs = self.attr_types.setdefault(cid, {})
        changed = False
        for name, a in pairs:
            if a is None:
                continue
            new = self.eval(mid, fid, a, env)
            if new and not new <= attrs.get(name, _NOTHING):
                attrs.setdefault(name, set()).update(new)
                changed = True
        return changed

    @staticmethod
    def _named_tuple(c: Dict[str, Any]) -> bool:
        return all(b is not None and _callee_tail(b) == "NamedTuple" for b in c["bases"])

    def _note_elements(self, callee: int, name: str, mid: int, fid: int, arg: Any, env: Dict[str, Set[str]]) -> bool:
        """A parameter that every call site gives a literal tuple or list (`[train_loader,
        val_loader]`): the types of each position, so that `a, b = loaders` stays precise."""
        if arg is None or arg[0] != "t" or len(arg) < 3:
            if self._input(fid, "x", callee, name):
                return False  # some call does not give it a literal sequence
            self.param_elems.setdefault(callee, {})[name] = None
            return True
        if self._read(fid, "x", callee, name):  # an input: it decides what this visit evaluates
            return False
        known = self.param_elems.setdefault(callee, {})
        elems = [self.eval(mid, fid, e, env) for e in arg[1]]
        have = known.get(name)
        if have is None:
            # sets of its own: they grow below, and what `eval` gives may be a module name's
            # frozen set or another function's (which growing would change too)
            known[name] = [set(e) for e in elems]
            return True
        if len(have) != len(elems):
            known[name] = None
            return True
        changed = False
        for h, e in zip(have, elems):
            if not e <= h:
                h |= e
                changed = True
        return changed

    def _note_returned_elements(self, fid: int, mid: int, fn: Dict[str, Any], env: Dict[str, Set[str]]) -> bool:
        """A function that always returns a literal tuple (`return train_loader, val_loader`), or
        what such a function returns (`def build_model(args): return build(args)`): the types of
        each position, so that `train_dl, val_dl = make_loaders()` stays precise."""
        if fid in self.ret_elems and self.ret_elems[fid] is None:
            return False
        rows: List[List[AbstractSet[str]]] = []
        for r in fn["returns"]:
            if r[0] == "t" and len(r) >= 3:
                rows.append([self.eval(mid, fid, e, env) for e in r[1]])
                continue
            got = self._forwarded_elements(r, mid, fid, env) if r[0] == "c" else None
            if got is _NOT_YET:
                return False  # visited again once the callee's are known (a read of them is noted)
            if got is None:
                rows = []
                break
            rows.append(got)
        if not rows or len({len(row) for row in rows}) != 1:
            had = self.ret_elems.get(fid) is not None
            self.ret_elems[fid] = None
            return had  # (known positions that are no more: the readers fall back to the union)
        have = self.ret_elems.get(fid)
        changed = have is None
        if have is None:
            have = self.ret_elems[fid] = [set() for _ in rows[0]]
        for row in rows:
            for h, new in zip(have, row):
                if not new <= h:
                    h |= new
                    changed = True
        return changed

    def _forwarded_elements(self, call: Any, mid: int, fid: int, env: Dict[str, Set[str]]) -> Any:
        """The positions of what `return build(args)` returns: the callees' (None: not a tuple of
        known positions; `_NOT_YET`: a callee's are not known yet)."""
        objs = self.eval(mid, fid, call[1], env, 1)
        if not objs or any(o[0] not in "FB" for o in objs):
            return None
        out: Optional[List[Set[str]]] = None
        for o in sorted(objs):
            callee = int(o[2:])
            if callee == fid:
                return None
            if self._reads is not None:
                self._reads.setdefault(("e", callee, None), self._ret_elems_version[callee])
            if callee not in self.ret_elems:
                return _NOT_YET
            elems = self.ret_elems[callee]
            if elems is None or (out is not None and len(out) != len(elems)):
                return None
            out = [set(e) for e in elems] if out is None else [a | b for a, b in zip(out, elems)]
        return out

    def _element_types(self, fid: Optional[int], inner: Any, index: int, mid: int = -1, env: Optional[Dict[str, Set[str]]] = None) -> Optional[AbstractSet[str]]:
        """`loaders[1]` / `a, b = loaders` for a parameter given literal sequences, `a, b = f()`
        for a function returning one (None: not known)."""
        if inner is not None and inner[0] == "c" and env is not None:
            out: Set[str] = set()
            for o in self.eval(mid, fid, inner[1], env, 1):
                if o[0] not in "FB":
                    return None
                callee = int(o[2:])
                if self._reads is not None:
                    self._reads.setdefault(("e", callee, None), self._ret_elems_version[callee])
                elems = self.ret_elems.get(callee)
                if not elems or index >= len(elems):
                    return None
                out |= elems[index]
            return out or None
        if fid is None or inner is None or inner[0] != "n":
            return None
        fn = self.functions[fid][1]
        if inner[1] in fn["assign"] or inner[1] not in fn["params"]:
            return None
        got = self._param_element(fid, inner[1], index)
        if self._reads is not None:
            self._reads.setdefault(("q", inner[1], index), None if got is None else frozenset(got))
        return got

    def _param_element(self, fid: int, name: str, index: int) -> Optional[AbstractSet[str]]:
        elems = self.param_elems.get(fid, {}).get(name)
        return elems[index] if elems and index < len(elems) else None

    def _callees(self, objs: AbstractSet[str]) -> List[Tuple[int, int]]:
        """What calling a value that may be any of `objs` runs. A value that may be many plain
        functions (a callback parameter fed from everywhere) is not followed: that would be a
        guess. Instances and classes are (a model zoo: `net = get_network(args)`)."""
        functions = [o for o in objs if o[0] in "FB"]
        if len(functions) > MAX_TARGETS:
            objs = {o for o in objs if o[0] not in "FB"}
        return [c for obj in sorted(objs) for c in self.callees_of(obj)]  # sorted: the same order every run

    def _used_names(self, fid: int) -> FrozenSet[str]:
        """Names whose types can matter in a function: the roots of what it calls, returns,
        iterates or stores (a parameter's type is inferred only when it is one of them)."""
        got = self._used.get(fid)
        if got is None:
            fn = self.functions[fid][1]
            names: Set[str] = set()
            exprs = [c[C_FUNC] for c in fn["calls"]] + list(fn["returns"]) + [v for vs in fn["attrs"].values() for v in vs]
            exprs += [v for vs in fn["assign"].values() for v in vs]
            exprs += [a for c in fn["calls"] for a in (*c[C_ARGS], *c[C_KWS].values())]  # passed along
            todo = [e for e in exprs if e is not None]
            while todo:
                e = todo.pop()
                if e is None:
                    continue
                tag = e[0]
                if tag == "n":
                    names.add(e[1])
                elif tag in ("a", "s", "e"):
                    todo.append(e[1])
                elif tag == "i":
                    todo.append(e[1])
                elif tag == "t":
                    todo.extend(e[1])
                elif tag == "c":
                    todo.append(e[1])
                    todo.extend(e[2])
            got = self._used[fid] = self._shared(names)
        return got

    # -- module-level code: calls at the top of a script ----------------------------------------
    def module_calls(self, mid: int) -> List[Tuple[int, int]]:
        m = self.modules[mid]
        fn = m.summary["module"]
        env = m.globals_env
        out: List[Tuple[int, int]] = []
        for i, call in enumerate(fn["calls"]):
            out.extend((i, callee) for callee, _ in self._callees(self.eval(mid, None, call[C_FUNC], env)))
        return out
