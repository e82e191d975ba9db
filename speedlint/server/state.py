"""The server's state, apart from the protocol: options, projects, open documents and their
latest results. `lsp.py` wires it to pygls."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple
from urllib.parse import unquote, urlparse

from speedlint.analyzer.baseline import BaselineError, Entry, apply_baseline, load_baseline
from speedlint.analyzer.cache import content_hash
from speedlint.analyzer.config import Settings, parse_version
from speedlint.analyzer.findings import Diagnostic
from speedlint.analyzer.notebook import Notebook
from speedlint.analyzer.program.seeds import FileSeeds
from speedlint.analyzer.registry import validate_selectors
from speedlint.analyzer.runner import Overrides, SettingsResolver, display_path
from speedlint.analyzer.sources import SourceError
from speedlint.server.analysis import DocumentResult, analyse
from speedlint.server.project import Project, Projects, same_seeds

#: Seconds between the last change of a document and its analysis (`debounceMs` sets it).
DEFAULT_DEBOUNCE = 0.2


@dataclass
class Options:
    """What the client may set (`initializationOptions`, or `workspace/didChangeConfiguration`
    under `speedlint`): the same selection as `check`'s options, and the server's own."""

    select: Optional[Tuple[str, ...]] = None
    ignore: Tuple[str, ...] = ()
    extend_select: Tuple[str, ...] = ()
    preview: Optional[bool] = None
    unsafe_fixes: Optional[bool] = None
    target_torch_version: Optional[str] = None
    config: Optional[str] = None  # a config file for every file (`--config`)
    baseline: Optional[str] = None  # report only findings not in this baseline (`--baseline`)
    debounce: float = DEFAULT_DEBOUNCE
    cache: bool = True

    @classmethod
    def from_json(cls, data: Any, base: "Optional[Options]" = None) -> "Options":
        """The client's options; `base` (the command line's) gives the server's own defaults."""
        base = base or cls()
        if not isinstance(data, dict):
            return cls(debounce=base.debounce, cache=base.cache)
        data = data.get("speedlint", data) if isinstance(data.get("speedlint"), dict) else data

        def codes(key: str) -> Tuple[str, ...]:
            value = data.get(key) or ()
            return tuple(str(v) for v in ([value] if isinstance(value, str) else value))

        def flag(key: str) -> Optional[bool]:
            value = data.get(key)
            return bool(value) if value is not None else None

        debounce = data.get("debounceMs")
        return cls(
            select=codes("select") or None,
            ignore=codes("ignore"),
            extend_select=codes("extendSelect"),
            preview=flag("preview"),
            unsafe_fixes=flag("unsafeFixes"),
            target_torch_version=data.get("targetTorchVersion"),
            config=data.get("config"),
            baseline=data.get("baseline"),
            debounce=max(float(debounce), 0.0) / 1000 if isinstance(debounce, (int, float)) else base.debounce,
            cache=base.cache and data.get("cache", True) is not False,
        )

    def resolver(self) -> SettingsResolver:
        """Raises `ConfigError` / `SelectionError` for bad options, like the CLI."""
        validate_selectors([*(self.select or ()), *self.ignore, *self.extend_select])
        ttv = parse_version(self.target_torch_version) if self.target_torch_version else None
        overrides = Overrides(
            select=self.select, ignore=self.ignore, extend_select=self.extend_select, preview=self.preview,
            unsafe_fixes=self.unsafe_fixes, target_torch_version=ttv,
        )
        return SettingsResolver(overrides, config=Path(self.config) if self.config else None)


def path_of(uri: str) -> Optional[Path]:
    """The file system path of a `file:` URI (None for other schemes: untitled buffers, cells)."""
    parsed = urlparse(uri)
    if parsed.scheme != "file":
        return None
    path = unquote(parsed.path)
    if os.name == "nt" and path.startswith("/") and len(path) > 2 and path[2] == ":":  # pragma: no cover
        path = path[1:]
    return Path(path)


