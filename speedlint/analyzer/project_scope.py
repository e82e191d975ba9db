"""The program around the files a user names: the project they belong to, not the names alone.

pre-commit passes only the changed files, an editor one buffer, a user `speedlint check
train.py`; the cost of a finding often sits in a module that was not named (the `.item()` in
`losses/focal.py` is hot because `train.py` calls it every step). So the whole-program model is
built over the project around the named paths, and only the named files are reported and fixed:
a file gets the same findings whether it is named alone or with its project.

The project of a named path is the closest folder at or above it holding a project marker
(`pyproject.toml`, `setup.cfg`, `.git`). When that folder lies above the current folder and the
named path below it, the current folder bounds it (`speedlint check .` there covers that folder
and no more: naming one of its files must give the same program). Paths with no marker above
them share one project: their common folder (never the home folder or a file system root, which
would mean walking the whole disk: then the named paths alone, as before).

The project is walked like any folder (`discovery`: its excludes, `.gitignore`); the files that
were not named only take part in the program phase, which reads their summaries from the cache
(an `ast` parse when cold, never LibCST).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Dict, List, Optional, Sequence, Tuple

from speedlint.analyzer.discovery import ExcludesFor, discover

#: Files or folders whose presence makes a folder a project's root.
PROJECT_MARKERS = ("pyproject.toml", "setup.cfg", ".git")


@dataclass(frozen=True)
class ProjectScope:
    """The program of a run whose named paths are not the whole project."""

    roots: Tuple[str, ...]  # the project folders (absolute), walked for the program's files
    files: Tuple[Tuple[Path, str], ...]  # (path, display path) of every file of the program, in walk order


def marker_folder(folder: str) -> Optional[str]:
    """The closest folder at or above `folder` (absolute) that holds a project marker."""
    while True:
        if any(os.path.exists(os.path.join(folder, m)) for m in PROJECT_MARKERS):
            return folder
        parent = os.path.dirname(folder)
        if parent == folder:
            return None
        folder = parent


def _below(path: str, folder: str) -> bool:
    """Whether `path` is `folder` or lies under it (both absolute, normalised)."""
    return path == folder or path.startswith(folder.rstrip(os.sep) + os.sep)


def _too_wide(folder: str) -> bool:
    """A folder never walked as a project: a file system root or the home folder."""
    return os.path.dirname(folder) == folder or folder == os.path.normpath(os.path.expanduser("~"))


def project_roots(paths: Sequence[str], cwd: Optional[str] = None) -> List[str]:
    """The project folders (absolute, normalised, none inside another) of the named `paths`."""
    here = os.path.normpath(cwd or os.getcwd())
    roots: List[str] = []
    loose: List[str] = []  # folders of the named paths with no marker above them
    for raw in paths:
        if raw == "-":
            continue
        path = os.path.normpath(os.path.abspath(raw))
        folder = path if os.path.isdir(path) else os.path.dirname(path)
        marked = marker_folder(folder)
        if marked is None:
            loose.append(folder)
        elif _below(path, here) and not _below(marked, here):
            roots.append(here)  # inside a project, below the current folder: the current folder bounds it
        else:
            roots.append(marked)
    if loose:
        common = os.path.commonpath(loose)
        if not _too_wide(common):
            roots.append(common)
    out: List[str] = []
    for root in sorted(set(roots), key=len):
        if not any(_below(root, r) for r in out):
            out.append(root)
    return out


def project_scope(
    paths: Sequence[str],
    named: Sequence[Tuple[Path, str]],
    excludes_for: ExcludesFor,
    display: Callable[[Path], str],
) -> Optional[ProjectScope]:
    """The program of a run over `paths` whose discovered files are `named` ((path, display
    path) pairs); None when the named paths already are their whole project (`check .` at the
    project's root) or name no project (stdin)."""
    roots = project_roots(paths)
    if not roots:
        return None
    named_folders = {os.path.normpath(os.path.abspath(p)) for p in paths if p != "-" and os.path.isdir(p)}
    if all(r in named_folders for r in roots):
        return None  # every project was named whole: the run is the program
    mine: Dict[str, Tuple[Path, str]] = {}
    for path, shown in named:
        mine.setdefault(os.path.realpath(path), (path, shown))
    files: List[Tuple[Path, str]] = []
    seen = set()
    for path in discover(roots, excludes_for=excludes_for).files:
        real = os.path.realpath(path)
        if real in seen:
            continue
        seen.add(real)
        files.append(mine.get(real) or (path, display(path)))
    files += [pair for real, pair in mine.items() if real not in seen]  # named although excluded
    return ProjectScope(tuple(roots), tuple(files))
