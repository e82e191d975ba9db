"""The link half of SPD704 (`settings_use`): the performance settings the whole program declares
or loads and no code reads, into the seeds of the files that declare or load them."""

from __future__ import annotations

from typing import Any, Callable, Dict, Iterable, List, Optional, Set, Tuple

from speedlint.analyzer.configs.flow import ConfigFlow
from speedlint.analyzer.configs.reader import Mapping, kind_of, scalars
from speedlint.analyzer.configs.sources import load
from speedlint.analyzer.program.hotness import Hotness
from speedlint.analyzer.program.link import Program
from speedlint.analyzer.settings_use import PERFORMANCE_SETTINGS, SEEDS_KEY


def _handed_to_library(p: Program, mid: int, receivers: Iterable[str]) -> bool:
    """Whether a namespace of module `mid` is passed to something imported from outside the
    project (it may read any setting), or to a name that is not imported nor defined here."""
    imports = p.modules[mid].summary["imports"]
    for name in receivers:
        imp = imports.get(name)
        if imp is None:
            continue  # a local object or function of the file (`Trainer(args)`, `main(args)`)
        target = p._find_module(mid, imp[1], 0 if imp[0] == "mod" else imp[2])
        if target is None:
            return True
    return False



def add_unused_setting_seeds(hot: Hotness, project: Callable[[str], Dict[str, Any]], flow: Optional[ConfigFlow] = None) -> None:
    """The unused settings of the program into the seeds of the files that declare or load
    them (`project(shown)`: that file's `FileSeeds.project`). `flow`: the program's
    `configs.flow.ConfigFlow` (the config files it loads, and where), if any."""
    p = hot.p
    facts = [m.summary.get("settings") or {} for m in p.modules]
    for mid, f in enumerate(facts):
        if f.get("options"):  # checked by the program (`[]`: none unused), not by the file alone
            project(p.modules[mid].shown)[SEEDS_KEY] = []
    if not any(f.get("options") for f in facts) and (flow is None or not flow.load_sites):
        return
    if any(f.get("whole") for f in facts):
        return
    if any(f.get("receivers") and _handed_to_library(p, mid, f["receivers"]) for mid, f in enumerate(facts)):
        return
    reads: Set[str] = set()
    for f in facts:
        reads.update(f.get("reads", ()))
    out: Dict[int, List[List[Any]]] = {}
    for mid, f in enumerate(facts):
        seen: Set[str] = set()
        for line, col, dest, flag in f.get("options", ()):
            if dest not in reads and dest not in seen:
                seen.add(dest)
                out.setdefault(mid, []).append(["option", line, col, dest, flag, []])
    if flow is not None:
        for mid, line, path, keys, site in _unused_config_keys(flow, reads):
            out.setdefault(mid, []).append(["config", line, 0, str(keys[-1]), path, list(keys), site])
    for mid, entries in sorted(out.items()):
        project(p.modules[mid].shown)[SEEDS_KEY] = entries


def _unused_config_keys(flow: ConfigFlow, reads: Set[str]) -> List[Tuple[int, int, str, Tuple[Any, ...], List[Any]]]:
    """(loading module, load line, config path, key path, where the value is written: [line,
    col, end col, raw, style, shared, value, kind]) of the performance keys of the config files
    the program loads that no code reads."""
    out: List[Tuple[int, int, str, Tuple[Any, ...], List[Any]]] = []
    done: Set[str] = set()
    for sid, (mid, line) in sorted(flow.load_sites.items()):
        for path, _mount, _digest in flow.sources[sid]:
            if path in done:
                continue
            done.add(path)
            doc, _ = load(path)
            if doc is None or not doc.understood:
                continue
            for keys, scalar in scalars(doc.root):
                name = keys[-1] if keys else None
                if not isinstance(name, str) or name not in PERFORMANCE_SETTINGS or name in reads or not scalar.located:
                    continue
                if _instantiated(doc.root, keys, Mapping):
                    continue  # Hydra instantiates that node: the framework reads its keys
                site = [scalar.line, scalar.col, scalar.end_col, scalar.raw, scalar.style, scalar.shared, scalar.value, kind_of(path) or "yaml"]
                out.append((mid, line, path, tuple(keys), site))
    return out


def _instantiated(root: Any, keys: Tuple[Any, ...], mapping: Any) -> bool:
    """Whether a mapping on the way to `keys` has Hydra's `_target_` (it is instantiated)."""
    node = root
    for k in keys[:-1]:
        if not isinstance(node, mapping):
            return False
        if "_target_" in node.entries:
            return True
        node = node.get(str(k))
    return isinstance(node, mapping) and "_target_" in node.entries
