"""What the whole program tells each file's rules (`ProgramFacts.seeds`, `link`).

Over the `Hotness` of a linked `Program`: which functions are hot, how, and why (the chain), which
loops are training steps because of a callee in another module, and whether the code that makes a
file hot may run on a GPU; the constants and Python values call sites in other modules pass; how
loops elsewhere use a file's loaders (`loader_uses`); the defaults of yacs-style configs
(`config_defaults`); whether a file's program builds convolutions (cuDNN reach); the models other
modules make; the command-line option defaults declared elsewhere in the program. The data-loading
and config-file facts (`data`) are added last.
"""

from __future__ import annotations

import gc
from typing import Any, Dict, List, Optional, Sequence, Set, Tuple

from speedlint.analyzer.configs.reader import Mapping
from speedlint.analyzer.configs.sources import load
from speedlint.analyzer.frameworks._repo_hf import add_seeds as add_hf_seeds
from speedlint.analyzer.frameworks.seeds import add_framework_seeds
from speedlint.analyzer.inference_seeds import add_inference_seeds
from speedlint.analyzer.loader_helpers import add_helper_seeds
from speedlint.analyzer.program.data import add_data_seeds, moved_by_callees
from speedlint.analyzer.program.hotness import _SKIP, Hotness
from speedlint.analyzer.program.conv_steps import conv_in_steps
from speedlint.analyzer.program.link import Program
from speedlint.analyzer.program.seeds import FileSeeds, Hop
from speedlint.analyzer.program.plugins import plugin_modules
from speedlint.analyzer.program.scope import program_holds
from speedlint.analyzer.program.schema import C_ARGS, C_FLAGS, C_HOST, C_KWS, C_LINE, C_LOOP, CONDITIONAL, DEFAULT, EPOCH, GUARDED, HANDLER
from speedlint.analyzer.program.summary import _callee_text, _literal
from speedlint.analyzer.vocabulary import EVAL_NAME, LOADER_NAMES