@dataclass
class Document:
    """An open document (a Python file, or a notebook built from its cells)."""

    uri: str
    path: Path  # absolute
    text: str  # a notebook: its JSON
    version: Optional[int] = None
    cells: List[str] = field(default_factory=list)  # a notebook: the cell URIs, every cell
    result: Optional[DocumentResult] = None
    analysed: Optional[str] = None  # the key of the text `result` is for
    seeds: Optional[FileSeeds] = None

    @property
    def key(self) -> str:
        return content_hash(self.text.encode("utf-8", "surrogatepass"))

    @property
    def is_notebook(self) -> bool:
        return self.path.suffix == ".ipynb"


class State:
    def __init__(self, options: Options, workspaces: Sequence[Path] = ()) -> None:
        self.options = options
        self.projects = Projects(options.resolver(), use_cache=options.cache, workspaces=workspaces)
        self.documents: Dict[str, Document] = {}
        self._baseline: Optional[Tuple[List[Entry], Path]] = None
        self.problems: List[str] = []  # messages for the client's log (a bad baseline ...)
        if options.baseline:
            try:
                self._baseline = (load_baseline(Path(options.baseline)), Path(options.baseline).absolute().parent)
            except BaselineError as exc:
                self.problems.append(str(exc))

    def settings(self, doc: Document) -> Settings:
        return self.projects.resolver.for_file(doc.path)

    def project(self, doc: Document) -> Project:
        return self.projects.of(doc.path)

    def buffers(self, project: Project) -> Dict[str, Tuple[str, str]]:
        return {str(d.path): (d.key, d.text) for d in self.documents.values() if self.projects.of(d.path) is project}

    def refresh(self, changed: Optional[Document], publish: Callable[[Document], None]) -> None:
        """Bring the open documents up to date after `changed` changed (None: everything may
        have): update the summaries of its project, link it again when a summary changed, and
        analyse (and `publish`) the documents whose text or seeds changed.

        While the program is linked again, `changed` is published first with the seeds of the
        last link when its functions are the same ones (the common case: its seeds rarely
        change); if the link gives it other seeds, it is analysed and published again."""
        if changed is not None:
            projects = [self.project(changed)]
        else:
            projects = list({id(p): p for p in (self.project(d) for d in self.documents.values())}.values())
        for project in projects:
            published = set()
            must_link = project.update(self.buffers(project))
            if must_link and changed is not None and changed.result is not None and project.same_shape(str(changed.path)):
                self.analyse(changed)
                publish(changed)
                published.add(changed.uri)
            seeds = project.relink() if must_link else project.seeds
            for doc in list(self.documents.values()):
                if self.projects.of(doc.path) is not project:
                    continue
                new = seeds.get(display_path(doc.path))
                if doc.analysed == doc.key and same_seeds(doc.seeds, new):
                    if doc is changed and doc.uri not in published:
                        publish(doc)  # a new version with the same text: published again
                    continue
                doc.seeds = new
                self.analyse(doc)
                publish(doc)

    def analyse(self, doc: Document) -> DocumentResult:
        shown = display_path(doc.path)
        settings = self.settings(doc)
        notebook = None
        text = doc.text
        if doc.is_notebook:
            try:
                notebook = Notebook.parse(doc.text.encode("utf-8"))
            except SourceError as exc:
                doc.result, doc.analysed = DocumentResult(diagnostics=[Diagnostic(shown, str(exc))]), doc.key
                return doc.result
            text = notebook.text
        suspects = [code for code, _ in doc.result.failed] if doc.result is not None else []
        result = analyse(text, shown, settings, doc.seeds, notebook, suspects)
        if self._baseline is not None:
            entries, base = self._baseline
            result.findings, _ = apply_baseline(result.findings, entries, base, {shown: text}, [shown])
        doc.result, doc.analysed = result, doc.key
        return result

    def current(self, doc: Document) -> DocumentResult:
        """The findings of the document's current text (analysed now if it changed since)."""
        if doc.result is None or doc.analysed != doc.key:
            return self.analyse(doc)
        return doc.result

    def uri_of(self, shown: str) -> Optional[str]:
        path = Path(shown)
        path = path if path.is_absolute() else Path.cwd() / path
        return path.resolve().as_uri() if path.exists() else None
