"""Which values of the program are config objects, and which files they read (whole program).

Over the linked program (`speedlint.analyzer.program`), from each file's config facts
(`configs.summary`): a config loaded into a name, returned by a helper, filled into `args`, or
given to a `@hydra.main` function is followed through assignments (`train_cfg = cfg["train"]`,
`cfg.get("data", {})`, `EasyDict(cfg)`), `self` attributes, return values, and arguments of calls
anywhere in the project (`build_loaders(cfg.data)` in another module). A value is a *reference*:
(source, key path, overlay), where the source is the list of layers of one config
(`sources.compose`) and an overlay is an object that has the config's keys on top of its own
(`vars(args).update(cfg)`: a key the config lacks is the object's own, e.g. an argparse default).

Paths are resolved against the config files the run found: relative to the file's folder for
`__file__`-based paths and Hydra, else from the script's folder up (the closest match wins:
scripts usually run from their own folder or the project root). A path that cannot be resolved
gives no source: the code's own defaults count (`cfg.get("workers", 4)`), nothing is guessed.

What a file's rules need goes into its seeds (`project["configs"]`): per function (its ordinal;
-1 for the module) the names that hold references, per class the attributes, and the sources.
"""

from __future__ import annotations

import os
import posixpath
from types import MappingProxyType
from typing import AbstractSet, Any, Callable, Dict, FrozenSet, Iterable, List, Mapping, Optional, Set, Tuple

from speedlint.analyzer.configs.candidates import candidate_files
from speedlint.analyzer.configs.sources import Layer, compose, load
from speedlint.analyzer.configs.summary import WRAPPERS, looks_like_config
from speedlint.analyzer.program.hotness import Hotness
from speedlint.analyzer.program.seeds import FileSeeds

#: (source id, key path, overlay)
Ref = Tuple[int, Tuple[Any, ...], bool]
_MAX_REFS = 8
_NO_REFS: FrozenSet[Ref] = frozenset()
_NO_PARAMS: Mapping[str, Set[Ref]] = MappingProxyType({})
_ROUNDS = 6


