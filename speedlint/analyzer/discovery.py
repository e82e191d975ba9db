"""File discovery: the paths given, folders walked with `.gitignore` respected and excludes applied.

Excludes are gitignore-style patterns relative to the folder of the config file they come from
(a pattern without a slash, like `build` or `*_pb2.py`, matches that name at any depth). Each
folder uses the excludes of the config that applies to it (the closest one), given by the
`excludes_for(folder)` callback; `exclude` replaces the default list, `extend-exclude` adds to it.

Files named explicitly on the command line are always checked, unless `force_exclude` is set
(pre-commit passes every staged file by name: `--force-exclude` makes excludes apply to them).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Callable, Dict, Iterator, List, Optional, Sequence, Tuple

DEFAULT_EXCLUDES = (
    ".bzr", ".direnv", ".eggs", ".git", ".hg", ".mypy_cache", ".nox", ".pants.d", ".pytest_cache",
    ".ruff_cache", ".speedlint_cache", ".svn", ".tox", ".venv", "venv", "__pypackages__", "__pycache__",
    "_build", "buck-out", "build", "dist", "node_modules", "site-packages",
)
PYTHON_SUFFIXES = (".py", ".pyi")
#: Jupyter notebooks (`speedlint.analyzer.notebook`) are checked too, like ruff does.
NOTEBOOK_SUFFIXES = (".ipynb",)
CHECKED_SUFFIXES = PYTHON_SUFFIXES + NOTEBOOK_SUFFIXES

#: (patterns, the folder they are relative to) for a folder.
ExcludesFor = Callable[[Path], Tuple[Sequence[str], Path]]


@dataclass
class Discovery:
    files: List[Path] = field(default_factory=list)
    missing: List[str] = field(default_factory=list)


def exclude_patterns(exclude: Optional[Sequence[str]], extend_exclude: Sequence[str] = ()) -> Tuple[str, ...]:
    """The effective patterns: `exclude` (or the defaults when unset) plus `extend-exclude`."""
    base = DEFAULT_EXCLUDES if exclude is None else tuple(exclude)
    return tuple(base) + tuple(extend_exclude)


def _plain(pattern: str) -> bool:
    """A pattern that is just a name (no slash, wildcard, negation or escape): it matches any path
    with a component of that name, so a set answers it (`build`, `.venv`: every default)."""
    return not any(c in pattern for c in "/*?[]!\\#") and pattern == pattern.strip()


class _Patterns:
    """Gitignore-style patterns, matched against posix paths relative to their folder. Names
    alone (the defaults) are a set: no `pathspec` import, no regular expression per path."""

    __slots__ = ("names", "spec")

    def __init__(self, patterns: Tuple[str, ...]) -> None:
        patterns = tuple(p for p in patterns if p.strip())
        self.names: Optional[frozenset] = None
        self.spec = None
        if all(_plain(p) for p in patterns):
            self.names = frozenset(patterns)
        else:
            import pathspec

            self.spec = pathspec.GitIgnoreSpec.from_lines(patterns)

    def match(self, rel: str, is_dir: bool) -> bool:
        if self.names is not None:
            return any(part in self.names for part in rel.split("/"))
        return bool(self.spec.match_file(rel + "/" if is_dir else rel))  # type: ignore[union-attr]


@lru_cache(maxsize=256)
def _spec(patterns: Tuple[str, ...]) -> Optional[_Patterns]:
    patterns = tuple(p for p in patterns if p.strip())
    return _Patterns(patterns) if patterns else None


def _load_gitignore(folder: str) -> Optional[_Patterns]:
    try:
        with open(os.path.join(folder, ".gitignore"), encoding="utf-8", errors="replace") as fh:
            return _spec(tuple(fh.read().splitlines()))
    except OSError:
        return None


@lru_cache(maxsize=4096)
def _git_root(start: str) -> Optional[str]:
    folder = start
    while True:
        if os.path.exists(os.path.join(folder, ".git")):
            return folder
        parent = os.path.dirname(folder)
        if parent == folder:
            return None
        folder = parent


@lru_cache(maxsize=8192)
def _resolved_folder(folder: Path) -> Path:
    """`folder.resolve()`, built on its parent's: one `lstat` per folder, not one per component."""
    if folder.name in ("", ".", "..") or os.path.islink(folder):
        return folder.resolve()
    return _resolved_folder(folder.parent) / folder.name


