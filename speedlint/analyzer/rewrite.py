"""`speedlint fix`: fix files to a fixed point, show the diff or write atomically."""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, List, Optional, Sequence

from speedlint.analyzer.fixing import FixOutcome, fix_text
from speedlint.analyzer.notebook import is_notebook
from speedlint.analyzer.notebook_fix import NotebookFixOutcome, fix_notebook_file, fix_notebook_text
from speedlint.analyzer.rule import Diagnostic
from speedlint.analyzer.runner import SettingsResolver, collect_files, display_path, rules_for
from speedlint.analyzer.sources import SourceError, read_source, write_atomic

if TYPE_CHECKING:  # pragma: no cover
    from speedlint.analyzer.program import FileSeeds


@dataclass
class FixRun:
    outcomes: List[FixOutcome] = field(default_factory=list)
    missing: List[str] = field(default_factory=list)
    diagnostics: List[Diagnostic] = field(default_factory=list)
    written: List[str] = field(default_factory=list)

    @property
    def changed(self) -> List[FixOutcome]:
        return [o for o in self.outcomes if o.changed]


_LINES = re.compile(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+$")


def unified_diff(outcome: FixOutcome) -> str:
    if isinstance(outcome, NotebookFixOutcome):
        return outcome.diff()  # per changed cell, named `path:cell N`
    a = _LINES.findall(outcome.original)  # lines end at line breaks only (not at form feeds)
    b = _LINES.findall(outcome.fixed)
    lines = difflib.unified_diff(a, b, fromfile=f"a/{outcome.path}", tofile=f"b/{outcome.path}")
    # a last line without a line break gets one and a marker, as `diff` and git write it
    return "".join(line if line.endswith(("\n", "\r")) else line + "\n\\ No newline at end of file\n" for line in lines)


def fix_source_file(path: Path, shown: str, resolver: SettingsResolver, apply: bool, seeds: "Optional[FileSeeds]" = None) -> tuple:  # type: ignore[type-arg]
    """Fix one file; returns (outcome or None, diagnostics, written?). `seeds`: what the whole
    program says about it (`speedlint.analyzer.program`), so that `fix` sees what `check` sees."""
    if is_notebook(path):
        settings = resolver.for_file(path)
        return fix_notebook_file(path, shown, rules_for(settings), settings, apply, seeds)
    try:
        source = read_source(path)
    except SourceError as exc:
        return None, [Diagnostic(shown, str(exc))], False
    settings = resolver.for_file(path)
    outcome = fix_text(source.text, shown, rules_for(settings), settings, unsafe=settings.unsafe_fixes, seeds=seeds)
    if not (apply and outcome.changed):
        return outcome, [], False
    try:
        write_atomic(path, source.encode(outcome.fixed))
    except SourceError as exc:
        return outcome, [Diagnostic(shown, f"cannot write fixes: {exc}", "write-error")], False
    except UnicodeEncodeError as exc:
        return outcome, [Diagnostic(shown, f"fixed code cannot be encoded as {source.encoding}: {exc}; not modified", "write-error")], False
    return outcome, [], True


def fix_paths(paths: Sequence[str], resolver: SettingsResolver, apply: bool, force_exclude: bool = False) -> FixRun:
    from speedlint.analyzer.parallel import default_jobs, program_seeds

    found = collect_files(paths, resolver, force_exclude)
    run = FixRun(missing=found.missing)
    files = [(path, display_path(path)) for path in found.files]
    seeds, _ = program_seeds(files, None, default_jobs())
    for index, (path, shown) in enumerate(files):
        outcome, diags, written = fix_source_file(path, shown, resolver, apply, seeds.get(index))
        if outcome is not None:
            run.outcomes.append(outcome)
        run.diagnostics.extend(diags)
        if written:
            run.written.append(shown)
    return run


def fix_stdin(text: str, filename: str, resolver: SettingsResolver) -> FixOutcome:
    settings = resolver.for_file(Path(filename))
    if is_notebook(filename):  # stdin holds the notebook's JSON: so does the output
        return fix_notebook_text(text, filename, rules_for(settings), settings)
    return fix_text(text, filename, rules_for(settings), settings, unsafe=settings.unsafe_fixes)