class ConfigFlow:
    def __init__(self, hot: Hotness, config_files: Iterable[str]) -> None:
        self.hot = hot
        self.p = hot.p
        self.known: FrozenSet[str] = frozenset(os.path.normpath(f) for f in config_files)
        self.sources: List[Tuple[Layer, ...]] = []
        self._source_ids: Dict[Tuple[Layer, ...], int] = {}
        self.problems: Dict[int, List[Tuple[str, int, str]]] = {}  # module -> (config path or "", line, message)
        p = self.p
        # function id -> parameter -> refs, and -> the refs it returns: only the functions that
        # have some (an empty set or dict for each of the 40,000 functions of a large program
        # weighed 12 MiB at the link's peak)
        self.params: Dict[int, Dict[str, Set[Ref]]] = {}
        self.returns: Dict[int, Set[Ref]] = {}
        self.attrs: Dict[int, Dict[str, Set[Ref]]] = {}  # class id -> attribute -> refs (only those with some)
        self._attrs_written = False  # some visited method writes a `self` attribute
        self.globals: List[Dict[str, Set[Ref]]] = [dict() for _ in p.modules]
        self.envs: Dict[Tuple[int, Optional[int]], Dict[str, Set[Ref]]] = {}
        self.facts = [m.summary.get("configs") or {} for m in p.modules]
        self._def_lines: List[Dict[int, int]] = []  # module -> def line -> fid
        for m in p.modules:
            self._def_lines.append({p.functions[fid][1]["line"]: fid for fid in m.fids})
        self._roots: Dict[Tuple[int, Optional[int]], List[Tuple[str, Set[Ref]]]] = {}
        self._shared = False
        self.load_sites: Dict[int, Tuple[int, int]] = {}  # source id -> (module, line) of its first load (SPD704)
        self._fmt = ""  # the format of the load being resolved, and the candidate files it met
        self._choices: List[str] = []
        #: the work-list of `run`: how many times each thing a visit reads has grown (("p", fid):
        #: its parameters, ("r", fid): what it returns, ("a", cid): the attributes of a class,
        #: ("g", mid): a module's globals), what the visit under way reads (with the count then),
        #: and what each function's (("f", fid)) or module's (("m", mid)) latest visit read
        self._grown: Dict[Tuple[str, int], int] = {}
        self._reading: Optional[Dict[Tuple[str, int], int]] = None
        self._visit_reads: Dict[Tuple[str, int], Dict[Tuple[str, int], int]] = {}

    # -- sources -----------------------------------------------------------------------------
    def _source(self, layers: List[Layer]) -> Optional[int]:
        if not layers:
            return None
        key = tuple(layers)
        sid = self._source_ids.get(key)
        if sid is None:
            sid = self._source_ids[key] = len(self.sources)
            self.sources.append(key)
        return sid

    def _files(self, mid: int, fid: Optional[int], spec: Any, depth: int = 0) -> List[str]:
        """Candidate absolute paths of a path spec (see `configs.summary`), in `mid`."""
        if spec is None or depth > 3:
            return []
        kind = spec[0]
        here = os.path.dirname(self.p.modules[mid].path)
        if kind == "here":
            return [os.path.normpath(os.path.join(here, spec[1]))]
        if kind == "abs":
            return [os.path.normpath(spec[1])]
        if kind == "choice":  # a required config option: the project's candidate files
            found = candidate_files(self.p.modules[mid].path, self._fmt, self.known)
            self._choices = found
            return found[:1]
        if kind == "cwd":
            folder = here
            for _ in range(8):  # from the script's folder up: the closest existing file
                path = os.path.normpath(os.path.join(folder, spec[1]))
                if path in self.known:
                    return [path]
                parent = os.path.dirname(folder)
                if parent == folder:
                    break
                folder = parent
            return [os.path.normpath(os.path.join(here, spec[1]))]
        suffix = spec[-1]
        if kind == "arg":
            found = self._argparse_spec(mid, spec[1])
            return self._files(mid, fid, _suffixed(found, suffix), depth + 1)
        if kind == "import":
            target = self.p._find_module(mid, spec[1], spec[2])
            if target is None:
                return []
            const = self.facts[target].get("consts", {}).get(spec[3])
            return self._files(target, None, _suffixed(const, suffix), depth + 1)
        if kind == "param" and fid is not None:
            out: List[str] = []
            for caller_mid, caller_fid, arg in self._arguments(fid, spec[1]):
                out += self._files(caller_mid, caller_fid, _suffixed(self._arg_spec(caller_mid, arg), suffix), depth + 1)
            return sorted(set(out))[:4]
        return []

    def _argparse_spec(self, mid: int, dest: str) -> Any:
        own = self.facts[mid].get("argparse", {})
        if dest in own:
            return own[dest]
        found = [f["argparse"][dest] for f in self.facts if dest in f.get("argparse", {})]
        return found[0] if len(found) == 1 else None

    def _arg_spec(self, mid: int, expr: Any) -> Any:
        """A call argument (in the summary's expression form) as a path spec."""
        if expr is None:
            return None
        if expr[0] == "k" and isinstance(expr[1], str):
            return ["abs", expr[1]] if expr[1].startswith("/") else ["cwd", expr[1]]
        if expr[0] == "n":
            const = self.facts[mid].get("consts", {}).get(expr[1])
            if const is not None:
                return const
            imp = self.p.modules[mid].summary["imports"].get(expr[1])
            if imp is not None and imp[0] == "from":
                return ["import", imp[1], imp[2], imp[3], ""]
            return None
        if expr[0] == "a":
            return ["arg", expr[2], ""]
        return None

    def _arguments(self, fid: int, name: str) -> List[Tuple[int, Optional[int], Any]]:
        """(caller module, caller function, argument expression) of every call passing `name`."""
        p = self.p
        params = [q for q in p.functions[fid][1]["params"] if not q.startswith("*")]
        if name not in params:
            return []
        skip = self.hot._skip_of(fid)
        index = params.index(name) - skip
        out: List[Tuple[int, Optional[int], Any]] = []
        for caller_fid, call_index in p.callers[fid]:
            caller_mid, fn = p.functions[caller_fid]
            out.append((caller_mid, caller_fid, _argument(fn["calls"][call_index], name, index)))
        for m in p.modules:
            for call_index, callee in self.hot.mod_edges[m.id]:
                if callee == fid:
                    out.append((m.id, None, _argument(m.summary["module"]["calls"][call_index], name, index)))
        return out[:16]

    def _load_sources(self, mid: int, fid: Optional[int], fmt: str, spec: Any, line: int) -> List[int]:
        """The sources a load reads: one, or one per candidate file of a required config option
        (`configs.candidates`)."""
        self._choices = []
        self._fmt = fmt
        sid = self._load_source(mid, fid, fmt, spec, line)
        choices, self._choices = self._choices, []
        if len(choices) < 2:
            return [sid] if sid is not None else []
        out = [sid] if sid is not None else []
        for path in choices[1:]:
            more = self._load_source(mid, fid, fmt, ["abs", path], line)
            if more is not None and more not in out:
                out.append(more)
        return out

    def _load_source(self, mid: int, fid: Optional[int], fmt: str, spec: Any, line: int, hydra: bool = False) -> Optional[int]:
        files = self._files(mid, fid, spec)
        found = [f for f in files if f in self.known]
        if not found:
            missing = [f for f in files if looks_like_config(f) and not os.path.exists(f)]
            if missing and len(missing) == len(files):
                shown = os.path.relpath(missing[0], os.path.dirname(self.p.modules[mid].path))
                self.problems.setdefault(mid, []).append(
                    ("", line, f"the config file `{shown}` that this code reads does not exist; its values are not checked")
                )
            return None
        layers = compose(found[0], set(self.known), hydra=hydra)
        for path, _, _ in layers:
            doc, _ = load(path)
            if doc is not None and doc.broken:
                self.problems.setdefault(mid, []).append((path, 0, f"cannot read this config file ({doc.problem}); its values are not checked"))
        sid = self._source(layers)
        if sid is not None:
            self.load_sites.setdefault(sid, (mid, line))
        return sid

    # -- evaluation --------------------------------------------------------------------------
    def _body(self, mid: int, fid: Optional[int]) -> Dict[str, Any]:
        return self.p.functions[fid][1] if fid is not None else self.p.modules[mid].summary["module"]

    def _own_roots(self, mid: int, fid: Optional[int]) -> List[Tuple[str, Set[Ref]]]:
        """Names given a config by the facts of this function: loads, Hydra, fills."""
        key = (mid, fid)
        got = self._roots.get(key)
        if got is not None:
            return got
        out: List[Tuple[str, Set[Ref]]] = []
        facts = self.facts[mid]
        line = self.p.functions[fid][1]["line"] if fid is not None else 0
        for at, target, fmt, spec, where, *kept in facts.get("loads", ()):
            if at != line:
                continue
            sids = self._load_sources(mid, fid, fmt, spec, where)
            if sids:  # (`kept`: the key path subscripted at load time, `json.load(f)["train"]`)
                out.append((target, {(sid, tuple(kept[0]) if kept else (), False) for sid in sids}))
        for at, spec, name in facts.get("hydra", ()):
            if at != line or fid is None:
                continue
            path = ["here", posixpath.join(spec[1], name + ".yaml")] if spec[0] == "here" else _suffixed(spec, name + ".yaml")
            sid = self._load_source(mid, fid, "yaml", path, line, hydra=True)
            params = self.p.functions[fid][1]["params"]
            if sid is not None and params:
                out.append((params[0], {(sid, (), False)}))
        self._roots[key] = out
        return out

    def env(self, mid: int, fid: Optional[int]) -> Dict[str, Set[Ref]]:
        env: Dict[str, Set[Ref]] = {}
        if fid is not None:
            self._note_read("p", fid)
            for name, refs in self.params.get(fid, _NO_PARAMS).items():
                env[name] = set(refs)
        for name, refs in self._own_roots(mid, fid):
            if name != "<return>":
                env.setdefault(name, set()).update(refs)
        body = self._body(mid, fid)
        fills = [f for f in self.facts[mid].get("fills", ()) if f[0] == (body.get("line", 0) if fid is not None else 0)]
        for _ in range(2):
            for name, values in body["assign"].items():
                got = env.setdefault(name, set())
                for v in values:
                    got |= self.eval(mid, fid, v, env)
            for _, target, source, overlay in fills:
                refs = self._access(mid, fid, source, env)
                if not refs:
                    continue
                targets = [target] if target != "<argparse>" else [
                    n for n, vs in body["assign"].items() if any(_is_parse_args(v) for v in vs)
                ]
                for t in targets:
                    env.setdefault(t, set()).update((sid, keys, overlay) for sid, keys, _ in refs)
        return {k: set(sorted(v, key=repr)[:_MAX_REFS]) if len(v) > _MAX_REFS else v for k, v in env.items() if v}

    def _access(self, mid: int, fid: Optional[int], access: List[Any], env: Dict[str, Set[Ref]]) -> Set[Ref]:
        root, keys = access[0], tuple(access[1:])
        if root.startswith("self."):
            refs = self._self_attr(fid, root[5:])
        else:
            refs = env.get(root) or self._global(mid, root)
        return {(sid, prefix + keys, overlay) for sid, prefix, overlay in refs}

    def _self_attr(self, fid: Optional[int], attr: str) -> Set[Ref]:
        if fid is None:
            return set()
        cid = self.p.fn_class[fid]
        if cid is None:
            return set()
        out: Set[Ref] = set()
        for c in self.p.mro(cid):
            self._note_read("a", c)
            out |= self.attrs.get(c, {}).get(attr, set())
        return out

    def _global(self, mid: int, name: str, depth: int = 0) -> Set[Ref]:
        self._note_read("g", mid)
        got = self.globals[mid].get(name)
        if got:
            return got
        imp = self.p.modules[mid].summary["imports"].get(name)
        if imp is not None and imp[0] == "from" and depth < 4:
            target = self.p._find_module(mid, imp[1], imp[2])
            if target is not None:
                return self._global(target, imp[3], depth + 1)
        return set()

    def eval(self, mid: int, fid: Optional[int], expr: Any, env: Dict[str, Set[Ref]], depth: int = 0) -> Set[Ref]:
        if expr is None or depth > 10:
            return set()
        tag = expr[0]
        if tag == "n":
            return env.get(expr[1]) or self._global(mid, expr[1])
        if tag == "a":
            base = expr[1]
            if fid is not None and base == ("n", "self") and self.p.fn_class[fid] is not None:
                return self._self_attr(fid, expr[2])
            return {(sid, keys + (expr[2],), o) for sid, keys, o in self.eval(mid, fid, base, env, depth + 1)}
        if tag == "s":
            if len(expr) < 3:
                return set()
            return {(sid, keys + (expr[2],), o) for sid, keys, o in self.eval(mid, fid, expr[1], env, depth + 1)}
        if tag == "c":
            func, args = expr[1], expr[2]
            if func[0] == "a" and func[2] == "get" and args and args[0] is not None and args[0][0] == "k":
                return {(sid, keys + (args[0][1],), o) for sid, keys, o in self.eval(mid, fid, func[1], env, depth + 1)}
            tail = func[2] if func[0] == "a" else func[1] if func[0] == "n" else ""
            if tail in WRAPPERS and args:
                return self.eval(mid, fid, args[0], env, depth + 1)
            if tail == "merge":  # OmegaConf.merge(a, b): either may hold a key
                out: Set[Ref] = set()
                for a in args:
                    out |= self.eval(mid, fid, a, env, depth + 1)
                return out
            out = set()
            for callee in self._callees(mid, fid, func):
                self._note_read("r", callee)
                out |= self.returns.get(callee, _NO_REFS)
            return out
        return set()

    def _callees(self, mid: int, fid: Optional[int], func: Any) -> List[int]:
        """Project functions a call runs, by name (`f`, `module.f`, `self.f`)."""
        p = self.p
        objs: AbstractSet[str] = set()  # (a memo's read-only set, or this one)
        if func[0] == "n":
            objs = p.symbol(mid, func[1])
        elif func[0] == "a" and func[1] is not None and func[1][0] == "n":
            base = func[1][1]
            if base == "self" and fid is not None and p.fn_class[fid] is not None:
                meth = p.method(p.fn_class[fid], func[2])  # type: ignore[arg-type]
                return [meth] if meth is not None else []
            for o in p.symbol(mid, base):
                if o.startswith("M:"):
                    objs |= p.symbol(int(o[2:]), func[2])
        return [int(o[2:]) for o in sorted(objs) if o[0] == "F"]

    # -- the fixed point ---------------------------------------------------------------------
    def run(self) -> None:
        p = self.p
        for _ in range(_ROUNDS):
            changed = False
            for m in p.modules:
                if self._unchanged(("m", m.id)):
                    continue  # (as below)
                self._reading = {}
                env = self.env(m.id, None)
                for name, refs in env.items():
                    if not refs <= self.globals[m.id].get(name, set()):
                        self.globals[m.id].setdefault(name, set()).update(refs)
                        self._grew("g", m.id)
                        changed = True
                changed |= self._calls(m.id, None, env)
                self._visit_reads[("m", m.id)], self._reading = self._reading, None
            # module globals and `self` attributes holding a config reach functions of any module
            self._shared = any(self.globals) or self._attrs_written
            for fid, (mid, fn) in enumerate(p.functions):
                if not self._may_matter(mid, fid) or self._unchanged(("f", fid)):
                    # (unchanged: a visit would compute the environment it computed last time, and
                    # what it would add, to returns, attributes and callees' parameters, is there)
                    continue
                self._reading = {}
                env = self.env(mid, fid)
                self.envs[(mid, fid)] = env
                ret: Set[Ref] = set()
                for r in fn["returns"]:
                    ret |= self.eval(mid, fid, r, env)
                for name, refs in self._own_roots(mid, fid):
                    if name == "<return>":
                        ret |= refs
                if not ret <= self.returns.get(fid, _NO_REFS):
                    self.returns.setdefault(fid, set()).update(ret)
                    self._grew("r", fid)
                    changed = True
                cid = p.fn_class[fid]
                if cid is not None:
                    for attr, values in fn["attrs"].items():
                        self._attrs_written = True
                        for v in values:
                            new = self.eval(mid, fid, v, env)
                            if new and self._add_to_attr(cid, attr, new):
                                changed = True
                    for name, refs in self._own_roots(mid, fid):
                        if name.startswith("self."):
                            self._attrs_written = True
                            if refs and self._add_to_attr(cid, name[5:], refs):
                                changed = True
                changed |= self._calls(mid, fid, env)
                # (a read is noted with the count it had then: one the visit itself grew after
                # reading it differs next round, and the function is visited again)
                self._visit_reads[("f", fid)], self._reading = self._reading, None
            if not changed:
                break
        self._visit_reads = {}  # (only the rounds need them)
        for m in p.modules:
            self.envs[(m.id, None)] = self.env(m.id, None)

    def _note_read(self, kind: str, key: int) -> None:
        """The visit under way reads this (`_grown`)."""
        if self._reading is not None:
            self._reading.setdefault((kind, key), self._grown.get((kind, key), 0))

    def _grew(self, kind: str, key: int) -> None:
        self._grown[(kind, key)] = self._grown.get((kind, key), 0) + 1

    def _unchanged(self, visit: Tuple[str, int]) -> bool:
        """Whether nothing the latest visit of a function or module read has grown since."""
        reads = self._visit_reads.get(visit)
        return reads is not None and all(self._grown.get(key, 0) == n for key, n in reads.items())

    def _add_to_attr(self, cid: int, attr: str, refs: Set[Ref]) -> bool:
        """Add `refs` to what `self.<attr>` of class `cid` may hold; whether that grew."""
        got = self.attrs.setdefault(cid, {}).setdefault(attr, set())
        if refs <= got:
            return False
        got |= refs
        self._grew("a", cid)
        return True

    def _may_matter(self, mid: int, fid: int) -> bool:
        """Skip functions that neither receive, make nor read a config (most of a large program)."""
        return bool(self.params.get(fid)) or bool(self.facts[mid]) or self._shared or any(self.returns.get(c) for _, c in self.p.edges[fid])

    def _calls(self, mid: int, fid: Optional[int], env: Dict[str, Set[Ref]]) -> bool:
        """Pass the refs of call arguments on to the callees' parameters."""
        p = self.p
        body = self._body(mid, fid)
        edges = p.edges[fid] if fid is not None else self.hot.mod_edges[mid]
        changed = False
        for call_index, callee in edges:
            call = body["calls"][call_index]
            params = [q for q in p.functions[callee][1]["params"] if not q.startswith("*")]
            skip = self.hot._skip_of(callee)
            pairs = [(params[k + skip], a) for k, a in enumerate(call[2]) if k + skip < len(params)]
            pairs += [(kw, a) for kw, a in call[3].items() if kw in params]
            for name, arg in pairs:
                refs = self.eval(mid, fid, arg, env)
                if not refs:
                    continue
                got = self.params.setdefault(callee, {}).setdefault(name, set())
                if len(got) >= _MAX_REFS or refs <= got:
                    continue
                got |= refs
                self._grew("p", callee)
                changed = True
        return changed

    # -- seeds -------------------------------------------------------------------------------
    def add_seeds(self, seeds: Dict[str, FileSeeds], new_seeds: Callable[[], FileSeeds]) -> None:
        p = self.p
        used: Dict[int, Set[int]] = {}
        per_module: Dict[int, Dict[str, Any]] = {}
        for (mid, fid), env in sorted(self.envs.items(), key=lambda kv: (kv[0][0], -1 if kv[0][1] is None else kv[0][1])):
            if not env:
                continue
            key = str(p.local_index[fid]) if fid is not None else "-1"
            names = per_module.setdefault(mid, {}).setdefault("names", {})
            names[key] = {name: _encode(refs) for name, refs in sorted(env.items())}
            used.setdefault(mid, set()).update(sid for refs in env.values() for sid, _, _ in refs)
        for cid, attrs in sorted(self.attrs.items()):
            attrs = {a: r for a, r in attrs.items() if r}
            if not attrs:
                continue
            mid, q, _ = p.classes[cid]
            per_module.setdefault(mid, {}).setdefault("attrs", {})[q] = {a: _encode(r) for a, r in sorted(attrs.items())}
            used.setdefault(mid, set()).update(sid for refs in attrs.values() for sid, _, _ in refs)
        for mid, facts in per_module.items():
            facts["sources"] = {str(sid): [list(layer[:1]) + [list(layer[1]), layer[2]] for layer in self.sources[sid]] for sid in sorted(used.get(mid, ()))}
            shown = p.modules[mid].shown
            if shown not in seeds:
                seeds[shown] = new_seeds()
            seeds[shown].project["configs"] = facts
        for mid, problems in self.problems.items():
            shown = p.modules[mid].shown
            if shown not in seeds:
                seeds[shown] = new_seeds()
            seeds[shown].project["config_problems"] = sorted(set(problems))