def resolve_folder(folder: Path) -> Path:
    """`folder.resolve()`, each folder worked out once per run (see `resolve`)."""
    return _resolved_folder(folder)


def resolve(path: Path) -> Path:
    """`path.resolve()`, resolving each folder once (files are many, folders few; `discover`
    forgets the folders at the start of each run)."""
    path = path.absolute()
    if path.name in ("", ".", "..") or path.is_symlink():
        return path.resolve()
    return _resolved_folder(path.parent) / path.name


def _relative(path: str, root: str) -> str:
    """`path` relative to `root` (both resolved; posix); just the name when it lies outside."""
    if path == root:
        return ""
    if path.startswith(root.rstrip(os.sep) + os.sep):
        rel = path[len(root.rstrip(os.sep)) + 1:]
        return rel.replace(os.sep, "/") if os.sep != "/" else rel
    return os.path.basename(path)


def matches_excludes(path: Path, is_dir: bool, patterns: Sequence[str], root: Path) -> bool:
    """Whether `path` (or one of its folders below `root`) matches the gitignore-style `patterns`."""
    spec = _spec(tuple(patterns))
    if spec is None:
        return False
    rel = _relative(str(resolve(path)), str(_resolved_folder(root.absolute())))
    if rel in ("", "."):
        return False
    return spec.match(rel, is_dir)


class _Folder:
    """What the walk knows about one folder, worked out once for all its entries: where it
    really is, its excludes and the path prefix they see, and the `.gitignore` files above it."""

    __slots__ = ("real", "excludes", "prefix", "excluded_above", "gitignores", "in_git")

    def __init__(self, real: str, excludes: Optional[_Patterns], prefix: Optional[str], gitignores: List[Tuple[_Patterns, str]], in_git: bool) -> None:
        self.real = real  # resolved
        self.in_git = in_git  # inside a git checkout (only then do .gitignore files apply)
        self.excludes = excludes
        self.prefix = prefix  # the folder relative to the excludes' root + "/" ("" at the root; None outside it)
        # names alone: a folder between the root and here that matches excludes all below it
        self.excluded_above = bool(excludes is not None and excludes.names is not None and prefix and excludes.match(prefix[:-1], True))
        self.gitignores = gitignores  # (patterns, this folder relative to the .gitignore's folder + "/")

    def excluded(self, name: str, is_dir: bool) -> bool:
        spec = self.excludes
        if spec is not None:
            if spec.names is not None:
                if self.excluded_above or name in spec.names:
                    return True
            elif spec.match(name if self.prefix is None else self.prefix + name, is_dir):
                return True
        for patterns, prefix in self.gitignores:
            if patterns.match(prefix + name, is_dir):
                return True
        return False


class _Ignorer:
    """Decides whether a path is excluded: config excludes (or defaults) and .gitignore files."""

    def __init__(self, excludes_for: ExcludesFor, respect_gitignore: bool) -> None:
        self.excludes_for = excludes_for
        self.respect_gitignore = respect_gitignore
        self._gitignores: Dict[str, Optional[_Patterns]] = {}
        self._by_folder: Dict[str, Tuple[Sequence[str], Path]] = {}

    def _gitignore(self, folder: str) -> Optional[_Patterns]:
        if folder not in self._gitignores:
            self._gitignores[folder] = _load_gitignore(folder)
        return self._gitignores[folder]

    def _excludes(self, folder: Path) -> Tuple[Sequence[str], Path]:
        key = str(folder)
        if key not in self._by_folder:
            self._by_folder[key] = self.excludes_for(folder)
        return self._by_folder[key]

    def config_excluded(self, path: Path, is_dir: bool) -> bool:
        patterns, root = self._excludes(path.parent)
        return matches_excludes(path, is_dir, patterns, root)

    def folder(self, folder: str, real: str, parent: Optional[_Folder] = None, names: Sequence[str] = ()) -> _Folder:
        """The walk's view of `folder` (as given), whose resolved path is `real`. Below the top,
        `parent` is its folder's and `names` its entries: the .gitignore files come from them."""
        patterns, root = self._excludes(Path(folder))
        excludes = _spec(tuple(patterns))
        prefix: Optional[str] = None
        if excludes is not None:
            base = str(_resolved_folder(root.absolute()))
            if real == base or real.startswith(base.rstrip(os.sep) + os.sep):
                rel = _relative(real, base)
                prefix = rel + "/" if rel else ""
        gitignores: List[Tuple[_Patterns, str]] = []
        if parent is not None:
            in_git = parent.in_git or ".git" in names
            if self.respect_gitignore and in_git:
                own = self._gitignore(real) if ".gitignore" in names else None
                gitignores = [(own, "")] if own is not None else []
                if ".git" not in names:  # the checkout goes on above: so do its .gitignore files
                    step = os.path.basename(real) + "/"
                    gitignores += [(spec, step + rel) for spec, rel in parent.gitignores]
            return _Folder(real, excludes, prefix, gitignores, in_git)
        git_root = _git_root(real)
        if self.respect_gitignore:
            level, rel = real, ""
            while git_root is not None:
                spec = self._gitignore(level)
                if spec is not None:
                    gitignores.append((spec, rel))
                if level == git_root:
                    break
                up = os.path.dirname(level)
                if up == level:
                    break
                rel = os.path.basename(level) + "/" + rel
                level = up
        return _Folder(real, excludes, prefix, gitignores, git_root is not None)