class ProgramFacts(Hotness):
    """`Hotness` and the facts for the files' seeds computed over it."""

    # -- values and loaders across modules ---------------------------------------------------------
    def passed_constants(self) -> Dict[int, Dict[str, Optional[List[Any]]]]:
        """fid -> parameter -> the constants every call site in *another* module passes (None: a
        call site passes something else; the default counts where a call passes nothing).
        Only for functions called from other modules alone: same-file calls are the file's own
        value tracer's business."""
        p = self.p
        out: Dict[int, Dict[str, Optional[List[Any]]]] = {}
        self.scalars: Dict[int, Set[str]] = {}
        calls = list(self._all_calls())
        # per call: how many scalar parameters its caller had when it was last noted; what a call
        # notes depends on those alone, and they only grow
        noted_with = [-1] * len(calls)
        for _ in range(4):  # a step index passed on from forward to forward
            before = sum(len(v) for v in self.scalars.values())
            for k, (caller_fid, callee, call, skip, caller_mid) in enumerate(calls):
                mine = len(self.scalars.get(caller_fid, ())) if caller_fid is not None else 0
                if mine == noted_with[k]:
                    continue  # it would note what it noted then
                noted_with[k] = mine
                self._note_scalars(caller_fid, callee, p.functions[callee][1], call, skip, self._body(caller_mid, caller_fid)["assign"])
            if sum(len(v) for v in self.scalars.values()) == before:
                break
        for caller_fid, callee, call, skip, caller_mid in calls:
            callee_mid, fn = p.functions[callee]
            if callee_mid == caller_mid:
                out[callee] = {}  # a same-file caller: the file's own tracer decides
                continue
            got = out.setdefault(callee, {"__cross__": []})
            if "__cross__" not in got:
                continue
            params = [q for q in fn["params"] if not q.startswith("*")]
            passed = set()
            local = self._body(caller_mid, caller_fid)["assign"]
            for k, a in enumerate(call[C_ARGS]):
                if k + skip < len(params):
                    self._note_constant(got, params[k + skip], self._constant_of(a, local))
                    passed.add(params[k + skip])
            for kw, a in call[C_KWS].items():
                if kw in params:
                    self._note_constant(got, kw, self._constant_of(a, local))
                    passed.add(kw)
            for name in params[skip:]:
                if name not in passed and got.get(name, ()) is not None:
                    # (a list: `got.get(name, ())` is not None just above; mypy does not narrow a dict's value)
                    got.setdefault(name, []).append(DEFAULT)  # type: ignore[union-attr]  # this call leaves it to the default
        for got in out.values():
            got.pop("__cross__", None)
        return {fid: got for fid, got in out.items() if got}

    def host_parameters(self) -> Dict[int, List[str]]:
        """fid -> the parameters of a function that tests a value for being a tensor
        (`isinstance(v, torch.Tensor)`, `summary["typed"]`) to which no call site running it on
        every training step or evaluation batch may pass a tensor: each such site passes a Python
        value there (`C_HOST`), or leaves it to its default. `*args` / `**kwargs` are named as
        written ("*args", "**kwargs"): what the extra arguments of the calls fill. A call that
        unpacks (`f(**d)`) may pass anything. Functions with no such call site are left out."""
        out: Dict[int, List[str]] = {}
        for callee, sites in self.hot_sites.items():
            fn = self.p.functions[callee][1]
            if not fn.get("typed"):
                continue
            skip = self._skip_of(callee)
            params = list(fn["params"])
            named = [q for q in params if not q.startswith("*")]
            npos = fn.get("npos", len(named))
            left = set(named[skip:]) | {q for q in params if q.startswith("*")}
            if fn.get("varkw"):
                left.add("**" + fn["varkw"])
            for mid, fid, i in sorted(sites, key=lambda s: (s[0], -1 if s[1] is None else s[1], s[2])):
                left -= _may_pass_tensor(fn, named, npos, skip, self._body(mid, fid)["calls"][i])
                if not left:
                    break
            if left:
                out[callee] = sorted(left)
        return out

    def _note_scalars(self, caller: Optional[int], callee: int, fn: Dict[str, Any], call: Any, skip: int, local: Dict[str, List[Any]]) -> None:
        """Parameters some call site passes a Python number or string (a step index, a flag):
        not tensors, whatever else they receive."""
        params = [q for q in fn["params"] if not q.startswith("*")]
        pairs = [(params[k + skip], a) for k, a in enumerate(call[C_ARGS]) if k + skip < len(params)]
        pairs += [(kw, a) for kw, a in call[C_KWS].items() if kw in params]
        mine = self.scalars.get(caller, ()) if caller is not None else ()
        for name, a in pairs:
            if a is not None and a[0] == "n" and a[1] in mine and a[1] not in local:
                self.scalars.setdefault(callee, set()).add(name)
                continue
            a = self._constant_of(a, local)
            if a is not None and a[0] == "k" and a[1] is not None:
                self.scalars.setdefault(callee, set()).add(name)

    @staticmethod
    def _constant_of(expr: Any, local: Dict[str, List[Any]]) -> Any:
        """`x` where every assignment of `x` in the caller is one constant: that constant."""
        if expr is not None and expr[0] == "n":
            values = local.get(expr[1], ())
            if len(values) == 1 and values[0] is not None and values[0][0] == "k":
                return values[0]
        return expr

    @staticmethod
    def _note_constant(got: Dict[str, Any], name: str, expr: Any) -> None:
        if name in got and got[name] is None:
            return
        if expr is not None and expr[0] == "k":
            got.setdefault(name, []).append(expr[1])
        else:
            got[name] = None


    def loader_uses(self) -> Dict[Tuple[int, int], Dict[str, str]]:
        """(module, line of the loader's construction) -> how loops elsewhere use it: "epoch" (it
        is iterated again every epoch: where) and "moved" (its batches go to the GPU: where)."""
        p = self.p
        out: Dict[Tuple[int, int], Dict[str, str]] = {}
        units = [(m.id, None) for m in p.modules] + [(mid, fid) for fid, (mid, _) in enumerate(p.functions)]
        envs: Dict[int, Dict[str, Set[str]]] = {}  # the functions' names, asked once each
        self._loop_envs = envs  # (and by `_module_makers` after: the program does not change now)
        for mid, fid in units:
            body = self._body(mid, fid)
            loops = body["loops"]
            if not loops or not any(lp.get("iter") for lp in loops):
                continue
            env = self._env(mid, fid)
            if fid is not None:
                envs[fid] = env
            gpu = bool(p.modules[mid].summary.get("gpu"))
            hot = self.hot[fid] if fid is not None else {}
            for i, lp in enumerate(loops):
                if lp.get("iter") is None:
                    continue
                loaders = sorted(o for o in p.eval(mid, fid, lp["iter"], env) if o.startswith("L:"))
                if not loaders:
                    continue
                where = f"{p.modules[mid].shown}:{lp['line']}"
                # iterated again every epoch: the training-step loop inside an epoch loop, or a loop
                # in a function run once per epoch when this loader gets there once per epoch too
                is_step = (mid, fid, i) in self.step_loops
                outer = loops[lp["parent"]] if lp["parent"] >= 0 else None
                in_epoch_loop = is_step and outer is not None and not outer.get("once")
                moved_names: Set[str] = set()
                for j in self._loops_within(body, i):
                    moved_names.update(loops[j].get("moved", ()))
                if gpu and not moved_names & set(lp.get("targets", ())):
                    moved_names |= moved_by_callees(self, mid, fid, body, i, lp.get("targets", ()))  # `model(batch)` moving it in `forward`
                moved = gpu and bool(moved_names & set(lp.get("targets", ())))
                for obj in loaders:
                    _, lmid, line = obj.split(":")
                    facts = out.setdefault((int(lmid), int(line)), {})
                    if in_epoch_loop or (fid is not None and EPOCH in hot and self.reaches_per_epoch(mid, fid, lp["iter"], obj, envs)):
                        facts.setdefault("epoch", where)
                    if moved:
                        facts.setdefault("moved", where)
                # a loader built in another module that pins memory: its batches here are in
                # pinned memory (what `non_blocking=True` needs); of several loaders, one that pins
                # is enough (as SPD202 reads a loop over this module's own loaders)
                built = [tuple(map(int, o.split(":")[1:])) for o in loaders]
                if all(lmid != mid for lmid, _ in built):
                    kws = [self._loader_kws(lmid, line) for lmid, line in built]
                    pinned = [b for b, k in zip(built, kws) if k.get("pin_memory") == ("k", True)]
                    if pinned:
                        pin_mid, pin_line = pinned[0]
                        self.pinned_loops.setdefault(mid, {})[str(lp["line"])] = [
                            f"{p.modules[pin_mid].shown}:{pin_line}", any("collate_fn" in k for k in kws),
                        ]
        return out

    def reaches_per_epoch(self, mid: int, fid: int, expr: Any, loader: str, envs: Dict[int, Dict[str, Set[str]]]) -> bool:
        """Whether `loader` ("L:module:line") reaches `expr` of function `fid` (a function run once
        per epoch) once per epoch: the hotness of `fid` alone does not say so when `fid` is a helper
        that other code also calls once with another loader (`log_every(loader)` run per epoch from
        `train_one_epoch`, and once from a feature-extraction pass). Followed back from the
        expression: a loader built in `fid` itself is built again on every call (SPD104's business,
        persistent workers would not outlive it); one that comes in as a parameter does so once per
        epoch only when some call site passing it does: one in an epoch loop, or one run once per
        epoch that itself gets it that way. Anything else (a `self` attribute, a global, a helper's
        return value) keeps what the hotness says."""
        return self._carried_per_epoch(mid, fid, expr, loader, envs, 0, set())

    def _fn_env(self, mid: int, fid: int, envs: Dict[int, Dict[str, Set[str]]]) -> Dict[str, Set[str]]:
        env = envs.get(fid)
        if env is None:
            env = envs[fid] = self._env(mid, fid)
        return env

    def _carried_per_epoch(self, mid: int, fid: int, expr: Any, loader: str, envs: Dict[int, Dict[str, Set[str]]], depth: int, seen: Set[Tuple[int, str]]) -> bool:
        p = self.p
        if expr is None or depth > 12:
            return True  # not followed: as the function's hotness says
        if loader not in p.eval(mid, fid, expr, self._fn_env(mid, fid, envs)):
            return False  # this part of the expression is not the loader
        fn = p.functions[fid][1]
        tag = expr[0]
        if tag == "n":
            name = expr[1]
            values = fn["assign"].get(name)
            if name not in fn["params"]:
                if not values:
                    return True  # a global, or a closure's enclosing name
                return any(self._carried_per_epoch(mid, fid, v, loader, envs, depth + 1, seen) for v in values)
            if values and any(self._carried_per_epoch(mid, fid, v, loader, envs, depth + 1, seen) for v in values):
                return True
            return self._passed_per_epoch(fid, name, loader, envs, depth, seen)
        if tag == "c":
            if len(expr) > 4 and loader == f"L:{mid}:{expr[4]}":
                return False  # built here, on every call
            carrying = [a for a in (*expr[2], *expr[3].values()) if a is not None]
            carrying = [a for a in carrying if loader in p.eval(mid, fid, a, self._fn_env(mid, fid, envs))]
            if not carrying:
                return True  # a helper's return value
            return any(self._carried_per_epoch(mid, fid, a, loader, envs, depth + 1, seen) for a in carrying)  # a wrapper: `log_every(loader)`
        if tag in ("s", "e", "i"):
            return self._carried_per_epoch(mid, fid, expr[1], loader, envs, depth + 1, seen)
        if tag == "t":
            return any(self._carried_per_epoch(mid, fid, e, loader, envs, depth + 1, seen) for e in expr[1])
        return True  # an attribute (`self.loader`): kept between calls

    def _passed_per_epoch(self, fid: int, name: str, loader: str, envs: Dict[int, Dict[str, Set[str]]], depth: int, seen: Set[Tuple[int, str]]) -> bool:
        """Some call of `fid` passes `loader` to parameter `name` once per epoch."""
        if (fid, name) in seen:
            return False  # a cycle: the other call sites decide
        seen.add((fid, name))
        p = self.p
        params = [q for q in p.functions[fid][1]["params"] if not q.startswith("*")]
        if name not in params:
            return False
        skip = self._skip_of(fid)
        position = params.index(name) - skip
        for caller, index in p.callers[fid]:
            cmid, cfn = p.functions[caller]
            call = cfn["calls"][index]
            in_epoch_loop = index in self.epoch_sites.get((cmid, caller), ())
            if not in_epoch_loop and (call[C_LOOP] >= 0 or call[C_FLAGS] & _SKIP[EPOCH] or EPOCH not in self.hot[caller]):
                continue  # a call that does not run once per epoch
            arg = call[C_KWS].get(name)
            if arg is None and 0 <= position < len(call[C_ARGS]):
                arg = call[C_ARGS][position]
            if arg is None or loader not in p.eval(cmid, caller, arg, self._fn_env(cmid, caller, envs)):
                continue  # it passes another loader
            if in_epoch_loop or self._carried_per_epoch(cmid, caller, arg, loader, envs, depth + 1, seen):
                return True
        return False

    def _loader_kws(self, mid: int, line: int) -> Dict[str, Any]:
        """The keyword arguments of the loader built at `line` of module `mid`."""
        table = self._kws_memo.get(mid)
        if table is None:
            table = self._kws_memo[mid] = {}
            m = self.p.modules[mid]
            for fid in (None, *m.fids):
                for call in self._body(mid, fid)["calls"]:
                    if call[C_KWS]:
                        got = table.setdefault(call[C_LINE], {})
                        for k, v in call[C_KWS].items():
                            got.setdefault(k, v)
            # keywords read out of `**kwargs` dicts (`loader_summary._splat_keywords`), and
            # `pin_memory=` true on the GPU path (`loader_summary._pinned_on_gpu`)
            facts = m.summary.get("loaders") or {}
            for at, kws in (*(facts.get("splat_kws") or {}).items(), *(facts.get("pin_kws") or {}).items()):
                got = table.setdefault(int(at), {})
                for k, v in kws.items():
                    got[k] = v if got.get(k) is None else got[k]
        return table.get(line, {})

    def _called_from_other_modules(self) -> Set[int]:
        """Functions some other module calls unconditionally (not behind an `if`, not in a handler)."""
        out: Set[int] = set()
        for caller_fid, callee, call, _, caller_mid in self._all_calls():
            if self.p.functions[callee][0] != caller_mid and not call[C_FLAGS] & (GUARDED | HANDLER | CONDITIONAL):
                out.add(callee)
        return out

    # -- per file --------------------------------------------------------------------------------
    def seeds(self) -> Dict[str, FileSeeds]:
        """Display path -> what its rules need to know."""
        p = self.p
        out: Dict[str, FileSeeds] = {}
        for fid, params in self.passed_constants().items():
            mid = p.functions[fid][0]
            m = p.modules[mid]
            seeds = out.setdefault(m.shown, FileSeeds())
            seeds.project.setdefault("params", {})[str(p.local_index[fid])] = params
        for fid, names in self.host_parameters().items():
            m = p.modules[p.functions[fid][0]]
            out.setdefault(m.shown, FileSeeds()).project.setdefault("host_params", {})[str(p.local_index[fid])] = names
        for fid, scalar_names in self.scalars.items():
            if self.hot[fid]:  # asked about hot functions only
                mid = p.functions[fid][0]
                m = p.modules[mid]
                seeds = out.setdefault(m.shown, FileSeeds())
                seeds.project.setdefault("scalars", {})[str(p.local_index[fid])] = sorted(scalar_names)
        # cuDNN facts (SPD701), for the files that train or touch cudnn settings: whether the
        # program a file belongs to (it and the project modules it imports, or that import it)
        # builds convolutions; whether the autotuner is switched on, a step loop runs, inputs
        # have fixed shapes in a program the file belongs to (`scope`: not a sibling script's)
        benchmark_on = self.program_wide("benchmark_on")
        fixed_shapes = self.program_wide("fixed_shapes")
        step_modules = {mid for mid, _, _ in self.step_loops}
        trains = self.in_program([m.id in step_modules for m in p.modules])
        called = self._called_from_other_modules()
        conv_of = self._conv_reach()
        conv_steps = conv_in_steps(self)
        for m in p.modules:
            if m.id in step_modules or m.summary.get("cudnn_text"):
                seeds = out.setdefault(m.shown, FileSeeds())
                cudnn = [conv_of[m.id], benchmark_on[m.id], trains[m.id], fixed_shapes[m.id]]
                if m.id in step_modules:  # (its own step loops run convolutions: the network trained is a conv net)
                    cudnn.append(m.id in conv_steps)
                seeds.project["cudnn"] = cudnn
        for fid in called:
            mid = p.functions[fid][0]
            if p.modules[mid].summary.get("cudnn_text"):
                seeds = out.setdefault(p.modules[mid].shown, FileSeeds())
                seeds.project.setdefault("called", []).append(p.local_index[fid])
        uses = self.loader_uses()
        for mid, loops in self.pinned_loops.items():
            out.setdefault(p.modules[mid].shown, FileSeeds()).project["pinned_loops"] = loops
        for (mid, line), facts in uses.items():
            if facts:
                seeds = out.setdefault(p.modules[mid].shown, FileSeeds())
                seeds.project.setdefault("loaders", {})[str(line)] = facts
                if "moved" in facts:
                    seeds.gpu = True  # its batches go to the GPU elsewhere
        gpu_of = [bool(m.summary.get("gpu")) for m in p.modules]
        for fid, kinds in enumerate(self.hot):
            if not kinds:
                continue
            mid, fn = p.functions[fid]
            m = p.modules[mid]
            local = p.local_index[fid]
            seeds = out.setdefault(m.shown, FileSeeds())
            seeds.functions[local] = dict(kinds)
            for chain in kinds.values():
                root = self._root_module(chain) if chain else mid
                if root is not None and (gpu_of[root] or root in self.framework_modules):  # its trainer places it
                    seeds.gpu = True
        for mid, step_fid, loop in self.step_loops:
            m = p.modules[mid]
            body = self._body(mid, step_fid)
            seeds = out.setdefault(m.shown, FileSeeds())
            seeds.step_loops = tuple(sorted({*seeds.step_loops, body["loops"][loop]["g"]}))
        for m in p.modules:
            makers = self._module_makers(m.id)
            if makers:
                out.setdefault(m.shown, FileSeeds()).project["models"] = sorted(makers)
        self._loop_envs = {}
        # command-line option defaults declared in another module of the same program
        # (`main.py` parses, `exp/trainer.py` reads `self.args.use_amp`), for the files with seeds
        options_of = self._program_options()
        for m in p.modules:
            file_seeds = out.get(m.shown)
            if file_seeds is not None and options_of[m.id]:
                file_seeds.project["options"] = options_of[m.id]
        return out

    def _program_options(self) -> List[Dict[str, Any]]:
        """Per module: the on/off options declared elsewhere in its program (the modules connected
        to it by imports) with one known default each; a name declared with different defaults,
        or in the module itself (its own parser is read directly), is left out. One pass per
        connected component (a library is one component of thousands of modules)."""
        p = self.p
        component, members = self._components()
        declared: List[Dict[str, Set[str]]] = []  # per component: option -> the defaults written
        for mids in members:
            found: Dict[str, Set[str]] = {}
            for cur in mids:
                for dest, values in (p.modules[cur].summary.get("options") or {}).items():
                    found.setdefault(dest, set()).update(map(repr, values))
            declared.append(found)
        switches: List[Dict[str, bool]] = []  # per component: the options with one on/off default
        for found in declared:
            known = ((d, _literal(next(iter(vs)))) for d, vs in sorted(found.items()) if len(vs) == 1)
            switches.append({d: v for d, v in known if isinstance(v, bool)})
        out: List[Dict[str, Any]] = []
        for m in p.modules:
            own = m.summary.get("options") or {}
            out.append({d: v for d, v in switches[component[m.id]].items() if d not in own})
        return out

    def _components(self) -> Tuple[List[int], List[List[int]]]:
        """The modules connected by imports: each module's component, and each component's modules."""
        deps = self._import_deps()
        neighbours: List[Set[int]] = [set(d) for d in deps]
        for mid, targets in enumerate(deps):
            for t in targets:
                neighbours[t].add(mid)
        component = [-1] * len(self.p.modules)
        members: List[List[int]] = []
        for start in range(len(self.p.modules)):
            if component[start] >= 0:
                continue
            component[start] = len(members)
            mids = [start]
            for cur in mids:  # (the modules appended meanwhile are visited too)
                for nxt in neighbours[cur]:
                    if component[nxt] < 0:
                        component[nxt] = component[start]
                        mids.append(nxt)
            members.append(mids)
        return component, members

    def config_defaults(self, config_files: Sequence[str] = ()) -> Dict[int, Dict[str, List[Any]]]:
        """Per module: the keys of the yacs-style configs of its program (`_C = CN()`,
        `_C.DATA.NUM_WORKERS = 8` in a module that uses `CfgNode`) -> every literal value the
        program gives them (the default, and each `config.DATA.NUM_WORKERS = 0` elsewhere, matched
        by the end of its path). A key that some code sets to something else, or that a YAML
        config file of the run holds (`DATA: {NUM_WORKERS: 0}`: a config merged in may set it), is
        left out: its value is not known; so is every key when a YAML file of the run cannot be
        read as a tree. Only for the components that hold such a config."""
        p = self.p
        if not any(m.summary.get("cfgnode") and m.summary.get("config_writes") for m in p.modules):
            return {}
        component, members = self._components()
        yaml_roots: Any = ()  # (not read yet)
        out: Dict[int, Dict[str, List[Any]]] = {}
        for mids in members:
            keys = {
                key for mid in mids if p.modules[mid].summary.get("cfgnode")
                for key in p.modules[mid].summary.get("config_writes") or {}
            }
            if not keys:
                continue
            if yaml_roots == ():
                yaml_roots = _yaml_roots(config_files)
            if yaml_roots is None:
                continue
            writes = [w for mid in mids for w in (p.modules[mid].summary.get("config_writes") or {}).items()]
            known: Dict[str, List[Any]] = {}
            for key in sorted(keys):
                entries = [e for path, es in writes if path == key or path.endswith("." + key) for e in es]
                if any(len(e) < 2 for e in entries):
                    continue  # set from an expression somewhere
                if any(_holds(root, key.split(".")) for root in yaml_roots):
                    continue
                values: List[Any] = []
                for e in entries:
                    if e[1] not in values:
                        values.append(e[1])
                known[key] = values
            if known:
                for mid in mids:
                    out[mid] = known
        return out

    def program_wide(self, key: str) -> List[bool]:
        """Per module: a module of a program it belongs to has the summary fact `key` (`scope`)."""
        memo: Dict[str, List[bool]] = self.__dict__.setdefault("_program_wide", {})
        got = memo.get(key)
        if got is None:
            got = memo[key] = self.in_program([bool(m.summary.get(key)) for m in self.p.modules])
        return got

    def in_program(self, flags: List[bool]) -> List[bool]:
        """Per module: a program it belongs to has a module `flags` marks (`scope.program_holds`;
        entries: the scripts with a `__main__` guard and the modules with a training loop)."""
        steps = {mid for mid, _, _ in self.step_loops}
        entries = [bool(m.summary.get("script")) or m.id in steps for m in self.p.modules]
        return program_holds(self._import_deps(), flags, entries)

    def _import_deps(self) -> List[Set[int]]:
        """Per module: the project modules it imports (`import x`, `from x import y`, `from . import sub`,
        `from x import *`, the modules a plugin load may give: `program.plugins`)."""
        if self._deps is not None:
            return self._deps
        p = self.p
        deps: List[Set[int]] = [set() for _ in p.modules]
        for m in p.modules:
            for imp in m.summary["imports"].values():
                if imp[0] == "mod":
                    target = p._find_module(m.id, imp[1], 0)
                else:
                    target = p._find_module(m.id, imp[1], imp[2])
                    sub = p._find_module(m.id, f"{imp[1]}.{imp[3]}" if imp[1] else imp[3], imp[2])
                    if sub is not None and sub != m.id:
                        deps[m.id].add(sub)
                if target is not None and target != m.id:
                    deps[m.id].add(target)
            for module, level in m.summary.get("star") or ():  # `from utils import *`
                target = p._find_module(m.id, module, level)
                if target is not None and target != m.id:
                    deps[m.id].add(target)
            for spec in m.summary.get("plugins") or ():
                deps[m.id].update(plugin_modules(p, m.id, spec))
        self._deps = deps
        return deps

    def _conv_reach(self) -> List[bool]:
        """Per module: it, a project module it imports (transitively), or one importing it builds
        convolutions. A folder of independent scripts (one MLP agent next to conv agents) is not
        one program."""
        p = self.p
        deps = self._import_deps()
        reach: List[bool] = []
        for m in p.modules:
            seen, todo, found = {m.id}, [m.id], False
            while todo and not found:
                cur = todo.pop()
                found = bool(p.modules[cur].summary.get("conv"))
                for nxt in deps[cur]:
                    if nxt not in seen:
                        seen.add(nxt)
                        todo.append(nxt)
            reach.append(found)
        importers: List[Set[int]] = [set() for _ in p.modules]
        for mid, targets in enumerate(deps):
            for t in targets:
                importers[t].add(mid)
        # a seeding helper in `utils.py` belongs to the scripts that import it
        return [r or any(reach[i] for i in importers[mid]) for mid, r in enumerate(reach)]

    def _module_makers(self, mid: int) -> Set[str]:
        """The callees (as written in this file: `Tacotron`, `build_model`, `models.resnet50`)
        whose calls give a torch module: a project subclass of `nn.Module`, or what a project
        function returns. A file's rules cannot see a class defined in another file."""
        p = self.p
        m = p.modules[mid]
        found: Set[str] = set()
        seen: Set[str] = set()
        for fid in (None, *m.fids):
            body = self._body(mid, fid)
            env: Optional[Dict[str, Set[str]]] = None
            for call in body["calls"]:
                text = _callee_text(call[1])
                if text is None or text in seen:
                    continue
                seen.add(text)
                if env is None:
                    # one `loader_uses` computed is the same: every name and attribute it
                    # resolved is memoised, nothing has changed since, and it is only read
                    env = self._loop_envs.get(fid) if fid is not None else None
                    if env is None:
                        env = self._env(mid, fid)
                if any(self._makes_module(o) for o in p.eval(mid, fid, call[1], env)):
                    found.add(text)
        return found

    def _makes_module(self, obj: str) -> bool:
        kind, _, rest = obj.partition(":")
        if kind == "C":
            return self.p.is_module_class(int(rest))
        if kind in ("F", "B"):
            return any(o[0] == "I" and self.p.is_module_class(int(o[2:])) for o in self.p.ret_types[int(rest)])
        return False

    def _root_module(self, chain: Tuple[Hop, ...]) -> Optional[int]:
        if self._by_shown is None:
            self._by_shown = {m.shown: m.id for m in self.p.modules}
        return self._by_shown.get(chain[0].path)


