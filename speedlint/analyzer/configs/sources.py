"""One config as the code sees it: its layers, and the value (and line) behind a key path.

A source is a list of layers, lowest priority first: (file, where it is mounted). A plain file is
one layer at the root. A file that inherits another through a `base:`-like key (`_base_`,
`__base__`, `_BASE_`, `base`, `inherit`, `inherit_from`, `extends`, or a `defaults:` list of
file names, when every name is a config file next to it) has that file below it. Hydra's
primary config (`@hydra.main(config_path=..., config_name=...)`) is composed as Hydra composes
it: each `defaults:` entry `group: name` mounts `<config_path>/<group>/<name>.yaml` under
`group` (or at the root with `# @package _global_`), a plain entry `name` merges
`<config_path>/<name>.yaml` at the root, and the primary file itself comes where `_self_` is
listed (last when it is not).

`compose` runs where the whole program is linked (it knows which config files the run found);
`ConfigView` looks values up in the layers it is given (in a worker process too).
"""

from __future__ import annotations

import hashlib
import os
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Dict, Iterable, Iterator, List, Optional, Set, Tuple

from speedlint.analyzer.configs.reader import ConfigDoc, Mapping, Node, Scalar, Sequence, read_config

#: Keys by which a config names the config it inherits from.
BASE_KEYS = ("_base_", "__base__", "_BASE_", "base", "inherit", "inherit_from", "extends", "defaults")
_MAX_LAYERS = 32

#: A layer: (absolute path, mount point, content hash of the file).
Layer = Tuple[str, Tuple[str, ...], str]


_DOCS: Dict[str, Tuple[Tuple[int, int], Optional[ConfigDoc], str]] = {}
#: Texts that stand for files while `fix` works out its fixes (a config edited in memory).
_OVERRIDES: Dict[str, str] = {}


@contextmanager
def overridden(texts: Dict[str, str]) -> Iterator[None]:
    """Within the block, `load(path)` reads `texts[path]` instead of the file."""
    saved = dict(_OVERRIDES)
    _OVERRIDES.update(texts)
    try:
        yield
    finally:
        _OVERRIDES.clear()
        _OVERRIDES.update(saved)


def load(path: str) -> Tuple[Optional[ConfigDoc], str]:
    """The file's tree and content hash (None when it cannot be read), cached by mtime and size."""
    if path in _OVERRIDES:
        text = _OVERRIDES[path]
        return read_config(path, text), hashlib.sha1(text.encode("utf-8")).hexdigest()[:16]
    try:
        st = os.stat(path)
    except OSError:
        return None, ""
    stamp = (st.st_mtime_ns, st.st_size)
    known = _DOCS.get(path)
    if known is not None and known[0] == stamp:
        return known[1], known[2]
    try:
        with open(path, "rb") as fh:
            data = fh.read()
        text = data.decode("utf-8")
    except (OSError, UnicodeDecodeError):
        _DOCS[path] = (stamp, None, "")
        return None, ""
    digest = hashlib.sha1(data).hexdigest()[:16]
    doc = read_config(path, text)
    _DOCS[path] = (stamp, doc, digest)
    return doc, digest


def _root_mapping(doc: Optional[ConfigDoc]) -> Optional[Mapping]:
    if doc is None or not doc.understood or not isinstance(doc.root, Mapping):
        return None
    return doc.root


def _strings(node: Optional[Node]) -> Optional[List[str]]:
    if isinstance(node, Scalar) and isinstance(node.value, str):
        return [node.value]
    if isinstance(node, Sequence) and node.items and all(isinstance(n, Scalar) and isinstance(n.value, str) for n in node.items):
        return [n.value for n in node.items]  # type: ignore[union-attr]
    return None


def _find_file(folder: str, name: str, known: Set[str]) -> Optional[str]:
    for candidate in (name, name + ".yaml", name + ".yml", name + ".json"):
        path = os.path.normpath(os.path.join(folder, candidate))
        if path in known:
            return path
    return None


def compose(path: str, known: Set[str], hydra: bool = False) -> List[Layer]:
    """The layers of the config whose primary file is `path` (lowest priority first)."""
    out: List[Layer] = []
    _compose(path, (), known, hydra, out, set(), 0)
    return out[:_MAX_LAYERS]


