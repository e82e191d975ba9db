"""The project around an open file, as the server sees it: its files, their whole-program
summaries and the link, with the editor's unsaved buffers in place of the files on disk.

A project is the folder holding `pyproject.toml`, `setup.cfg` or `.git` above a file (else the
file's folder). Its files are discovered like `speedlint check <root>` discovers them (excludes,
`.gitignore`); each file's summary comes from the cache by content hash when it can (the
`SummaryStore` that `check` fills), else it is computed (`engine.summarize_and_prelook`); an open
document's summary comes from its buffer. The link (`program.link`) gives each file's seeds, as
in the program phase of `check`: editing `losses/focal.py` changes what `train.py` is told.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple

from speedlint.analyzer.cache import ResultCache, content_hash
from speedlint.analyzer.engine import summarize_and_prelook
from speedlint.analyzer.notebook import Notebook, checked_text, locate_chains
from speedlint.analyzer.parallel import read_bytes
from speedlint.analyzer.program.facts import link
from speedlint.analyzer.program.seeds import FileSeeds
from speedlint.analyzer.runner import SettingsResolver, collect_config_files, collect_files, display_path
from speedlint.analyzer.sources import SourceError

#: Files that mark the root of a project.
ROOT_MARKERS = ("pyproject.toml", "setup.cfg", ".git")
_PROGRAM_SUFFIXES = (".py", ".ipynb")


def project_root(path: Path, workspaces: Sequence[Path] = ()) -> Path:
    """The closest folder above `path` holding a root marker; else the innermost workspace
    folder holding `path`; else the file's folder."""
    folder = path.parent
    for candidate in (folder, *folder.parents):
        if any((candidate / marker).exists() for marker in ROOT_MARKERS):
            return candidate
    holding = [w for w in workspaces if _inside(str(path), w)]
    return max(holding, key=lambda w: len(w.parts)) if holding else folder


@dataclass
class _Summary:
    """A file's summary and what it was computed from (a content hash, or a buffer's version)."""

    key: str
    summary: Optional[Dict[str, Any]]
    cells: Optional[List[List[int]]] = None  # a notebook's line table
    stamp: str = ""  # a file on disk: its modification time and size when it was read


def summarize_text(text: str, notebook: Optional[Notebook]) -> Optional[Dict[str, Any]]:
    """The whole-program summary of a file's analysed text (None when `ast` cannot parse it)."""
    try:
        summary, _ = summarize_and_prelook(text, ())
    except Exception:  # a bug here must not take the project down: the file is left out of the link
        return None
    if summary is not None and notebook is not None:
        summary["cells"] = notebook.line_table()
    return summary


