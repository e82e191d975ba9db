"""Whole-program framework facts, added to the files' seeds (`program.link` calls `add_framework_seeds`).

Per file, in `FileSeeds.project`:

* `framework_hooks`: function ordinal -> [kind, hook name, runs without grad]: the methods a
  framework's own loop calls ("step", "eval", "loader": a `*_dataloader()` hook);
* `hparams`: class name -> {"options": {name: [defaults]}, "config": {name: [path, line, raw, value,
  col, end_col, style, shared]}}:
  what `self.hparams.name` holds in a Lightning class: the argparse defaults of the namespace
  every constructor call passes (`self.hparams = args`, Lightning 1.x), and the values of a
  Hydra config whose `_target_` names the class (`save_hyperparameters()` with
  `hydra.utils.instantiate(cfg.data)`); the `__init__` default is read by the file's own tracer.

No framework is imported; the program model is read through `Hotness` (`program.facts` calls this
module after the link).
"""

from __future__ import annotations

from typing import Any, Callable, Dict, Iterable, List, Optional, Tuple

from speedlint.analyzer.configs.reader import Mapping, Scalar, Sequence
from speedlint.analyzer.configs.sources import compose, load
from speedlint.analyzer.frameworks import lightning
from speedlint.analyzer.frameworks.hooks import TABLES, class_hooks, framework_runs_without_grad
from speedlint.analyzer.program.hotness import Hotness
from speedlint.analyzer.program.link import Program
from speedlint.analyzer.program.seeds import FileSeeds


#: How a Lightning callback names the LightningModule it is given (`on_train_batch_end(self, trainer, pl_module, ...)`).
_MODULE_PARAMS = frozenset({"pl_module", "lightning_module"})


def add_framework_seeds(
    hot: Hotness,
    seeds: Dict[str, FileSeeds],
    new_seeds: Callable[[], FileSeeds],
    conv_reach: Callable[[], List[bool]],
    program_wide: Callable[[str], List[bool]],
    config_files: Iterable[str] = (),
) -> Dict[int, List[Tuple[int, int]]]:
    """Adds the facts above (`conv_reach()`: per module, whether a conv net is in its program;
    `program_wide(key)`: per module, whether a module of its program has the summary fact `key`); returns the calls the program's own resolution cannot see:
    callee fid -> [(caller fid, call index)] (a callback's `pl_module.log_images(...)` runs the
    project LightningModules' `log_images`)."""
    p = hot.p
    extra: Dict[int, List[Tuple[int, int]]] = {}

    def file_seeds(mid: int) -> FileSeeds:
        shown = p.modules[mid].shown
        got = seeds.get(shown)
        if got is None:
            got = seeds[shown] = new_seeds()
        return got

    def project(mid: int) -> Dict[str, Any]:
        return file_seeds(mid).project

    framework_classes: List[int] = []
    for cid, (mid, q, c) in enumerate(p.classes):
        bases = p.all_base_names(cid)
        if not any(t.matches(bases) for t in TABLES):
            continue
        framework_classes.append(cid)
        hooks = class_hooks(bases, c["methods"])
        if hooks:
            table = project(mid).setdefault("framework_hooks", {})
            for name, kind in hooks.items():
                fid = p.modules[mid].fids[c["methods"][name]]
                table[str(p.local_index[fid])] = [kind, name, framework_runs_without_grad(bases, name)]
    _add_trainer_configs(p, config_files, project)
    _add_trainer_cudnn(hot, project, conv_reach, program_wide)
    if not framework_classes:
        return extra
    _callback_calls(p, framework_classes, extra)
    for cid in framework_classes:
        _loader_hooks(p, cid, file_seeds)
    targets = _hydra_targets(config_files)
    for cid in framework_classes:
        mid, q, c = p.classes[cid]
        if not lightning.HOOKS.matches(p.all_base_names(cid)):
            continue
        found: Dict[str, Any] = {}
        options = _namespace_options(p, cid)
        if options:
            found["options"] = options
        name = q.rsplit(".", 1)[-1]
        module = p.modules[mid].name
        for target, values in targets.items():
            head, _, tail = target.rpartition(".")
            if tail == name and (not module or head == module or head.endswith("." + module) or module.endswith("." + head) or module == head.rsplit(".", 1)[-1]):
                found.setdefault("config", {}).update(values)
        if found:
            project(mid).setdefault("hparams", {})[name] = found
    return extra