def _may_pass_tensor(fn: Dict[str, Any], named: List[str], npos: int, skip: int, call: List[Any]) -> Set[str]:
    """The parameters of `fn` (as `Hotness.host_parameters` names them) that `call` may pass
    something other than a Python value: what it passes there is not known to be one (`C_HOST`),
    or an unpacked sequence or mapping may fill them."""
    args, kws = call[C_ARGS], call[C_KWS]
    host = set(call[C_HOST]) if len(call) > C_HOST else set()
    star, dstar = "*" in kws, "**" in kws
    may: Set[str] = set()
    positional = named[skip:npos]
    for j, name in enumerate(positional):
        if name in kws:
            if name not in host:
                may.add(name)
        elif star or (j >= len(args) and dstar) or (j < len(args) and j not in host):
            may.add(name)
    for name in named[npos:]:  # keyword-only
        if (name in kws and name not in host) or (name not in kws and dstar):
            may.add(name)
    vararg = next((q for q in fn["params"] if q.startswith("*")), None)
    if vararg is not None and (star or any(j not in host for j in range(len(positional), len(args)))):
        may.add(vararg)
    varkw = fn.get("varkw")
    if varkw and (dstar or any(k not in host for k in kws if k not in named and k not in ("*", "**"))):
        may.add("**" + varkw)
    return may


