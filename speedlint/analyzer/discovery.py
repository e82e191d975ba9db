"""File discovery: the paths given, folders walked with `.gitignore` respected and default excludes."""

from __future__ import annotations

import os
from functools import lru_cache
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, List, Optional, Sequence, Tuple

import pathspec

DEFAULT_EXCLUDES = (
    ".bzr", ".direnv", ".eggs", ".git", ".hg", ".mypy_cache", ".nox", ".pants.d", ".pytest_cache",
    ".ruff_cache", ".speedlint_cache", ".svn", ".tox", ".venv", "venv", "__pypackages__", "__pycache__",
    "_build", "buck-out", "build", "dist", "node_modules", "site-packages",
)
PYTHON_SUFFIXES = (".py", ".pyi")


@dataclass
class Discovery:
    files: List[Path] = field(default_factory=list)
    missing: List[str] = field(default_factory=list)


def _spec(patterns: Iterable[str]) -> Optional[pathspec.PathSpec]:
    patterns = [p for p in patterns if p.strip()]
    return pathspec.GitIgnoreSpec.from_lines(patterns) if patterns else None


def _load_gitignore(folder: Path) -> Optional[pathspec.PathSpec]:
    path = folder / ".gitignore"
    try:
        return _spec(path.read_text(encoding="utf-8", errors="replace").splitlines())
    except OSError:
        return None


@lru_cache(maxsize=4096)
def _git_root(start: Path) -> Optional[Path]:
    for folder in [start, *start.parents]:
        if (folder / ".git").exists():
            return folder
    return None


class _Ignorer:
    """Decides whether a path is excluded: default names, user patterns, and .gitignore files."""

    def __init__(self, exclude: Sequence[str], root: Path, respect_gitignore: bool) -> None:
        self.names = set(DEFAULT_EXCLUDES)
        self.user = _spec(exclude)
        self.root = root
        self.respect_gitignore = respect_gitignore
        self._gitignores: dict = {}

    def _gitignore(self, folder: Path) -> Optional[pathspec.PathSpec]:
        if folder not in self._gitignores:
            self._gitignores[folder] = _load_gitignore(folder)
        return self._gitignores[folder]

    def user_excluded(self, path: Path) -> bool:
        if self.user is None:
            return False
        try:
            rel = path.resolve().relative_to(self.root)
        except ValueError:
            rel = Path(path.name)
        text = rel.as_posix() + ("/" if path.is_dir() else "")
        return self.user.match_file(text) or any(self.user.match_file(part) for part in rel.parts)

    def excluded(self, path: Path, is_dir: bool) -> bool:
        if path.name in self.names:
            return True
        if self.user_excluded(path):
            return True
        if not self.respect_gitignore:
            return False
        git_root = _git_root(path.parent.resolve())
        if git_root is None:
            return False
        resolved = path.resolve()
        for folder in [resolved.parent, *resolved.parent.parents]:
            spec = self._gitignore(folder)
            if spec is not None:
                rel = resolved.relative_to(folder).as_posix() + ("/" if is_dir else "")
                if spec.match_file(rel):
                    return True
            if folder == git_root:
                break
        return False


def discover(
    paths: Sequence[str],
    exclude: Sequence[str] = (),
    root: Optional[Path] = None,
    respect_gitignore: bool = True,
    force_exclude: bool = False,
) -> Discovery:
    """Python files under `paths`. Files named explicitly are kept unless `force_exclude`."""
    result = Discovery()
    ignorer = _Ignorer(exclude, (root or Path.cwd()).resolve(), respect_gitignore)
    seen = set()
    for raw in paths:
        path = Path(raw)
        if not path.exists():
            result.missing.append(raw)
            continue
        if path.is_file():
            if force_exclude and ignorer.excluded(path, False):
                continue
            key = path.resolve()
            if key not in seen:
                seen.add(key)
                result.files.append(path)
            continue
        for file in _walk(path, ignorer):
            key = file.resolve()
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
            elif entry.name.endswith(PYTHON_SUFFIXES) and not ignorer.excluded(path, False):
                yield path
        stack.extend(reversed(subdirs))