def _callback_calls(p: Program, framework_classes: List[int], extra: Dict[int, List[Tuple[int, int]]]) -> None:
    """`pl_module.name(...)` in a callback's methods: the `name` methods of the project's
    LightningModules (what the program cannot resolve: the module is a parameter)."""
    modules = [cid for cid in framework_classes if lightning.HOOKS.matches(p.all_base_names(cid))]
    callbacks = [cid for cid in framework_classes if lightning.CALLBACK_HOOKS.matches(p.all_base_names(cid))]
    if not modules or not callbacks:
        return
    for cid in callbacks:
        mid, q, c = p.classes[cid]
        for idx in c["methods"].values():
            fid = p.modules[mid].fids[idx]
            fn = p.functions[fid][1]
            for index, call in enumerate(fn["calls"]):
                func = call[1]
                if not (func and func[0] == "a" and func[1] and func[1][0] == "n" and func[1][1] in _MODULE_PARAMS):
                    continue
                for target in modules:
                    callee = p.method(target, func[2])
                    if callee is not None:
                        extra.setdefault(callee, []).append((fid, index))


#: Loader hooks a fit iterates every epoch; the others (test, predict) run once when called.
_EVERY_EPOCH = frozenset({"train_dataloader", "val_dataloader"})
#: Loader classes whose calls build a loader in a hook.
_LOADER_CLASSES = frozenset({"DataLoader"})


def _loader_hooks(p: Program, cid: int, file_seeds: Callable[[int], FileSeeds]) -> None:
    """The loaders built in a Lightning class's `*_dataloader()` hooks (methods, or methods bound
    to the hook's name in `__init__`: `self.train_dataloader = self._train_dataloader`): Lightning
    copies their batches to the device and iterates train/val loaders every epoch
    (`FileSeeds.project["loaders"]`, as the data-loading rules read it)."""
    mid, q, c = p.classes[cid]
    bases = p.all_base_names(cid)
    if not lightning.HOOKS.matches(bases):
        return
    hooks: Dict[str, int] = {}  # hook name -> fid
    for name in lightning.HOOKS.loader:
        fid = p.method(cid, name)
        if fid is not None:
            hooks[name] = fid
    init = p.method(cid, "__init__")
    if init is not None:
        for name, exprs in p.functions[init][1]["attrs"].items():
            if name not in _EVERY_EPOCH or len(exprs) != 1:
                continue  # (a test or predict loader bound in `__init__` depends on the run's config)
            expr = exprs[0]
            if expr and expr[0] == "c" and expr[1] == ("n", "partial") and expr[2]:
                expr = expr[2][0]
            if expr and expr[0] == "a" and expr[1] == ("n", "self"):
                fid = p.method(cid, expr[2])
                if fid is not None:
                    hooks[name] = fid
    for name, fid in hooks.items():
        hmid, fn = p.functions[fid]
        for call in fn["calls"]:
            func = call[1]
            tail = func[1] if func and func[0] == "n" else func[2] if func and func[0] == "a" else ""
            if tail not in _LOADER_CLASSES:
                continue
            got = file_seeds(hmid)
            facts = got.project.setdefault("loaders", {}).setdefault(str(call[0]), {})
            facts.setdefault("moved", f"`{name}()` (Lightning iterates it and copies each batch to the model's device)")
            got.gpu = True
            if name in _EVERY_EPOCH:
                facts.setdefault("epoch", f"`{name}()` (Lightning iterates it every epoch)")


