"""The config files a run may read: beside the Python files, matching the `config-files` globs.

Checking `src/` looks for config files under `src/`; a Python file named on the command line
has its own folder searched. The same excludes and `.gitignore` rules as for Python files apply.
Which files count is set with `config-files` in `[tool.speedlint]` (gitignore-style globs
relative to the config's folder; `[]` turns config files off). A config file is only ever read
when the checked code reads it, and only reported on then.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Callable, List, Optional, Sequence, Set, Tuple

#: What `config-files` is when a project does not set it.
DEFAULT_CONFIG_GLOBS = ("*.yaml", "*.yml", "*.json", "*.toml", "*.ini", "*.cfg", "*.conf")
#: Larger files are data, not training configs: never read.
MAX_CONFIG_BYTES = 1_000_000

#: folder -> (globs, the folder they are relative to)
GlobsFor = Callable[[Path], Tuple[Sequence[str], Path]]


def discover_config_files(paths: Sequence[str], globs_for: GlobsFor, excludes_for: Callable) -> List[str]:
    """Absolute paths of the config files under the checked folders (and the folders of the
    checked files), sorted."""
    from speedlint.analyzer.discovery import _Ignorer, matches_excludes, resolve, walk

    ignorer = _Ignorer(excludes_for, True)
    roots: List[Path] = []
    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            roots.append(resolve(path))
        elif path.is_file():
            roots.append(resolve(path).parent)
    found: Set[str] = set()
    walked: List[Path] = []
    for root in sorted(set(roots), key=lambda p: len(p.parts)):
        if any(root == w or w in root.parents for w in walked):
            continue  # already under a folder walked
        walked.append(root)
        for name, _ in walk(str(root), ignorer, _not_python):
            file = Path(name)
            globs, base = globs_for(file.parent)
            if not globs:
                continue
            if matches_excludes(file, False, tuple(globs), base):
                try:
                    if file.stat().st_size > MAX_CONFIG_BYTES:
                        continue
                except OSError:
                    continue
                found.add(os.path.normpath(str(file)))
    return sorted(found)


def _not_python(name: str) -> bool:
    """A file that may be a config file (has a suffix, is not Python)."""
    return "." in name and not name.endswith((".py", ".pyi"))


def globs_of(globs: Optional[Sequence[str]]) -> Tuple[str, ...]:
    return DEFAULT_CONFIG_GLOBS if globs is None else tuple(globs)
