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
from typing import Callable, Dict, Iterable, List, Optional, Sequence, Tuple

import pathspec

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


@lru_cache(maxsize=256)
def _spec(patterns: Tuple[str, ...]) -> Optional[pathspec.PathSpec]:
    patterns = tuple(p for p in patterns if p.strip())
    return pathspec.GitIgnoreSpec.from_lines(patterns) if patterns else None


def _load_gitignore(folder: Path) -> Optional[pathspec.PathSpec]:
    path = folder / ".gitignore"
    try:
        return _spec(tuple(path.read_text(encoding="utf-8", errors="replace").splitlines()))
    except OSError:
        return None


@lru_cache(maxsize=4096)
def _git_root(start: Path) -> Optional[Path]:
    for folder in [start, *start.parents]:
        if (folder / ".git").exists():
            return folder
    return None


@lru_cache(maxsize=8192)
def _resolved_folder(folder: Path) -> Path:
    return folder.resolve()


def resolve(path: Path) -> Path:
    """`path.resolve()`, resolving each folder once (files are many, folders few; `discover`
    forgets the folders at the start of each run)."""
    path = path.absolute()
    if path.name in ("", ".", "..") or path.is_symlink():
        return path.resolve()
    return _resolved_folder(path.parent) / path.name


def _relative(path: Path, root: Path) -> str:
    """`path` relative to `root` (posix); just the name when it lies outside."""
    try:
        return path.relative_to(root).as_posix()
    except ValueError:
        return path.name


def matches_excludes(path: Path, is_dir: bool, patterns: Sequence[str], root: Path) -> bool:
    """Whether `path` (or one of its folders below `root`) matches the gitignore-style `patterns`."""
    spec = _spec(tuple(patterns))
    if spec is None:
        return False
    rel = _relative(resolve(path), _resolved_folder(root.absolute()))
    if rel in ("", "."):
        return False
    return spec.match_file(rel + ("/" if is_dir else ""))


class _Ignorer:
    """Decides whether a path is excluded: config excludes (or defaults) and .gitignore files."""

    def __init__(self, excludes_for: ExcludesFor, respect_gitignore: bool) -> None:
        self.excludes_for = excludes_for
        self.respect_gitignore = respect_gitignore
        self._gitignores: Dict[Path, Optional[pathspec.PathSpec]] = {}
        self._by_folder: Dict[Path, Tuple[Sequence[str], Path]] = {}

    def _gitignore(self, folder: Path) -> Optional[pathspec.PathSpec]:
        if folder not in self._gitignores:
            self._gitignores[folder] = _load_gitignore(folder)
        return self._gitignores[folder]

    def _excludes(self, folder: Path) -> Tuple[Sequence[str], Path]:
        if folder not in self._by_folder:
            self._by_folder[folder] = self.excludes_for(folder)
        return self._by_folder[folder]

    def config_excluded(self, path: Path, is_dir: bool) -> bool:
        patterns, root = self._excludes(path.parent)
        return matches_excludes(path, is_dir, patterns, root)

    def excluded(self, path: Path, is_dir: bool) -> bool:
        if self.config_excluded(path, is_dir):
            return True
        if not self.respect_gitignore:
            return False
        resolved = resolve(path)
        git_root = _git_root(resolved.parent)
        if git_root is None:
            return False
        for folder in [resolved.parent, *resolved.parent.parents]:
            spec = self._gitignore(folder)
            if spec is not None:
                rel = resolved.relative_to(folder).as_posix() + ("/" if is_dir else "")
                if spec.match_file(rel):
                    return True
            if folder == git_root:
                break
        return False


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
            key = resolve(path)
            if key not in seen:
                seen.add(key)
                result.files.append(path)
            continue
        if force_exclude and ignorer.config_excluded(path.absolute(), True):
            continue
        for file in _walk(path, ignorer):
            key = resolve(file)
            if key not in seen:
                seen.add(key)
                result.files.append(file)
    return result


def _walk(top: Path, ignorer: _Ignorer) -> Iterable[Path]:
    stack = [top]
    while stack:
        folder = stack.pop()
        try:
            entries = sorted(os.scandir(folder), key=lambda e: e.name)
        except OSError:
            continue
        subdirs = []
        for entry in entries:
            path = Path(entry.path)
            try:
                is_dir = entry.is_dir()
            except OSError:
                continue
            if is_dir:
                if not entry.is_symlink() and not ignorer.excluded(path, True):
                    subdirs.append(path)
            elif entry.name.endswith(CHECKED_SUFFIXES) and not ignorer.excluded(path, False):
                yield path
        stack.extend(reversed(subdirs))