def _encode(refs: Set[Ref]) -> List[List[Any]]:
    return [[sid, list(keys), overlay] for sid, keys, overlay in sorted(refs, key=repr)][:_MAX_REFS]


def _suffixed(spec: Any, suffix: str) -> Any:
    if spec is None or not suffix:
        return spec
    if spec[0] in ("cwd", "here", "abs"):
        return [spec[0], posixpath.normpath(posixpath.join(spec[1], suffix))]
    return [*spec[:-1], posixpath.join(spec[-1], suffix) if spec[-1] else suffix]


def _argument(call: Any, name: str, index: int) -> Any:
    if name in call[3]:
        return call[3][name]
    args = call[2]
    return args[index] if 0 <= index < len(args) else None


def _is_parse_args(expr: Any) -> bool:
    if expr is None or expr[0] not in ("c", "i", "s"):
        return False
    if expr[0] in ("i", "s"):
        return _is_parse_args(expr[1])
    func = expr[1]
    return func[0] == "a" and func[2] in ("parse_args", "parse_known_args")


def add_config_seeds(hot: Hotness, seeds: Dict[str, FileSeeds], new_seeds: Callable[[], FileSeeds], config_files: Iterable[str]) -> Optional[ConfigFlow]:
    """Follow configs through the program and add what each file needs to its seeds; returns
    the flow (which config files the program loads, and where), None when nothing loads one."""
    if not any(m.summary.get("configs") for m in hot.p.modules):
        return None
    flow = ConfigFlow(hot, config_files)
    flow.run()
    flow.add_seeds(seeds, new_seeds)
    return flow