@dataclass
class Project:
    """One project root: its files, summaries (by absolute path) and the latest seeds."""

    root: Path
    resolver: SettingsResolver
    files: List[Path] = field(default_factory=list)  # absolute paths
    config_files: List[str] = field(default_factory=list)
    summaries: Dict[str, _Summary] = field(default_factory=dict)
    seeds: Dict[str, FileSeeds] = field(default_factory=dict)  # display path -> seeds
    cache: Optional[ResultCache] = None
    _linked: List[Tuple[str, int]] = field(default_factory=list)  # the summaries of the last link
    _linked_summaries: Dict[str, Dict[str, Any]] = field(default_factory=dict)
    _items: List[Tuple[str, str, Dict[str, Any]]] = field(default_factory=list)  # what `update` gathered
    _tables: Dict[str, List[List[int]]] = field(default_factory=dict)

    def discover(self) -> None:
        """(Re)discover the project's files and training config files."""
        found = collect_files([str(self.root)], self.resolver)
        self.files = [p.absolute() for p in found.files if p.suffix in _PROGRAM_SUFFIXES]
        self.config_files = collect_config_files([str(self.root)], self.resolver)
        known = {str(p) for p in self.files}
        for path in list(self.summaries):
            if path not in known:
                del self.summaries[path]

    def update(self, buffers: Dict[str, Tuple[str, str]]) -> bool:
        """Bring the summaries up to date (buffers first: absolute path -> (key of the text, the
        text)); returns whether the program must be linked again (some summary changed)."""
        paths = [str(p) for p in self.files]
        listed = set(paths)
        for extra in buffers:  # an open file the discovery did not list (new, or excluded)
            if extra not in listed and _inside(extra, self.root):
                paths.append(extra)
        items: List[Tuple[str, str, Dict[str, Any]]] = []
        tables: Dict[str, List[List[int]]] = {}
        for path in paths:
            entry = self._summary(path, buffers.get(path))
            if entry is None or entry.summary is None:
                continue
            shown = display_path(Path(path))
            items.append((path, shown, entry.summary))
            if entry.cells is not None:
                tables[shown] = entry.cells
        self._items, self._tables = items, tables
        return [(path, id(summary)) for path, _, summary in items] != self._linked

    def same_shape(self, path: str) -> bool:
        """Whether the file's summary lists the same functions and classes as at the last link:
        its seeds (by function ordinal) still name the same functions."""
        now = next((summary for p, _, summary in self._items if p == path), None)
        then = self._linked_summaries.get(path)
        if now is None or then is None:
            return False
        return [f["q"] for f in now["functions"]] == [f["q"] for f in then["functions"]] and list(now["classes"]) == list(then["classes"])

    def relink(self) -> Dict[str, FileSeeds]:
        """Link the summaries `update` gathered (`program.link`); returns the seeds by display
        path, and keeps them."""
        signature = [(path, id(summary)) for path, _, summary in self._items]
        if signature == self._linked:  # no summary changed (an edit inside an expression, a comment ...)
            return self.seeds
        seeds = link(self._items, self.config_files)
        locate_chains(seeds, self._tables)
        self._linked = signature
        self._linked_summaries = {path: summary for path, _, summary in self._items}
        if self.cache is not None:
            try:
                self.cache.summaries.save()  # what this link computed, for `check` and the next start
            except OSError:
                pass
        self.seeds = seeds
        return seeds

    def _summary(self, path: str, buffer: Optional[Tuple[str, str]]) -> Optional[_Summary]:
        if buffer is not None:
            key, text = buffer
            key = f"buffer:{key}"
            known = self.summaries.get(path)
            if known is not None and known.key == key:
                return known
            notebook = _notebook_of(path, text)
            analysed = notebook.text if notebook is not None else text
            summary = summarize_text(analysed, notebook)
            if known is not None and summary is not None and summary == known.summary:
                summary = known.summary  # the same object: the link need not run again
            entry = _Summary(key, summary, notebook.line_table() if notebook is not None else None)
            self.summaries[path] = entry
            return entry
        known = self.summaries.get(path)
        try:
            st = os.stat(path)
            stamp = f"{st.st_mtime_ns}:{st.st_size}"
            if known is not None and known.stamp == stamp:
                return known  # unchanged on disk since it was read
            data = read_bytes(path)
        except (OSError, SourceError):
            self.summaries.pop(path, None)
            return None
        digest = content_hash(data)
        if known is not None and known.key == digest:
            known.stamp = stamp
            return known
        summary = self.cache.summaries.get(digest) if self.cache is not None else None
        cells = None
        if summary is None or path.endswith(".ipynb"):
            try:
                text, notebook = checked_text(data, path)
            except SourceError:
                self.summaries[path] = _Summary(digest, None, None, stamp)
                return self.summaries[path]
            if summary is None:
                summary = summarize_text(text, notebook)
                if summary is not None and self.cache is not None:
                    self.cache.summaries.put(digest, summary)
            cells = notebook.line_table() if notebook is not None else None
        entry = self.summaries[path] = _Summary(digest, summary, cells, stamp)
        return entry


def _inside(path: str, root: Path) -> bool:
    try:
        Path(path).relative_to(root)
    except ValueError:
        return False
    return True


def _notebook_of(path: str, text: str) -> Optional[Notebook]:
    if not path.endswith(".ipynb"):
        return None
    try:
        return Notebook.parse(text.encode("utf-8"))
    except SourceError:
        return None


class Projects:
    """The projects of the open files, each found once by its root."""

    def __init__(self, resolver: SettingsResolver, use_cache: bool = True, workspaces: Sequence[Path] = ()) -> None:
        self.resolver = resolver
        self.use_cache = use_cache
        self.workspaces = list(workspaces)
        self.by_root: Dict[Path, Project] = {}
        self._roots: Dict[Path, Path] = {}  # a file's folder -> its project root

    def of(self, path: Path) -> Project:
        root = self._roots.get(path.parent)
        if root is None:
            root = self._roots[path.parent] = project_root(path, self.workspaces)
        project = self.by_root.get(root)
        if project is None:
            cache = ResultCache(root) if self.use_cache else None
            project = self.by_root[root] = Project(root, self.resolver, cache=cache)
            project.discover()
        return project

    def all(self) -> Sequence[Project]:
        return list(self.by_root.values())


def same_seeds(a: Optional[FileSeeds], b: Optional[FileSeeds]) -> bool:
    """Whether a file's findings can differ between two links (by the seeds' digest)."""
    if a is None or b is None:
        return a is b
    return a.digest() == b.digest()