def _yaml_roots(config_files: Sequence[str]) -> Optional[List[Any]]:
    """The top-level mappings of the run's YAML config files (`configs.sources.load`, cached);
    None when one of them cannot be read as a tree (it may set any key)."""
    roots = []
    for path in config_files:
        if not path.endswith((".yaml", ".yml")):
            continue
        doc, _ = load(path)
        if doc is None:
            continue  # not readable as UTF-8: not a config a program merges either
        if not doc.understood:
            return None
        if isinstance(doc.root, Mapping):
            roots.append(doc.root)
    return roots


def _holds(root: Any, keys: List[str]) -> bool:
    """Whether the mapping `root` has the key path `keys` (`DATA: {NUM_WORKERS: ...}`)."""
    node = root
    for key in keys:
        get = getattr(node, "get", None)  # (a Mapping; a scalar or a list holds no keys)
        node = get(key) if get is not None else None
        if node is None:
            return False
    return True


def link(files: Sequence[Tuple[str, str, Dict[str, Any]]], config_files: Sequence[str] = ()) -> Dict[str, FileSeeds]:
    """Summaries of every file of a run -> the seeds of each file that the whole program makes hot.
    `config_files`: the config files the run found (absolute paths), which code may read."""
    files = [f for f in files if f[2] is not None]
    if not files:
        return {}
    # The link allocates millions of sets, tuples and dicts and frees nearly all of them by
    # reference counting when it returns: the cyclic collector's passes over them find nothing
    # (and a pass changes no result), so it rests meanwhile.
    collecting = gc.isenabled()
    gc.disable()
    try:
        return _link(files, config_files)
    finally:
        if collecting:
            gc.enable()


def _link(files: Sequence[Tuple[str, str, Dict[str, Any]]], config_files: Sequence[str]) -> Dict[str, FileSeeds]:
    program = Program(files)
    hot = ProgramFacts(program)
    seeds = hot.seeds()
    add_data_seeds(hot, seeds, FileSeeds, config_files)
    unseen_calls = add_framework_seeds(hot, seeds, FileSeeds, hot._conv_reach, hot.program_wide, config_files)
    add_inference_seeds(hot, seeds, FileSeeds, EVAL_NAME, unseen_calls)  # no_grad functions only inference reaches
    # Hugging Face and accelerate: TF32 anywhere, accelerate's repository config, argument files
    add_hf_seeds(
        [(m.path, m.shown, m.summary) for m in program.modules], seeds, FileSeeds, config_files,
        in_program=hot.in_program,  # per entry script
    )
    add_helper_seeds(hot, seeds, FileSeeds, LOADER_NAMES)  # loader-building helpers: the workers each call passes
    for mid, known in hot.config_defaults(config_files).items():
        m = program.modules[mid]
        if m.summary.get("loaders") or m.shown in seeds:  # (files that build or use a loader)
            seeds.setdefault(m.shown, FileSeeds()).project["config_defaults"] = known
    return seeds
