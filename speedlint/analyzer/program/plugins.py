"""The modules a plugin load may give (`summary_plugins` records the loads), over the linked
project: the program treats each of them as the loaded module, so `model =
importlib.import_module(args.model); net = model.get_model()` reaches the `get_model` of every
module that can be loaded there, and `net(x)` in the step loop their forwards.

* `"a.b"`: the module `a.b`, found as an `import a.b` in that file would find it.
* `"a.b.*"`: every module directly in the package `a.b` (its `__init__` excluded).
* `"*"`: the top-level modules of the folders the file puts on `sys.path`; of its own folder (the
  script's folder is `sys.path[0]`), only the modules that define an `nn.Module` subclass and
  have no training loop of their own (a sibling entry script is another program, not a plugin).

A spec that would give more than `MAX_CANDIDATES` modules gives none: no guess.
"""

from __future__ import annotations

import os
import weakref
from typing import Any, Dict, List, Tuple

#: More candidate modules than this for one load: no guess.
MAX_CANDIDATES = 64


#: Per program: folder -> the modules directly in it, and (module id, spec) -> what it gives.
_FOLDERS: "weakref.WeakKeyDictionary[Any, Dict[str, List[int]]]" = weakref.WeakKeyDictionary()
_MEMO: "weakref.WeakKeyDictionary[Any, Dict[Tuple[int, str], List[int]]]" = weakref.WeakKeyDictionary()


def _direct_modules(p: Any, folder: str) -> List[int]:
    """The modules whose file sits directly in `folder` (not its `__init__.py`)."""
    index = _FOLDERS.get(p)
    if index is None:
        index = _FOLDERS[p] = {}
        for m in p.modules:
            if not m.is_package:
                index.setdefault(m.folder, []).append(m.id)
    return index.get(folder, [])


def _defines_module_class(p: Any, mid: int) -> bool:
    return any(p.is_module_class(cid) for cid in p.modules[mid].cids.values())


def _has_training_loop(p: Any, mid: int) -> bool:
    """A module that calls `backward()` itself: an entry script, not a plugin."""
    m = p.modules[mid]
    return any(fn.get("backward") for fn in (m.summary["module"], *m.summary["functions"]))


def plugin_modules(p: Any, mid: int, spec: str) -> List[int]:
    """The module ids that the load `spec` in module `mid` may give (`p`: the `Program`)."""
    memo = _MEMO.get(p)
    if memo is None:
        memo = _MEMO[p] = {}
    key = (mid, spec)
    got = memo.get(key)
    if got is None:
        got = memo[key] = _plugin_modules(p, mid, spec)
    return got


def _plugin_modules(p: Any, mid: int, spec: str) -> List[int]:
    m = p.modules[mid]
    if not spec.endswith("*"):
        found = p._find_module(mid, spec, 0)
        return [found] if found is not None and found != mid else []
    out: List[int] = []
    if spec == "*":
        for tail in m.summary.get("sys_path") or ():
            folder = os.path.normpath(os.path.join(m.folder, tail))
            if folder != m.folder:
                out.extend(c for c in _direct_modules(p, folder) if c not in out)
        out.extend(
            c for c in _direct_modules(p, m.folder)
            if c != mid and c not in out and _defines_module_class(p, c) and not _has_training_loop(p, c)
        )
    else:
        package = spec[:-2]  # "a.b.*" -> "a.b"
        init = p._find_module(mid, package, 0)
        if init is not None and p.modules[init].is_package:
            folder = p.modules[init].folder
        else:  # a namespace package: a folder without `__init__.py`, next to the file or above it
            folder, base = "", m.folder
            for _ in range(5):
                candidate = os.path.join(base, *package.split("."))
                if _direct_modules(p, candidate):
                    folder = candidate
                    break
                base = os.path.dirname(base)
            for tail in m.summary.get("sys_path") or ():
                if folder:
                    break
                candidate = os.path.normpath(os.path.join(m.folder, tail, *package.split(".")))
                if _direct_modules(p, candidate):
                    folder = candidate
        if folder:
            out = [c for c in _direct_modules(p, folder) if c != mid]
    return out if len(out) <= MAX_CANDIDATES else []