def _namespace_options(p: Program, cid: int) -> Dict[str, List[Any]]:
    """`self.hparams = args` (or `self.save_hyperparameters(args)`) in `__init__`, where every
    constructor call passes a namespace parsed in its own module: that module's option defaults."""
    init = p.method(cid, "__init__")
    if init is None:
        return {}
    fn = p.functions[init][1]
    params = list(fn["params"])
    held = fn["attrs"].get("hparams") or ()
    names = [e[1] for e in held if e and e[0] == "n"]
    for call in fn["calls"]:
        func = call[1]
        if func and func[0] == "a" and func[2] == "save_hyperparameters" and call[2] and call[2][0] and call[2][0][0] == "n":
            names.append(call[2][0][1])
    if len(names) != 1 or names[0] not in params:
        return {}
    position = params.index(names[0]) - (1 if params and params[0] == "self" else 0)
    merged: Dict[str, List[Any]] = {}
    callers = p.callers[init]
    if not callers:
        return {}
    for caller, index in callers:
        cmid, cfn = p.functions[caller]
        call = cfn["calls"][index]
        args, kws = call[2], call[3]
        passed = args[position] if position < len(args) else kws.get(names[0])
        if not passed or passed[0] != "n":
            return {}
        options = p.modules[cmid].summary.get("options") or {}
        if not options:
            return {}
        for dest, values in options.items():
            merged.setdefault(dest, [])
            for v in values:
                if v not in merged[dest]:
                    merged[dest].append(v)
    return merged


def _hydra_targets(config_files: Iterable[str]) -> Dict[str, Dict[str, List[Any]]]:
    """`_target_` (dotted class path) -> {key: [path, line, raw, value, col, end_col, style, shared]} of the scalar keys next to
    it, for every mapping of the YAML config files that has one."""
    out: Dict[str, Dict[str, List[Any]]] = {}
    for path in config_files:
        if not path.endswith((".yaml", ".yml")):
            continue
        try:
            with open(path, "rb") as fh:
                if b"_target_" not in fh.read():
                    continue
        except OSError:
            continue
        doc, _ = load(path)
        if doc is None or not doc.understood:
            continue
        for mapping in _mappings(doc.root):
            target = mapping.get("_target_")
            if not isinstance(target, Scalar) or not isinstance(target.value, str):
                continue
            values = out.setdefault(target.value, {})
            for key, entry in mapping.entries.items():
                node = entry.node
                if key != "_target_" and isinstance(node, Scalar) and node.located and key not in values:
                    values[key] = [path, node.line, node.raw, node.value, node.col, node.end_col, node.style, node.shared]
    return out


def _mappings(node: Optional[Any]) -> Iterable[Mapping]:
    todo = [node]
    while todo:
        cur = todo.pop()
        if isinstance(cur, Mapping):
            yield cur
            todo.extend(e.node for e in cur.entries.values())
        elif isinstance(cur, Sequence):
            todo.extend(cur.items)


def hook_entry(project: Dict[str, Any], ordinal: int) -> Optional[Tuple[str, str, bool]]:
    """(kind, hook name, runs without grad) of a file's function, from its seeds' `framework_hooks`."""
    got = (project.get("framework_hooks") or {}).get(str(ordinal))
    return (got[0], got[1], bool(got[2])) if got else None


#: Trainer keys whose values a precision finding needs (the rest is only listed by name).
_TRAINER_VALUES = ("precision", "accelerator", "gpus", "devices")
#: Calls that build a trainer from a config: Hydra's `instantiate(cfg.trainer)`, Lightning 1.x's
#: `Trainer.from_argparse_args(namespace)` (a namespace filled from a YAML `trainer:` block),
#: `LightningCLI(...)` (its YAML's `trainer:` block).
_FROM_CONFIG = frozenset({"instantiate", "from_argparse_args", "LightningCLI"})