def _fixed_excludes(exclude: Optional[Sequence[str]], root: Optional[Path]) -> ExcludesFor:
    patterns = exclude_patterns(exclude)
    base = (root or Path.cwd()).resolve()
    return lambda folder: (patterns, base)


def discover(
    paths: Sequence[str],
    exclude: Optional[Sequence[str]] = None,
    root: Optional[Path] = None,
    respect_gitignore: bool = True,
    force_exclude: bool = False,
    excludes_for: Optional[ExcludesFor] = None,
) -> Discovery:
    """Python files and notebooks under `paths`. Files named explicitly are kept unless `force_exclude`.

    `excludes_for(folder)` gives the patterns that apply in a folder and the folder they are
    relative to; without it, `exclude` (default list when None) relative to `root` applies everywhere.
    """
    result = Discovery()
    _resolved_folder.cache_clear()  # what the file system looked like in an earlier run
    _git_root.cache_clear()
    ignorer = _Ignorer(excludes_for or _fixed_excludes(exclude, root), respect_gitignore)
    seen = set()
    for raw in paths:
        path = Path(raw)
        if not path.exists():
            result.missing.append(raw)
            continue
        if path.is_file():
            if force_exclude and ignorer.config_excluded(path.absolute(), False):
                continue
            key = str(resolve(path))
            if key not in seen:
                seen.add(key)
                result.files.append(path)
            continue
        if force_exclude and ignorer.config_excluded(path.absolute(), True):
            continue
        for name, real in walk(str(path), ignorer):
            if real not in seen:
                seen.add(real)
                result.files.append(Path(name))
    return result


def _checked(name: str) -> bool:
    return name.endswith(CHECKED_SUFFIXES)


def walk(top: str, ignorer: _Ignorer, accept: Callable[[str], bool] = _checked) -> Iterator[Tuple[str, str]]:
    """(path, resolved path) of the files under `top` whose name `accept`s (by default the
    Python files and notebooks), in sorted order, folder by folder: strings and `os.scandir`
    entries, the exclusion rules worked out once per folder."""
    stack: List[Tuple[str, str, Optional[_Folder]]] = [(top, os.path.realpath(top), None)]
    while stack:
        folder, real, parent = stack.pop()
        try:
            with os.scandir(folder) as it:
                entries = sorted(it, key=lambda e: e.name)
        except OSError:
            continue
        here = ignorer.folder(folder, real, parent, [e.name for e in entries] if parent is not None else ())
        subdirs = []
        for entry in entries:
            name = entry.name
            try:
                is_dir = entry.is_dir()
            except OSError:
                continue
            if is_dir:
                if not entry.is_symlink() and not here.excluded(name, True):
                    subdirs.append((entry.path, os.path.join(real, name), here))
            elif accept(name) and not here.excluded(name, False):
                yield entry.path, os.path.realpath(entry.path) if entry.is_symlink() else os.path.join(real, name)
        stack.extend(reversed(subdirs))