def _compose(path: str, mount: Tuple[str, ...], known: Set[str], hydra: bool, out: List[Layer], seen: Set[str], depth: int) -> None:
    if path in seen or depth > 6 or len(out) > _MAX_LAYERS:
        return
    seen.add(path)
    doc, digest = load(path)
    root = _root_mapping(doc)
    here = (path, mount, digest)
    if root is None:
        out.append(here)
        return
    folder = os.path.dirname(path)
    if hydra:
        _hydra(path, root, mount, known, out, seen, depth)
        return
    for key in BASE_KEYS:
        names = _strings(root.get(key))
        if not names:
            continue
        files = [_find_file(folder, n, known) for n in names]
        if all(files):
            for f in files:
                _compose(f, mount, known, False, out, seen, depth + 1)  # type: ignore[arg-type]
    out.append(here)


def _hydra(path: str, root: Mapping, mount: Tuple[str, ...], known: Set[str], out: List[Layer], seen: Set[str], depth: int) -> None:
    """Hydra's defaults list: groups mounted under their names, `_self_` where it is listed."""
    config_dir = os.path.dirname(path) if not mount else _hydra_dir(path, mount)
    defaults = root.get("defaults")
    entries = defaults.items if isinstance(defaults, Sequence) else []
    self_done = False
    doc, digest = load(path)
    for entry in entries:
        if isinstance(entry, Scalar) and isinstance(entry.value, str):
            if entry.value == "_self_":
                out.append((path, mount, digest))
                self_done = True
                continue
            target = _find_file(config_dir, entry.value, known)
            if target is not None:
                _hydra(target, _root_mapping(load(target)[0]) or Mapping(), mount, known, out, seen, depth + 1)
            continue
        if not isinstance(entry, Mapping) or len(entry.entries) != 1:
            continue
        (key, item), = entry.entries.items()
        choice = item.node
        if not isinstance(choice, Scalar) or not isinstance(choice.value, str):
            continue  # `group: null`, a list of choices: nothing (or too much) to compose
        group = key.split()[-1]  # `override group`, `optional group`
        group, _, package = group.partition("@")
        target = _find_file(os.path.join(config_dir, *group.split("/")), choice.value, known)
        if target is None:
            continue
        sub = _root_mapping(load(target)[0])
        if _global_package(target) or package == "_global_":
            where = mount
        else:
            where = mount + tuple((package or group).split("/"))
        if target in seen:
            continue
        seen.add(target)
        if sub is not None and isinstance(sub.get("defaults"), Sequence):
            _hydra(target, sub, where, known, out, seen, depth + 1)
        else:
            out.append((target, where, load(target)[1]))
    if not self_done:
        out.append((path, mount, digest))


def _hydra_dir(path: str, mount: Tuple[str, ...]) -> str:
    """The config folder of a group file mounted at `mount` (`conf/train/x.yaml` at ("train",) -> `conf`)."""
    folder = os.path.dirname(path)
    for _ in mount:
        folder = os.path.dirname(folder)
    return folder


def _global_package(path: str) -> bool:
    try:
        with open(path, encoding="utf-8") as fh:
            head = fh.read(400)
    except (OSError, UnicodeDecodeError):
        return False
    return any(line.strip().replace(" ", "") == "#@package_global_" for line in head.splitlines()[:5])


@dataclass(frozen=True)
class Found:
    """What a key path gives: a scalar (`scalar`), a mapping or list (`node` only), nothing."""

    status: str  # "value" | "node" | "missing" | "unknown"
    value: Any = None
    scalar: Optional[Scalar] = None
    path: str = ""  # the file that holds it
    node: Optional[Node] = None
    keys: Tuple[Any, ...] = ()  # the key path in that file (without the layer's mount point)


MISSING = Found("missing")
UNKNOWN = Found("unknown")


class ConfigView:
    """Lookups in the layers of one source (highest priority first)."""

    def __init__(self, layers: Iterable[Layer]) -> None:
        self.layers = list(layers)

    def lookup(self, keys: Tuple[Any, ...]) -> Found:
        for path, mount, _ in reversed(self.layers):
            n = len(mount)
            if tuple(keys[:n]) != tuple(mount):
                if tuple(mount[: len(keys)]) == tuple(keys):
                    return Found("node", path=path)  # a prefix of a group: a sub-config
                continue
            doc, _digest = load(path)
            if doc is None or not doc.understood:
                return UNKNOWN
            node: Optional[Node] = doc.root
            for key in keys[n:]:
                if isinstance(node, Mapping):
                    node = node.get(str(key))
                elif isinstance(node, Sequence) and isinstance(key, int) and 0 <= key < len(node.items):
                    node = node.items[key]
                else:
                    node = None
                if node is None:
                    break
            if node is None:
                continue
            if isinstance(node, Scalar):
                return Found("value", node.value, node, path, node, tuple(keys[n:]))
            return Found("node", path=path, node=node, keys=tuple(keys[n:]))
        return MISSING

    def files(self) -> List[str]:
        return [path for path, _, _ in self.layers]