def _add_trainer_configs(p: Program, config_files: Iterable[str], project: Callable[[int], Dict[str, Any]]) -> None:
    """`trainer_configs` for the modules that build a trainer from a config: one entry per
    trainer config of the project, [path, anchor line, keys, {key: [value, line, col, end_col, raw]},
    how] where `how` is "target" (a Hydra file whose composed `_target_` is a `Trainer`: the anchor
    is its own `accelerator` line) or "block" (a `trainer:` mapping inside a larger config: the
    anchor is the `trainer:` line)."""
    users = [m.id for m in p.modules if _builds_from_config(m.summary)]
    if not users:
        return
    files = [f for f in config_files if f.endswith((".yaml", ".yml"))]
    found: List[List[Any]] = []
    known = set(config_files)
    for path in files:
        try:
            with open(path, "rb") as fh:
                text = fh.read()
        except OSError:
            continue
        if b"trainer" not in text and b"Trainer" not in text and b"defaults" not in text:
            continue
        doc, _ = load(path)
        if doc is None or not doc.understood or not isinstance(doc.root, Mapping):
            continue
        target = _composed_trainer(path, doc.root, known)
        if target is not None:
            found.append(target)
            continue
        for entry in _entries_named(doc.root, "trainer"):
            if isinstance(entry.node, Mapping):
                found.append([path, entry.line, sorted(entry.node.entries), _values(entry.node), "block"])
    if found:
        for mid in users:
            project(mid)["trainer_configs"] = found


def _builds_from_config(summary: Dict[str, Any]) -> bool:
    for body in (summary["module"], *summary["functions"]):
        for call in body["calls"]:
            func = call[1]
            tail = func[1] if func and func[0] == "n" else func[2] if func and func[0] == "a" else ""
            if tail in _FROM_CONFIG:
                return True
    return False


def _composed_trainer(path: str, root: Mapping, known: set) -> Optional[List[Any]]:
    """A Hydra trainer config: its own keys over those of the files its `defaults:` list names."""
    merged: Dict[str, Any] = {}
    values: Dict[str, List[Any]] = {}
    for layer_path, _, _ in compose(path, known):
        doc, _ = load(layer_path)
        if doc is None or not doc.understood or not isinstance(doc.root, Mapping):
            return None
        merged.update(doc.root.entries)
        values.update(_values(doc.root))
    target = merged.get("_target_")
    if target is None or not isinstance(target.node, Scalar) or not str(target.node.value).endswith("Trainer"):
        return None
    own = root.entries.get("accelerator")
    line = own.line if own is not None else 1
    return [path, line, sorted(k for k in merged if k != "defaults"), values, "target"]


def _values(mapping: Mapping) -> Dict[str, List[Any]]:
    out: Dict[str, List[Any]] = {}
    for key in _TRAINER_VALUES:
        entry = mapping.entries.get(key)
        if entry is not None and isinstance(entry.node, Scalar) and entry.node.located:
            node = entry.node
            out[key] = [node.value, node.line, node.col, node.end_col, node.raw, node.style]
    return out


def _entries_named(node: Any, key: str) -> Iterable[Any]:
    todo = [node]
    while todo:
        cur = todo.pop()
        if isinstance(cur, Mapping):
            for k, entry in cur.entries.items():
                if k == key:
                    yield entry
                else:
                    todo.append(entry.node)


def _add_trainer_cudnn(
    hot: Hotness, project: Callable[[int], Dict[str, Any]], conv_reach: Callable[[], List[bool]], program_wide: Callable[[str], List[bool]]
) -> None:
    """`cudnn` (as `Hotness.seeds` gives it to training files) for the modules that build a
    Lightning trainer: the trainer runs the steps, so the file trains."""
    p = hot.p
    mids = [m.id for m in p.modules if _calls_named(m.summary, ("Trainer", "from_argparse_args", "Fabric"))]
    if not mids:
        return
    conv_of = conv_reach()
    benchmark_on = program_wide("benchmark_on")  # (per program: `program.scope`)
    fixed_shapes = program_wide("fixed_shapes")
    for mid in mids:
        facts = project(mid)
        if "cudnn" not in facts:
            facts["cudnn"] = [conv_of[mid], benchmark_on[mid], True, fixed_shapes[mid]]


def _calls_named(summary: Dict[str, Any], names: Tuple[str, ...]) -> bool:
    for body in (summary["module"], *summary["functions"]):
        for call in body["calls"]:
            func = call[1]
            tail = func[1] if func and func[0] == "n" else func[2] if func and func[0] == "a" else ""
            if tail in names:
                return True
    return False
